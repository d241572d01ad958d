"""``manage.py api_token create|list|revoke USER``: API tokens, stored hashed with an expiry."""

from __future__ import annotations

from django.core.management.base import CommandError
from django.utils import timezone
from knox.models import AuthToken

from evalhub.commands import DatabaseCommand
from evalhub.tokens import TokenError, create_token, revoke_tokens, token_user


class Command(DatabaseCommand):
    help = (
        "Create an API token for a user (printed once: it is stored only as a hash), list a user's tokens, or revoke "
        "them (all, or one by the first characters `list` shows). Clients send `Authorization: Token <token>`."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("action", choices=["create", "list", "revoke"])
        parser.add_argument("username")
        parser.add_argument("--days", type=int, default=90, help="create: days until the token expires (default 90).")
        parser.add_argument("--key", help="revoke: only the token starting with these characters (at least 8).")

    def handle(self, *args, **options) -> None:
        try:
            user = token_user(options["username"])
            if options["action"] == "create":
                token, secret = create_token(user=user, days=options["days"])
                self.stderr.write(f"token for {user.username}, expires {token.expiry:%Y-%m-%d %H:%M} UTC (shown once; store it now):")
                self.stdout.write(secret)
            elif options["action"] == "list":
                now = timezone.now()
                for token in AuthToken.objects.filter(user=user).order_by("created"):
                    state = "expired" if token.expiry and token.expiry < now else "active"
                    self.stdout.write(
                        f"{token.token_key[:8]}…  created {token.created:%Y-%m-%d %H:%M}  expires {token.expiry:%Y-%m-%d %H:%M} UTC  {state}"
                    )
            else:
                count = revoke_tokens(user=user, key=options["key"])
                self.stdout.write(f"revoked {count} token(s) of {user.username}")
        except TokenError as exc:
            raise CommandError(str(exc)) from None
