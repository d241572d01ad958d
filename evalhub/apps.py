from django.apps import AppConfig


class EvalhubConfig(AppConfig):
    name = "evalhub"
    verbose_name = "evalhub"

    def ready(self) -> None:
        from evalhub import checks  # noqa: F401  (registers the system checks)
