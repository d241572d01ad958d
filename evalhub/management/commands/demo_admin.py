"""``manage.py demo_admin``: create (or reset) the local demo admin account and print how to sign in."""

from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create or reset the local 'admin' account used by `make demo`, and print its sign-in details."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--username", default="admin")

    def handle(self, *args, **options) -> None:
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(
            username=options["username"], defaults={"is_staff": True, "is_superuser": True}
        )
        password = secrets.token_urlsafe(12)
        user.set_password(password)
        user.is_staff = user.is_superuser = True
        user.save(update_fields=["password", "is_staff", "is_superuser"])
        verb = "created" if created else "reset"
        self.stdout.write(f"demo admin {verb}: sign in as {user.username} with password {password}")
