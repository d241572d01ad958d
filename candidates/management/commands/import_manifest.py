"""``manage.py import_manifest FILE``: make the catalog equal to a manifest file."""

from __future__ import annotations

from django.core.management.base import CommandError

from candidates.services import ManifestError, import_manifest
from evalhub.commands import DatabaseCommand, read_json


def count(number: int, noun: str) -> str:
    """``1 slot``, ``2 slots``."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


class Command(DatabaseCommand):
    help = (
        "Make the candidate catalog equal to FILE (the format of export_manifest). All or nothing: "
        "a file that fails validation changes nothing and every problem is listed."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", help="Path to a manifest JSON file, or - for standard input.")

    def handle(self, *args, **options) -> None:
        path = options["file"]
        document = read_json(path)
        try:
            summary = import_manifest(document)
        except ManifestError as exc:
            listing = "\n".join(f"  - {problem}" for problem in exc.problems)
            raise CommandError(f"{path} was not imported; nothing changed. Fix these problems:\n{listing}") from None
        self.stdout.write(
            f"imported {path}: {count(summary.slots, 'slot')}, {count(summary.candidates, 'candidate')} "
            f"({count(summary.removed_candidates, 'candidate')} and {count(summary.removed_slots, 'slot')} removed, "
            f"{count(summary.created_budgets, 'budget')} created)"
        )
