"""The WSGI application gunicorn serves (``gunicorn evalhub.wsgi``; docs/production.md).

Under the production profile the system checks run when the app loads, at error level: a server
on the built-in secret key or with local-only hosts (evalhub/checks.py) refuses to start instead
of serving. ``runserver`` runs them itself.
"""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalhub.settings")
application = get_wsgi_application()


def _refuse_a_misconfigured_production_server() -> None:
    from django.conf import settings
    from django.core.management import call_command

    if getattr(settings, "PRODUCTION", False):
        # Raises SystemCheckError naming every error; gunicorn's worker then fails to boot.
        call_command("check", deploy=True, fail_level="ERROR")


_refuse_a_misconfigured_production_server()
