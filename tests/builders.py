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
        "model": f"gpt-5.6-model-{Candidate.objects.count() + 1}",
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


def completed_observation(entry: dict[str, Any], *, cost_usd: Any = 0.01, provider: str = "codex") -> dict[str, Any]:
    """A ``completed`` observation for a schedule entry document, as an executor would return it.

    Based on the reference vector ``dev-completed-trace-lineage-full`` (valid, scores 1 and passes
    for every case of the catalog), with the entry's case, candidate and execution id and the
    given provider. ``cost_usd`` becomes ``metrics.costUsd`` (left out when None); the base's
    efficiency keeps the vector's values, so any cost still scores a pass.
    """
    execution_id = str(entry.get("executionId", "rwe-0000000000000000"))
    short = execution_id.removeprefix("rwe-")[:6]
    # The document is a fresh literal: only the values given from outside are copied (a no-op
    # executor of the cluster benchmark builds one per execution; copying it all was its cost).
    case_id = copy.deepcopy(entry["caseId"])
    cost_usd = copy.deepcopy(cost_usd)
    provider = copy.deepcopy(provider)
    metrics: dict[str, Any] = {
        "timeToFirstVisibleProgressMs": 2400,
        "settlementMs": 41000,
        "attempts": 1,
        "toolCount": 2,
        "totalTokens": 1200,
    }
    if cost_usd is not None:
        metrics["costUsd"] = cost_usd
    passed = [{"id": check_id, "passed": True} for check_id in ("terminal-authority", "attempt-bound", "owned-wait")]
    return {
        "schema": "paperclip.runner.workflow-observation.v1",
        "caseId": case_id,
        "candidateId": copy.deepcopy(entry["candidateId"]),
        "provider": provider,
        "classification": "completed",
        "base": {
            "caseId": case_id,
            "provenance": {"source": "live_model", "behavior": case_id},
            "controlPlaneOwned": False,
            "expectedCalls": ["finish_task"],
            "observedCalls": ["finish_task"],
            "forbiddenCalls": [],
            "finalState": {"expected": "mutated", "observed": "mutated"},
            "authorization": {"expected": "allowed", "observed": "allowed"},
            "trace": {
                "runId": execution_id,
                "sessionId": f"eval-{execution_id}",
                "turnId": "turn-1",
                "itemId": f"evidence-{short}-1",
                "receiptIds": [f"receipt-{short}-1"],
                "terminalPresent": True,
            },
            "efficiency": {"latencyMs": 60000, "totalTokens": 24000, "costUsd": 0.05, "attempts": 1},
            "budget": {"maxLatencyMs": 150000, "maxAttempts": 3, "maxCostUsd": 0.2, "maxTotalTokens": 64000},
        },
        "lifecycle": {"checks": passed, "attempts": 1, "runs": 1, "recoveryOwner": "none"},
        "continuation": {"checks": [{"id": "required-calls", "passed": True}, {"id": "no-repeated-work", "passed": True}]},
        "presentation": {
            "checks": [{"id": "first-visible-progress", "passed": True}, {"id": "terminal-presentation", "passed": True}],
            "responseSource": "final_agent_message",
            "commentCount": 1,
        },
        "traceLineage": {
            "capture": "on",
            "frameCount": 120,
            "byteCount": 90210,
            "digestVerified": True,
            "ordered": True,
            "dispositions": ["operator_only", "rejected", "ignored", "generic", "mapped"],
            "lineage": ["many_to_one", "one_to_many", "one_to_one"],
            "traceRef": "sha256:41a704e0254864ee7e20f6838c796e657864332d277a10dd2e70b46b7eb40b08",
        },
        "metrics": metrics,
        "observedPrpEventTypes": ["item.started", "item.completed", "run.terminal"],
        "artifactDigests": [],
    }
