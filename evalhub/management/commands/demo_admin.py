"""``manage.py demo_admin``: create the local demo admin account and print how to sign in."""

from __future__ import annotations

import secrets
import string

from django.contrib.auth import get_user_model

from evalhub.commands import DatabaseCommand

PASSWORD_ALPHABET = string.ascii_letters + string.digits


def new_password(length: int = 16) -> str:
    """A random password of letters and digits (nothing a shell or a URL would trip over)."""
    return "".join(secrets.choice(PASSWORD_ALPHABET) for _ in range(length))


class Command(DatabaseCommand):
    help = (
        "Create the local 'admin' account used by `make demo` and print its password. An existing account "
        "keeps its password (so re-running the demo does not sign you out) unless --reset is given."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--username", default="admin")
        parser.add_argument("--reset", action="store_true", help="Give an existing account a new password.")

    def handle(self, *args, **options) -> None:
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(username=options["username"], defaults={"is_staff": True, "is_superuser": True})
        fields = []
        if not (user.is_staff and user.is_superuser):
            user.is_staff = user.is_superuser = True
            fields += ["is_staff", "is_superuser"]
        password = None
        if created or options["reset"] or not user.has_usable_password():
            password = new_password()
            user.set_password(password)
            fields.append("password")
        if fields:
            user.save(update_fields=fields)
        if password is None:
            self.stdout.write(
                f"demo admin exists: sign in as {user.username} with the password printed when it was created "
                f"(`manage.py demo_admin --reset` prints a new one)"
            )
            return
        verb = "created" if created else "reset"
        self.stdout.write(f"demo admin {verb}: sign in as {user.username} with password {password}")
