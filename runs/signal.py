"""Signal across nights: each case × candidate's history over the measured nights of one bundle,
assessed by :mod:`runs.evaluation.signal` (docs/signal.md).

A bundle's *nights* are its measured reports — not a refresh, not a scripted run, not a re-run
(a re-run repeats only the failures, so it would bias the rate) — with the same ``bundle_id``
(the reference's comparability key: runner, prompt policy, seed and every candidate's adapter,
model and reasoning effort) and the same ``scoring_version``, oldest first. A case's history
also restarts when its version changes (``ScheduleEntry.case_version``). A change of any of
these starts a new history.

The reads are shaped for the pages: one query for a bundle's history (its nights' scored
executions counted per night, case, candidate and case version), whatever the number of nights.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import Case, Count, Q, Subquery, Value, When

from evalhub.conf import evalhub_setting
from runs.evaluation.signal import (
    CHANGE_VERDICTS,
    FLAKY,
    IMPROVEMENT,
    NO_DATA,
    REGRESSION,
    STABLE,
    VERDICTS,
    Signal,
    SignalConfig,
    assess,
    change_verdict,
)
from runs.models import Alert, AlertSeverity, Execution, ExecutionStatus, Report, Run
from runs.queries import RunComparison, report_of

SIGNIFICANT_REGRESSION = "significant_regression"


def signal_config() -> SignalConfig:
    """The windows and level from ``EVALHUB["SIGNAL_RECENT_NIGHTS"]``, ``["SIGNAL_BASELINE_NIGHTS"]``
    and ``["SIGNAL_ALPHA"]``. Raises ``ValueError`` saying which is unusable (``evalhub.E010``)."""
    return SignalConfig(
        recent_nights=evalhub_setting("SIGNAL_RECENT_NIGHTS"),
        baseline_nights=evalhub_setting("SIGNAL_BASELINE_NIGHTS"),
        alpha=evalhub_setting("SIGNAL_ALPHA"),
    )


def loaded_nights(config: SignalConfig) -> int:
    """How many of a bundle's newest nights are loaded: four times the assessed windows. A pair
    plays only on the weeks its case meets its candidate's slot (the rotation), so within its
    bundle's nights it may be absent for weeks; each pair is assessed on its own last scored nights."""
    return 4 * config.nights


@dataclass(frozen=True)
class Night:
    """One measured night of the bundle: its run and report, the schedule's night (a date)."""

    run_id: int
    report_id: int
    night: dt.date
    created_at: dt.datetime


@dataclass(frozen=True)
class Cell:
    """One case × candidate on one night: ``passed`` of ``trials`` scored repetitions."""

    passed: int
    trials: int

    @property
    def rate(self) -> float:
        return self.passed / self.trials

    @property
    def shade(self) -> int:
        """The heat map's colour step, 0 (all failed) to 4 (all passed)."""
        return round(4 * self.rate)


@dataclass(frozen=True)
class PairHistory:
    """One case × candidate over the bundle's nights: ``cells`` line up with the bundle's nights
    (None: not scored that night, or scored under an older case version), ``signal`` assesses
    them, ``before`` assesses them without the newest night (what was known before it)."""

    case_key: str
    candidate_key: str
    case_version: int
    cells: list[Cell | None]
    signal: Signal
    before: Signal

    @property
    def verdict(self) -> str:
        return self.signal.verdict

    @property
    def newest(self) -> Cell | None:
        return self.cells[-1] if self.cells else None

    def roles(self, config: SignalConfig) -> list[str]:
        """Per cell: ``"recent"`` or ``"baseline"`` for the scored nights the test used (the
        pair's own last nights), ``""`` for the others (all of them while it is not tested)."""
        if not self.signal.tested:
            return [""] * len(self.cells)
        scored = [index for index, cell in enumerate(self.cells) if cell is not None][-config.nights :]
        roles = [""] * len(self.cells)
        for position, index in enumerate(scored):
            roles[index] = "recent" if position >= len(scored) - config.recent_nights else "baseline"
        return roles

    def cells_with_roles(self, config: SignalConfig) -> list[tuple[Cell | None, str]]:
        return list(zip(self.cells, self.roles(config), strict=True))


@dataclass(frozen=True)
class BundleSignal:
    """A bundle's history as of one report: its nights oldest first, one row per case × candidate
    (worst verdict first, then case and candidate), and the windows and level used."""

    bundle_id: str
    scoring_version: str
    report_id: int
    run_id: int
    nights: list[Night]
    rows: list[PairHistory]
    config: SignalConfig

    def counts(self) -> dict[str, int]:
        """How many rows have each verdict, every verdict present (0 when none)."""
        found = Counter(row.verdict for row in self.rows)
        return {verdict: found.get(verdict, 0) for verdict in VERDICTS}

    def row(self, case_key: str, candidate_key: str) -> PairHistory | None:
        return next((row for row in self.rows if row.case_key == case_key and row.candidate_key == candidate_key), None)

    @property
    def shown_nights(self) -> list[Night]:
        """The nights the heat map shows: the newest ``config.nights`` (the rest are loaded for the
        pairs that did not play on every night)."""
        return self.nights[-self.config.nights :]

    @property
    def heat_rows(self) -> list[tuple[PairHistory, list[tuple[Cell | None, str]]]]:
        """Each row with its shown nights' cells and their roles, for the heat map."""
        shown = len(self.shown_nights)
        return [(row, row.cells_with_roles(self.config)[-shown:]) for row in self.rows]

    @property
    def notable(self) -> list[PairHistory]:
        """The rows worth reading first: significant changes and flaky cases."""
        return [row for row in self.rows if row.verdict in (REGRESSION, IMPROVEMENT, FLAKY)]


def not_a_history(report: Report) -> str:
    """Why ``report`` has no signal (``"a refresh (...)"``, ``"a re-run ..."``), or ``""``. The
    report's run must be loaded."""
    if reason := report.not_a_measurement():
        return reason
    if report.run.repeat_of_id is not None:
        return "a re-run of failed executions (a biased sample of the night, never history)"
    return ""


def _history_runs(report: Report, limit: int) -> Any:
    """The run ids of the bundle's newest ``limit`` nights up to ``report`` (a subquery)."""
    same_bundle = Report.objects.filter(
        bundle_id=report.bundle_id,
        scoring_version=report.scoring_version,
        is_refresh=False,
        is_scripted=False,
        run__repeat_of__isnull=True,
    ).filter(Q(created_at__lt=report.created_at) | Q(created_at=report.created_at, pk__lte=report.pk))
    return same_bundle.order_by("-created_at", "-id").values("run_id")[:limit]


def bundle_signal(report: Report, *, config: SignalConfig | None = None) -> BundleSignal | None:
    """The history of ``report``'s bundle up to and including ``report`` (its run loaded), in one
    query; None when the report is not a history (:func:`not_a_history`)."""
    if not_a_history(report):
        return None
    config = config or signal_config()
    counted = (
        Execution.objects.filter(
            run_id__in=Subquery(_history_runs(report, loaded_nights(config))),
            status=ExecutionStatus.FINISHED,
            scorecard__passed__isnull=False,
        )
        .values(
            "run_id",
            "run__report__id",
            "run__report__created_at",
            "run__schedule__night",
            "case_key",
            "candidate_key",
            "entry__case_version",
        )
        .annotate(trials=Count("id"), passed=Count("id", filter=Q(scorecard__passed=True)))
        .order_by()
    )
    return _assemble(report, list(counted), config)


def _assemble(report: Report, counted: Iterable[dict[str, Any]], config: SignalConfig) -> BundleSignal:
    nights: dict[int, Night] = {}
    tallies: dict[tuple[str, str], dict[int, dict[int, Cell]]] = {}
    for row in counted:
        run_id = row["run_id"]
        nights.setdefault(run_id, Night(run_id, row["run__report__id"], row["run__schedule__night"], row["run__report__created_at"]))
        by_version = tallies.setdefault((row["case_key"], row["candidate_key"]), {})
        by_version.setdefault(row["entry__case_version"], {})[run_id] = Cell(row["passed"], row["trials"])
    # The report's own night comes last even when nothing of it was scored (every execution skipped).
    nights.setdefault(report.run_id, Night(report.run_id, report.pk, report.run.schedule.night, report.created_at))
    ordered = sorted(nights.values(), key=lambda night: (night.created_at, night.report_id))
    rows = []
    for (case_key, candidate_key), by_version in tallies.items():
        version, cells_by_run = _current_version(by_version, ordered)
        cells = [cells_by_run.get(night.run_id) for night in ordered]
        history = [(cell.passed, cell.trials) for cell in cells if cell is not None]
        earlier = [(cell.passed, cell.trials) for cell in cells[:-1] if cell is not None]
        rows.append(PairHistory(case_key, candidate_key, version, cells, assess(history, config), assess(earlier, config)))
    rank = {verdict: index for index, verdict in enumerate(VERDICTS)}
    rows.sort(key=lambda row: (rank[row.verdict], row.case_key, row.candidate_key))
    return BundleSignal(report.bundle_id, report.scoring_version, report.pk, report.run_id, ordered, rows, config)


def _current_version(by_version: dict[int, dict[int, Cell]], nights: list[Night]) -> tuple[int, dict[int, Cell]]:
    """The case version of the pair's newest scored night and its cells: a new case version
    starts a new history, so older versions' nights are left out."""
    newest_version, newest_at = 0, None
    for version, cells in by_version.items():
        latest = max(index for index, night in enumerate(nights) if night.run_id in cells)
        if newest_at is None or latest > newest_at:
            newest_version, newest_at = version, latest
    return newest_version, by_version[newest_version]


def latest_history_report(*, run_id: int | None = None) -> Report | None:
    """The report a signal page or endpoint reads: ``run_id``'s, or the newest measured report
    that is not a re-run's — a whole night's before any selection's (a selection of two
    executions, its own bundle, queued and cancelled at noon is not what "the newest night"
    means) — (one query, run and schedule loaded); None when there is none."""
    reports = Report.objects.select_related("run__schedule")
    if run_id is not None:
        return reports.filter(run_id=run_id).first()
    measured = reports.filter(is_refresh=False, is_scripted=False, run__repeat_of__isnull=True)
    whole_nights_first = Case(When(run__selection__isnull=True, then=Value(0)), default=Value(1))
    return measured.order_by(whole_nights_first, "-created_at", "-id").first()


# --- a change between two runs ---------------------------------------------------------------------


@dataclass(frozen=True)
class ChangeSignal:
    """What one change between two runs of a case × candidate is: ``verdict`` is ``significant``,
    ``flaky`` or ``noise`` (see :func:`runs.evaluation.signal.change_verdict`), with the pair's
    history for its numbers (None when the pair has no scored history)."""

    verdict: str
    history: PairHistory | None


def classify_change(signal: BundleSignal | None, case_key: str, candidate_key: str, direction: str) -> ChangeSignal | None:
    """The verdict of a ``regression`` or ``improvement`` of ``case_key`` × ``candidate_key``
    found between an earlier run and ``signal``'s run; None when there is no change or no history."""
    if signal is None or direction not in (REGRESSION, IMPROVEMENT):
        return None
    row = signal.row(case_key, candidate_key)
    if row is None:
        return ChangeSignal("noise", None)
    return ChangeSignal(change_verdict(direction, row.signal, row.before), row)


@dataclass(frozen=True)
class NightChange:
    """A case × candidate whose pass rate moved since the bundle's previous night (the run
    report's "changes since the previous night"): the two cells and the change's verdict."""

    history: PairHistory
    previous: Cell
    current: Cell
    direction: str
    verdict: str


def night_changes(signal: BundleSignal | None) -> list[NightChange]:
    """Every pair whose pass rate moved between the bundle's previous night and its newest night,
    regressions first. Nothing when there is no earlier night."""
    if signal is None or len(signal.nights) < 2:
        return []
    changes = []
    for row in signal.rows:
        previous, current = row.cells[-2], row.cells[-1]
        if previous is None or current is None or previous.rate == current.rate:
            continue
        direction = REGRESSION if current.rate < previous.rate else IMPROVEMENT
        changes.append(NightChange(row, previous, current, direction, change_verdict(direction, row.signal, row.before)))
    changes.sort(key=lambda change: (change.direction != REGRESSION, change.history.case_key, change.history.candidate_key))
    return changes


# --- evalhub's own alert ---------------------------------------------------------------------------


def regression_message(row: PairHistory, config: SignalConfig) -> str:
    """The alert's text: the pair, both windows' rates and counts, the effect and the p-value."""
    signal = row.signal
    recent, baseline = signal.recent, signal.baseline
    assert recent is not None and baseline is not None and signal.p_value is not None and signal.effect is not None
    return (
        f"{row.case_key}/{row.candidate_key} passed {recent.passed}/{recent.trials} over the last {recent.nights} nights "
        f"({recent.rate:.0%}) against {baseline.passed}/{baseline.trials} over the {baseline.nights} before ({baseline.rate:.0%}): "
        f"{signal.effect * 100:+.0f} points, one-sided exact test p = {signal.p_value:.4f} ≤ {config.alpha:g}"
    )


def significant_regression_alerts(report: Report, *, config: SignalConfig | None = None) -> list[Alert]:
    """evalhub's own ``significant_regression`` alerts for ``report`` (unsaved rows, warning):
    one per case × candidate measured in the report's run whose history as of the report is a
    significant regression, unless the bundle's previous night already alerted it (one alert per
    regression, not one a night while it lasts). Never part of the reference's alert list
    (``Report.alert_documents``). Two queries; nothing for a report that is not a history."""
    config = config or signal_config()
    signal = bundle_signal(report, config=config)
    if signal is None:
        return []
    regressed = [row for row in signal.rows if row.verdict == REGRESSION and row.newest is not None]
    if not regressed:
        return []
    previous_report = signal.nights[-2].report_id if len(signal.nights) >= 2 else None
    already = set(
        Alert.objects.filter(report_id=previous_report, code=SIGNIFICANT_REGRESSION).values_list("case_key", "candidate_key")
        if previous_report is not None
        else []
    )
    return [
        Alert(
            report=report,
            code=SIGNIFICANT_REGRESSION,
            severity=AlertSeverity.WARNING,
            case_key=row.case_key,
            candidate_key=row.candidate_key,
            message=regression_message(row, config),
        )
        for row in regressed
        if (row.case_key, row.candidate_key) not in already
    ]


# --- what the pages show -------------------------------------------------------------------------


def run_signal_context(run: Run) -> dict[str, object]:
    """The run page's "Signal across nights": the history of its bundle as of its report (one
    query) and what moved since the bundle's previous night; nothing for a run without a
    report, and the reason for a report that is not history."""
    report = report_of(run)
    if report is None:
        return {"signal": None, "signal_note": ""}
    signal = bundle_signal(report)
    return {"signal": signal, "signal_note": not_a_history(report), "night_changes": night_changes(signal)}


def compare_signal_context(comparison: RunComparison) -> dict[str, object]:
    """Each change of the compare page with its verdict (significant, flaky or noise) against
    run B's bundle history (one query); nothing when the runs are not comparable."""
    if not comparison.comparable:
        return {"signal": None, "signal_rows": [(row, None) for row in comparison.rows]}
    signal = bundle_signal(report_of(comparison.after))
    rows = [(row, classify_change(signal, row.case_key, row.candidate_key, row.change)) for row in comparison.rows]
    tally = Counter(change.verdict for _, change in rows if change is not None)
    return {"signal": signal, "signal_rows": rows, "signal_tally": {verdict: tally.get(verdict, 0) for verdict in CHANGE_VERDICTS}}


__all__ = [
    "FLAKY",
    "IMPROVEMENT",
    "NO_DATA",
    "REGRESSION",
    "SIGNIFICANT_REGRESSION",
    "STABLE",
    "BundleSignal",
    "Cell",
    "ChangeSignal",
    "Night",
    "NightChange",
    "PairHistory",
    "bundle_signal",
    "classify_change",
    "compare_signal_context",
    "latest_history_report",
    "night_changes",
    "not_a_history",
    "run_signal_context",
    "signal_config",
    "significant_regression_alerts",
]
