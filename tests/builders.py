"""Small builders for tests: ``make_*`` functions with sensible defaults, keyword overrides."""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

from django.core.management import call_command

from candidates.models import Budget, Candidate, Slot
from schedules.models import WorkflowCase


def load_reference_catalog() -> None:
    """The shipped reference data: 3 budgets, 5 slots, 7 candidates, 12 cases, 8 chaos scenarios."""
    call_command("load_reference", stdout=_Null())


class _Null:
    def write(self, *_: Any) -> None:
        pass

    def flush(self) -> None:
        pass


def make_budget(**overrides: Any) -> Budget:
    values: dict[str, Any] = {
        "name": f"budget-{Budget.objects.count() + 1}",
        "max_latency_ms": 180_000,
        "max_attempts": 3,
        "max_cost_usd": Decimal("1.5"),
        "max_total_tokens": 100_000,
    }
    values.update(overrides)
    budget = Budget(**values)
    budget.full_clean()
    budget.save()
    return budget


def make_slot(**overrides: Any) -> Slot:
    values: dict[str, Any] = {"key": f"slot-{Slot.objects.count() + 1}", "position": Slot.objects.count()}
    values.update(overrides)
    slot = Slot(**values)
    slot.full_clean()
    slot.save()
    return slot


def make_candidate(**overrides: Any) -> Candidate:
    slot = overrides.pop("slot", None) or make_slot()
    budget = overrides.pop("budget", None) or make_budget()
    values: dict[str, Any] = {
        "key": f"candidate-{Candidate.objects.count() + 1}",
        "slot": slot,
        "position": slot.candidates.count(),
        "adapter": "codex_app_server",
        "provider": "codex",
        "model": "gpt-5.6-luna",
        "tier": "strong",
        "required_environment": ["OPENAI_API_KEY"],
        "budget": budget,
    }
    values.update(overrides)
    candidate = Candidate(**values)
    candidate.full_clean()
    candidate.save()
    return candidate


def make_case(**overrides: Any) -> WorkflowCase:
    values: dict[str, Any] = {
        "key": f"case-{WorkflowCase.objects.count() + 1}",
        "title": "A workflow case",
        "tags": ["response"],
        "providers": ["codex", "opencode", "acpx"],
        "steps": [{"kind": "run_start", "taskMode": "ask"}],
        "assertions": {"requiredOperationIds": ["finish_task"]},
        "repetitions": 1,
        "position": WorkflowCase.objects.count(),
    }
    values.update(overrides)
    case = WorkflowCase(**values)
    case.full_clean()
    case.save()
    return case


def completed_observation(entry: dict[str, Any], *, cost_usd: float | None = 0.01, provider: str = "codex") -> dict[str, Any]:
    """A minimal ``completed`` observation for a schedule entry document, as an executor would return."""
    metrics: dict[str, Any] = {"attempts": 1, "toolCount": 2, "totalTokens": 1200}
    if cost_usd is not None:
        metrics["costUsd"] = cost_usd
    check = {"id": "finished", "passed": True}
    return copy.deepcopy(
        {
            "schema": "paperclip.runner.workflow-observation.v1",
            "caseId": entry["caseId"],
            "candidateId": entry["candidateId"],
            "provider": provider,
            "classification": "completed",
            "base": {"caseId": entry["caseId"]},
            "lifecycle": {"checks": [check]},
            "continuation": {"checks": [check]},
            "presentation": {"checks": [check]},
            "traceLineage": {
                "capture": "off",
                "frameCount": 0,
                "byteCount": 0,
                "digestVerified": False,
                "ordered": False,
                "dispositions": [],
                "lineage": [],
            },
            "metrics": metrics,
            "observedPrpEventTypes": ["run.terminal"],
            "artifactDigests": [],
        }
    )
