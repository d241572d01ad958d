"""``manage.py load_reference``: load the shipped reference data (safe to run twice)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from candidates.services import ManifestError
from evalhub.commands import DatabaseCommand
from schedules.reference import load_reference_data


class Command(DatabaseCommand):
    help = "Load the reference catalog: 3 budgets, 5 slots with 7 candidates, 12 workflow cases with their prompts, 8 chaos scenarios."

    def handle(self, *args, **options) -> None:
        try:
            loaded = load_reference_data()
        except (ManifestError, ValidationError) as exc:
            raise CommandError(f"the reference data did not load: {exc}") from None
        self.stdout.write(
            f"reference data loaded: {loaded.slots} slots, {loaded.candidates} candidates, "
            f"{loaded.budgets} new budgets, {loaded.cases} new workflow cases, {loaded.scenarios} new chaos scenarios"
        )
