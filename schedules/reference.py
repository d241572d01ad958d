"""The shipped reference data loaded into the catalog (``manage.py load_reference``)."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from candidates.services import import_manifest, load_reference_budgets
from evalhub import reference_data
from schedules.services import load_cases, load_chaos_scenarios


@dataclass(frozen=True)
class ReferenceLoad:
    """What a load did: ``slots`` and ``candidates`` in the catalog after it, and how many
    ``budgets``, ``cases`` and chaos ``scenarios`` it created."""

    budgets: int
    slots: int
    candidates: int
    cases: int
    scenarios: int


def load_reference_data() -> ReferenceLoad:
    """Load the reference budgets, candidate manifest, workflow cases (with their prompts) and
    chaos scenarios, all or nothing; safe to run twice.

    Raises ``ManifestError`` or ``ValidationError`` when the shipped data does not load (then
    nothing has changed).
    """
    with transaction.atomic():
        budgets = load_reference_budgets(reference_data.load("budgets.json")["budgets"])
        summary = import_manifest(reference_data.load("candidate-manifest.json"))
        cases = load_cases(reference_data.load("workflow-cases.json")["cases"], prompts=reference_data.load("case-prompts.json"))
        scenarios = load_chaos_scenarios(reference_data.load("chaos-scenarios.json")["scenarios"])
    return ReferenceLoad(budgets=budgets, slots=summary.slots, candidates=summary.candidates, cases=cases, scenarios=scenarios)
