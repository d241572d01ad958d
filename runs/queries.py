"""Read-side queries for the run pages: each page's rows in a fixed number of queries.

The counts per classification are annotated on the run rows (one query for a whole page of
runs), so the history page costs the same with 3 runs or 3,000.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from django.db.models import Count, Q, QuerySet

from runs.models import Classification, Execution, Run

ENVIRONMENT_MISSING = "qualification_environment_missing"
CEILING_REACHED = "campaign_cost_ceiling_reached"


def _count(**lookup: str) -> Count:
    return Count("executions", filter=Q(**{f"executions__{name}": value for name, value in lookup.items()}))


def run_history() -> QuerySet[Run]:
    """Runs, newest first, with their schedule and counts per classification annotated:
    ``execution_count``, ``completed_count``, ``candidate_failure_count``,
    ``infrastructure_failure_count``, ``skipped_count`` and ``environment_missing_count``."""
    return (
        Run.objects.select_related("schedule")
        .annotate(
            execution_count=Count("executions"),
            completed_count=_count(classification=Classification.COMPLETED),
            candidate_failure_count=_count(classification=Classification.CANDIDATE_FAILURE),
            infrastructure_failure_count=_count(classification=Classification.INFRASTRUCTURE_FAILURE),
            skipped_count=_count(classification=Classification.SKIPPED),
            environment_missing_count=_count(failure_code=ENVIRONMENT_MISSING),
        )
        .order_by("-created_at", "-id")
    )


def run_page() -> QuerySet[Run]:
    """Runs with their schedule loaded (look one up by pk)."""
    return Run.objects.select_related("schedule")


def run_executions(run: Run) -> list[Execution]:
    """The run's executions in schedule order, each with ``attempt_count`` annotated (one query)."""
    return list(run.executions.annotate(attempt_count=Count("attempts")).order_by("position", "id"))


@dataclass(frozen=True)
class MissingEnvironment:
    """Executions skipped because required variables were not set: the variable names and how
    many executions each one stopped, and which candidates were affected."""

    executions: int
    names: list[tuple[str, int]]
    candidates: list[str]


def missing_environment(executions: list[Execution]) -> MissingEnvironment:
    """Read the names from the skipped executions' failure messages
    ("required qualification environment is missing: A, B"); the values were never recorded."""
    names: Counter[str] = Counter()
    candidates: dict[str, None] = {}
    count = 0
    for execution in executions:
        if execution.failure_code != ENVIRONMENT_MISSING:
            continue
        count += 1
        candidates.setdefault(execution.candidate_key)
        _, _, listed = execution.failure_message.rpartition(": ")
        names.update(name.strip() for name in listed.split(",") if name.strip())
    return MissingEnvironment(count, sorted(names.items()), list(candidates))
