"""Read-side queries for the candidates page: the line-up with qualification status."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import Exists, OuterRef

from candidates.models import Candidate, Slot
from candidates.services import catalog_queryset


@dataclass(frozen=True)
class VariableStatus:
    """A required environment variable's name and whether it is set (non-empty). Never its value."""

    name: str
    is_set: bool


@dataclass(frozen=True)
class CandidateRow:
    candidate: Candidate
    plays_this_week: bool
    environment: list[VariableStatus]

    @property
    def qualified(self) -> bool:
        return all(variable.is_set for variable in self.environment)


@dataclass(frozen=True)
class SlotRow:
    slot: Slot
    candidates: list[CandidateRow]


def catalog_overview(*, environ: Mapping[str, str], rotation_day: int) -> list[SlotRow]:
    """Slots in order with their candidates (two queries). A variable set to an empty string
    counts as missing, as it does when a run qualifies a candidate (known-failure-modes B8)."""
    rows = []
    for slot in catalog_queryset():
        candidates = list(slot.candidates.all())
        playing = candidates[rotation_day % len(candidates)] if candidates else None
        rows.append(
            SlotRow(
                slot,
                [
                    CandidateRow(
                        candidate,
                        candidate is playing,
                        [
                            VariableStatus(name, bool(environ.get(name)))
                            for name in (candidate.required_environment if isinstance(candidate.required_environment, list) else [])
                            if isinstance(name, str)
                        ],
                    )
                    for candidate in candidates
                ],
            )
        )
    return rows


# --- one candidate's history ---------------------------------------------------------------------

#: How many of the candidate's newest runs its page charts.
HISTORY_RUNS = 30


@dataclass(frozen=True)
class TrendPoint:
    """One non-refresh run as the candidate's charts plot it (None: nothing to plot that night).

    ``pass_rate`` is passed / scoreable; ``mean_score`` the mean overall score of the scored
    executions; ``p95_latency_ms`` the nearest-rank 95th percentile of the observations'
    ``metrics.settlementMs`` (as the reference's latency alert computes it); ``cost_usd`` the
    priced executions' cost, with ``unpriced`` counting those whose cost is unknown.
    """

    run_id: int
    night: Any
    executions: int
    scoreable: int
    passed: int
    pass_rate: float | None
    mean_score: float | None
    p95_latency_ms: float | None
    cost_usd: float | None
    unpriced: int

    @property
    def label(self) -> str:
        return f"run {self.run_id} · {self.night:%Y-%m-%d}" if self.night else f"run {self.run_id}"


@dataclass(frozen=True)
class CaseRate:
    """A case's pass rate across every scored repetition in the charted runs, with its 95% Wilson interval."""

    case_key: str
    trials: int
    passed: int
    interval: tuple[float, float] | None

    @property
    def rate(self) -> float | None:
        return self.passed / self.trials if self.trials else None


@dataclass(frozen=True)
class CandidateHistory:
    key: str
    candidate: Candidate | None  # None: no longer in the catalog, history kept
    points: list[TrendPoint]  # oldest first
    cases: list[CaseRate]


def candidate_history(key: str, *, runs: int = HISTORY_RUNS) -> CandidateHistory | None:
    """The candidate's newest ``runs`` live, non-refresh runs (a replay-lane refresh re-scores
    old observations and is not a new measurement), oldest first, and its per-case pass rates
    over them. Two queries; None when the key is neither in the catalog nor in any run.
    """
    from runs.models import Execution, Run, RunLane
    from runs.reports import percentile_95
    from runs.stats import wilson_interval

    candidate = Candidate.objects.select_related("slot", "budget").filter(key=key).first()
    newest = (
        Run.objects.filter(lane=RunLane.LIVE, refresh_of__isnull=True)
        .filter(Exists(Execution.objects.filter(run=OuterRef("pk"), candidate_key=key)))
        .order_by("-created_at", "-id")
        .values("pk")[:runs]
    )
    rows = (
        Execution.objects.filter(run__in=newest, candidate_key=key)
        .order_by("run__created_at", "run_id", "position")
        .values(
            "run_id",
            "run__schedule__night",
            "case_key",
            "cost_usd",
            "cost_known",
            "scorecard__passed",
            "scorecard__overall_score",
            "settlement_ms",
        )
    )
    by_run: dict[int, list[dict[str, Any]]] = {}
    cases: dict[str, list[int]] = {}
    for row in rows:
        by_run.setdefault(row["run_id"], []).append(row)
        verdict = row["scorecard__passed"]
        if verdict is not None:
            tally = cases.setdefault(row["case_key"], [0, 0])
            tally[0] += 1
            tally[1] += 1 if verdict else 0
    if candidate is None and not by_run:
        return None
    points = []
    for run_id, run_rows in by_run.items():
        verdicts = [row["scorecard__passed"] for row in run_rows if row["scorecard__passed"] is not None]
        scores = [row["scorecard__overall_score"] for row in run_rows if row["scorecard__overall_score"] is not None]
        latencies = [
            value for row in run_rows if isinstance(value := row["settlement_ms"], int)
        ]
        priced = [row["cost_usd"] for row in run_rows if row["cost_known"] and row["cost_usd"] is not None]
        points.append(
            TrendPoint(
                run_id=run_id,
                night=run_rows[0]["run__schedule__night"],
                executions=len(run_rows),
                scoreable=len(verdicts),
                passed=sum(1 for verdict in verdicts if verdict),
                pass_rate=sum(1 for verdict in verdicts if verdict) / len(verdicts) if verdicts else None,
                mean_score=sum(scores) / len(scores) if scores else None,
                p95_latency_ms=percentile_95(latencies),
                cost_usd=float(sum(priced)) if priced else None,
                unpriced=sum(1 for row in run_rows if not row["cost_known"]),
            )
        )
    return CandidateHistory(
        key=key,
        candidate=candidate,
        points=points,
        cases=[CaseRate(case, trials, passed, wilson_interval(passed, trials)) for case, (trials, passed) in sorted(cases.items())],
    )
