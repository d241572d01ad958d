"""The base of evalhub's management commands that read or write the database.

Django's own ``requires_migrations_checks`` only prints a notice and lets the command go on to
fail with a traceback (``no such table: candidates_slot``) on a database that was never
migrated. :class:`DatabaseCommand` refuses to start instead, with the command to run.

Its error messages quote what was typed (``there is no run …``, ``unknown chaos scenario …``,
argparse's ``invalid int value: …``): a key pasted into the wrong argument is redacted there, as
the settings never quote a secret-shaped value (``evalhub.settings._shown``).
"""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS, DatabaseError, OperationalError, connections
from django.db.migrations.executor import MigrationExecutor

from evalhub.jsonio import loads_strict
from evalhub.secrets import redact


def read_json(path: str) -> Any:
    """The JSON document at ``path`` (``-``: standard input), read strictly (no NaN, Infinity or
    1e309); ``CommandError`` saying what is wrong otherwise."""
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        return loads_strict(text)
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise CommandError(f"{path} is not valid JSON: {exc}") from None


def unapplied_migrations(alias: str = DEFAULT_DB_ALIAS) -> list[str]:
    """``["app.0001_initial", ...]``: the migrations the database ``alias`` still lacks.

    Raises :class:`CommandError` when the database cannot be reached at all (the message names
    the database and the cause, never a password: Django's error text holds none)."""
    connection = connections[alias]
    try:
        executor = MigrationExecutor(connection)
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError as exc:
        raise CommandError(f"cannot read the database ({connection.vendor} {connection.settings_dict.get('NAME')}): {exc}") from None
    return [f"{migration.app_label}.{migration.name}" for migration, backwards in plan if not backwards]


def require_migrated(*, then: str = "") -> None:
    """Raise :class:`CommandError` naming the apps whose migrations the default database lacks and
    the command to run (followed by ``then``, e.g. ", then start the worker"); nothing when it has them all."""
    missing = unapplied_migrations()
    if missing:
        apps = sorted({name.split(".", 1)[0] for name in missing})
        raise CommandError(
            f"the database is not migrated ({len(missing)} migration(s) of {', '.join(apps)} not applied): "
            f"run `python manage.py migrate` first (`make demo` does it){then}"
        )


class DatabaseCommand(BaseCommand):
    """A command that needs a migrated database: it stops with a clear error, before doing
    anything, when migrations are missing; interrupted (Ctrl-C, or SIGTERM where the command
    maps it to an interrupt), it exits with status 130 and one line instead of a traceback; a
    database another process holds locked past SQLite's wait (or that stops answering) is one
    line saying so, after the retries the bookkeeping makes."""

    requires_migrations_checks = True

    def create_parser(self, prog_name, subcommand, **kwargs):
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        error = parser.error
        parser.error = lambda message: error(redact(message))
        return parser

    def execute(self, *args, **options):
        try:
            return super().execute(*args, **options)
        except CommandError as exc:
            message = str(exc)
            if redact(message) == message:
                raise
            raise CommandError(redact(message), returncode=exc.returncode) from None
        except KeyboardInterrupt as exc:
            cause = redact(str(exc)) or "Ctrl-C"
            raise CommandError(
                f"interrupted ({cause}): the runtimes it started were stopped, and a run in progress is recorded as failed "
                "with the reason on its page",
                returncode=130,
            ) from None
        except OperationalError as exc:
            alias = options.get("database") or DEFAULT_DB_ALIAS
            settings_dict = connections[alias].settings_dict
            raise CommandError(
                redact(
                    f"the database ({connections[alias].vendor} {settings_dict.get('NAME')}) did not answer: {exc}. "
                    "If another process holds it (a long write, a hung worker), let it finish or stop it, then run this again"
                )
            ) from None

    def check_migrations(self) -> None:
        require_migrated()
