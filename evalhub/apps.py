from axes.apps import AppConfig as AxesAppConfig
from django.apps import AppConfig


class EvalhubConfig(AppConfig):
    name = "evalhub"
    verbose_name = "evalhub"
    # This module holds several configs (knox's and axes's below): without ``default`` Django picks
    # none of them for "evalhub", ready() never runs and no system check is registered.
    default = True

    def ready(self) -> None:
        from django.contrib import admin

        from evalhub import checks  # noqa: F401  (registers the system checks)
        from evalhub.admin_forms import check_every_admins_actions

        # django.contrib.admin comes first in INSTALLED_APPS, so its ready() has imported every
        # app's admin module by now: the site holds all the admins it will show.
        check_every_admins_actions(admin.site)


class ApiTokensConfig(AppConfig):
    """django-rest-knox under a name the admin's readers know ("API tokens", not "Knox")."""

    name = "knox"
    verbose_name = "API tokens"


class SignInLockoutsConfig(AxesAppConfig):
    """django-axes under a name the admin's readers know ("Sign-in lockouts", not "Axes")."""

    verbose_name = "Sign-in lockouts"
