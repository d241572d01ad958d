"""``manage.py load_reference``: load the shipped reference data (safe to run twice)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError
from django.db import transaction

from candidates.services import ManifestError, import_manifest, load_reference_budgets
from evalhub import reference_data
from evalhub.commands import DatabaseCommand
from schedules.services import load_cases, load_chaos_scenarios


class Command(DatabaseCommand):
    help = "Load the reference catalog: 3 budgets, 5 slots with 7 candidates, 12 workflow cases with their prompts, 8 chaos scenarios."

    def handle(self, *args, **options) -> None:
        try:
            with transaction.atomic():
                budgets = load_reference_budgets(reference_data.load("budgets.json")["budgets"])
                summary = import_manifest(reference_data.load("candidate-manifest.json"))
                cases = load_cases(reference_data.load("workflow-cases.json")["cases"], prompts=reference_data.load("case-prompts.json"))
                scenarios = load_chaos_scenarios(reference_data.load("chaos-scenarios.json")["scenarios"])
        except (ManifestError, ValidationError) as exc:
            raise CommandError(f"the reference data did not load: {exc}") from None
        self.stdout.write(
            f"reference data loaded: {summary.slots} slots, {summary.candidates} candidates, "
            f"{budgets} new budgets, {cases} new workflow cases, {scenarios} new chaos scenarios"
        )
