"""``make bench``'s side-by-side part: each of evalhub's measures next to its baseline, timed in
the same run with interleaved repeats (evalhub, baseline, evalhub, baseline, ...), so a machine
shared with other jobs slows both sides alike. Prints a Markdown table (min and median of each
side, the ratio of the medians) copied into docs/benchmarks.md.

Run as ``python tests/bench_ratios.py [--repeats 7] [--only nightly,history,schedule,mcp]``: it migrates a file
SQLite database in a temporary directory (the embedded default), or uses ``DATABASE_URL`` when
set (PostgreSQL: give it a database of its own, every table is emptied). ``EVALHUB_BENCH_SQLITE_PATH``
names a SQLite file to keep (and reuse) instead.

The baselines:

* a nightly's bookkeeping — the rows a nightly wrote (its schedule and entries, the run, its
  executions, attempts, scorecards, report and alerts) inserted again with ``bulk_create`` in
  one transaction: what the database itself costs for the same rows;
* the run history page — a JSON view written here that takes the page's 25 runs and counts the
  executions of only those runs;
* stopping a live execution's MCP endpoint — the same endpoint on stock ``uvicorn.Server``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SEED = "runner-live-seven-week-v1"
ENVIRON = {"OPENAI_API_KEY": "x-bench-1", "OPENROUTER_API_KEY": "x-bench-2", "ANTHROPIC_API_KEY": "x-bench-3"}
FIRST_NIGHT = dt.datetime(2025, 1, 1, 4, tzinfo=dt.UTC)


def setup_django(*, reference: bool = True) -> str:
    """Point Django at a fresh database and migrate it (and load the reference catalog with
    ``reference``); returns what the database is."""
    sys.path.insert(0, str(REPO))
    os.environ["DJANGO_SETTINGS_MODULE"] = "evalhub.settings"
    if not os.environ.get("DATABASE_URL") and not os.environ.get("EVALHUB_BENCH_SQLITE_PATH"):
        directory = Path(tempfile.mkdtemp(prefix="evalhub-ratios-"))
        os.environ["EVALHUB_SQLITE_PATH"] = str(directory / "bench.sqlite3")
    elif not os.environ.get("DATABASE_URL"):
        # A database kept from an earlier run (its year of history is reused: ``--only history``).
        os.environ["EVALHUB_SQLITE_PATH"] = os.environ["EVALHUB_BENCH_SQLITE_PATH"]
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    if connection.vendor == "postgresql" and not os.environ.get("EVALHUB_BENCH_KEEP"):
        call_command("flush", "--no-input", verbosity=0)
    from django.conf import settings

    settings.EVALHUB = {
        **settings.EVALHUB,
        "EXECUTORS": dict.fromkeys(("codex_app_server", "opencode_server", "acpx_runtime"), "runs.executors.replay.ReplayExecutor"),
    }
    if reference:
        call_command("load_reference", verbosity=0, stdout=open(os.devnull, "w"))  # noqa: SIM115
    return "PostgreSQL" if connection.vendor == "postgresql" else "SQLite (file, WAL)"


def interleaved(evalhub: Callable[[], Any], baseline: Callable[[], Any], repeats: int) -> tuple[list[float], list[float]]:
    """Seconds of each call of ``evalhub`` and ``baseline``, alternating, ``repeats`` each (after one warm-up of each)."""
    evalhub()
    baseline()
    ours: list[float] = []
    theirs: list[float] = []
    for _ in range(repeats):
        started = time.perf_counter()
        evalhub()
        ours.append(time.perf_counter() - started)
        started = time.perf_counter()
        baseline()
        theirs.append(time.perf_counter() - started)
    return ours, theirs


class Nights:
    """Successive nights for ``start_nightly`` (each call a new schedule and run)."""

    def __init__(self, start: dt.datetime) -> None:
        self.next = start

    def __call__(self) -> dt.datetime:
        night, self.next = self.next, self.next + dt.timedelta(days=1)
        return night


def nightly(now: dt.datetime, *, completed: bool) -> Any:
    """One nightly through evalhub's services, executed in this process: every execution skipped
    (no credentials), or completed through the replay executor (its observations stored first,
    ``_fill_replay``)."""
    from runs.nightly import start_nightly

    outcome = start_nightly(seed=SEED, cost_ceiling_usd=Decimal(12), now=now, environ=ENVIRON if completed else {}, execute=True)
    assert outcome.summary.executions == 40, outcome.summary.line()
    return outcome.run


def _fill_replay(now: dt.datetime) -> None:
    from runs.executors.replay import REPLAY_STORE
    from schedules.services import preview_schedule
    from tests.builders import completed_observation

    for entry in preview_schedule(seed=SEED, now=now)["entries"]:
        REPLAY_STORE[entry["executionId"]] = completed_observation(entry, cost_usd=0.01)


def bulk_insert_like(run_pk: int, counter: list[int]) -> None:
    """The baseline: the rows of run ``run_pk`` (schedule, entries, run, executions, attempts,
    scorecards, report, alerts) inserted again as new rows with ``bulk_create``, in one transaction."""
    from django.db import transaction

    from runs.models import Alert, Attempt, Execution, Report, Run, Scorecard
    from schedules.models import Schedule, ScheduleEntry

    run = Run.objects.get(pk=run_pk)
    schedule = Schedule.objects.get(pk=run.schedule_id)
    entries = list(ScheduleEntry.objects.filter(schedule=schedule).order_by("pk"))
    executions = list(Execution.objects.filter(run=run).order_by("pk"))
    attempts = list(Attempt.objects.filter(execution__run=run).order_by("pk"))
    scorecards = list(Scorecard.objects.filter(execution__run=run).order_by("pk"))
    report = Report.objects.filter(run=run).first()
    alerts = list(Alert.objects.filter(report=report).order_by("pk")) if report else []
    counter[0] += 1
    with transaction.atomic():
        schedule.pk, schedule.seed = None, f"baseline-{counter[0]}"
        Schedule.objects.bulk_create([schedule])
        entry_pks = {}
        for entry in entries:
            entry_pks[entry.pk], entry.pk, entry.schedule_id = entry, None, schedule.pk
        ScheduleEntry.objects.bulk_create(entries)
        old_entries = {old: entry.pk for old, entry in entry_pks.items()}
        run.pk, run.schedule_id, run.trigger = None, schedule.pk, "manual"
        Run.objects.bulk_create([run])
        execution_pks = {}
        for execution in executions:
            execution_pks[execution.pk] = execution
            execution.pk, execution.run_id, execution.entry_id = None, run.pk, old_entries[execution.entry_id]
        Execution.objects.bulk_create(executions)
        new_execution = {old: execution.pk for old, execution in execution_pks.items()}
        for row in [*attempts, *scorecards]:
            row.pk, row.execution_id = None, new_execution[row.execution_id]
        Attempt.objects.bulk_create(attempts)
        Scorecard.objects.bulk_create(scorecards)
        if report is not None:
            report.pk, report.run_id, report.previous_id = None, run.pk, None
            Report.objects.bulk_create([report])
            for alert in alerts:
                alert.pk, alert.report_id = None, report.pk
            Alert.objects.bulk_create(alerts)


def measure_nightly(completed: bool, repeats: int, nights: Nights) -> dict[str, Any]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    counter = [0]
    sample = nights()
    if completed:
        _fill_replay(sample)
    with CaptureQueriesContext(connection) as queries:
        run = nightly(sample, completed=completed)
    template = run.pk

    def ours() -> None:
        nightly(nights(), completed=completed)

    def theirs() -> None:
        bulk_insert_like(template, counter)

    if completed:  # the observations the replay executor returns, stored before the clock starts
        ahead = Nights(nights.next)
        for _ in range(repeats + 1):
            _fill_replay(ahead())
    evalhub, baseline = interleaved(ours, theirs, repeats)
    return {"evalhub": evalhub, "baseline": baseline, "queries_per_execution": len(queries.captured_queries) / 40}


def measure_schedule(repeats: int) -> list[str]:
    """Coverage at 200 and 800 cases (the reference's slots; linear means 4× the time for 4× the
    cases), and a catalog of 100 slots × 200 cases of its own built, saved and coverage-checked
    through the services (``COVERAGE_CASE_SLOTS = "reachable"``), against the 5 s goal."""
    import statistics

    from django.conf import settings

    from schedules.coverage import schedule_coverage
    from schedules.services import schedule_for_night
    from tests.builders import make_budget, make_candidate, make_case, make_slot
    from tests.reference import reference_manifest_slots

    slots = reference_manifest_slots()

    def coverage(count: int) -> Callable[[], Any]:
        cases = [{"id": f"case-{index:04d}", "repetitions": 1} for index in range(count)]
        return lambda: schedule_coverage(seed=SEED, slots=slots, cases=cases)

    big, small = interleaved(coverage(800), coverage(200), repeats)
    growth = statistics.median(big) / statistics.median(small)
    lines = [
        f"| coverage at 800 cases vs 200 | {_ms(min(big))} / {_ms(statistics.median(big))} | {_ms(min(small))} / "
        f"{_ms(statistics.median(small))} | {growth:.1f}× for 4× the cases | linear (≈ 4×) | {'met' if growth <= 6 else 'not met'} |"
    ]
    budget = make_budget()
    for index in range(100):
        make_candidate(
            slot=make_slot(key=f"slot-{index:03d}", position=index), budget=budget, tier="strong" if index % 2 else "inexpensive"
        )
    for index in range(200):
        make_case(key=f"case-{index:03d}", position=index)
    settings.EVALHUB = {**settings.EVALHUB, "COVERAGE_CASE_SLOTS": "reachable"}
    nights = Nights(FIRST_NIGHT)
    times = []
    for _ in range(max(repeats // 2, 1)):
        started = time.perf_counter()
        schedule, created = schedule_for_night(seed=SEED, now=nights())
        times.append(time.perf_counter() - started)
        assert created and schedule.expected_executions == 400
    lines.append(
        f"| 100 slots × 200 cases: coverage, build and save one night (400 entries) | {_ms(min(times))} / "
        f"{_ms(statistics.median(times))} | — | — | < 5 s | {'met' if statistics.median(times) < 5 else 'not met'} |"
    )
    return lines


def measure_mcp(repeats: int) -> list[str]:
    """Stopping the control plane's MCP endpoint after one tool call, as each live execution does:
    evalhub's server (runs/executors/live/mcp_server.py) against stock uvicorn's stop, the
    baseline it replaced (the same endpoint with ``uvicorn.Server``), interleaved."""
    import asyncio

    import uvicorn
    from mcp import Client

    from runs.executors.live import mcp_server
    from runs.executors.live.contracts import EventLog
    from runs.executors.live.controlplane import ControlPlane

    case = {"id": "final-response", "title": "bench", "steps": [], "assertions": {}}

    def stop_time(server_class: type) -> float:
        board = ControlPlane(execution_id="bench", case=case, prompt="Report progress.", events=EventLog())
        original, mcp_server._PromptServer = mcp_server._PromptServer, server_class
        try:
            endpoint = mcp_server.serve(board)
        finally:
            mcp_server._PromptServer = original

        async def call() -> None:
            async with Client(endpoint.url) as client:
                await client.call_tool("report_progress", {"message": "bench"})

        asyncio.run(call())
        started = time.perf_counter()
        if isinstance(endpoint._server, original):
            endpoint.close()
        else:  # stock uvicorn: what McpEndpoint.close did before
            endpoint._server.should_exit = True
            endpoint._thread.join(mcp_server.STOP_TIMEOUT_S)
        return time.perf_counter() - started

    ours: list[float] = []
    stock: list[float] = []
    for _ in range(repeats):
        ours.append(stop_time(mcp_server._PromptServer))
        stock.append(stop_time(uvicorn.Server))
    return [row("stopping the MCP endpoint after a tool call", ours, stock, 0.5, "baseline: stock uvicorn's stop")]


def row(name: str, evalhub: list[float], baseline: list[float], goal: float, note: str = "") -> str:
    ratio = statistics.median(evalhub) / statistics.median(baseline)
    best = min(evalhub) / min(baseline)
    met = "met" if ratio <= goal else "not met"
    return (
        f"| {name} | {_ms(min(evalhub))} / {_ms(statistics.median(evalhub))} | {_ms(min(baseline))} / {_ms(statistics.median(baseline))} "
        f"| {ratio:.1f}× (best {best:.1f}×) | ≤ {goal:g}× | {met}{' — ' + note if note else ''} |"
    )


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 10 else f"{seconds:.1f} s"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--only", default="nightly,history")
    options = parser.parse_args()
    only = set(options.only.split(","))
    # The schedule rows bring a catalog of their own: run them alone (``--only schedule``).
    database = setup_django(reference=not only <= {"schedule", "mcp"})
    load = os.getloadavg()
    nights = Nights(FIRST_NIGHT)
    rows = []
    if "nightly" in only:
        skipped = measure_nightly(False, options.repeats, nights)
        rows.append(
            row(
                "nightly bookkeeping, 40 skipped",
                skipped["evalhub"],
                skipped["baseline"],
                3,
                f"{skipped['queries_per_execution']:.1f} queries per execution",
            )
        )
        completed = measure_nightly(True, options.repeats, nights)
        rows.append(
            row(
                "nightly, 40 completed (replay executor)",
                completed["evalhub"],
                completed["baseline"],
                3,
                f"{completed['queries_per_execution']:.1f} queries per execution",
            )
        )
    if "schedule" in only:
        rows.extend(measure_schedule(options.repeats))
    if "mcp" in only:
        rows.extend(measure_mcp(options.repeats))
    if "history" in only:
        from tests.bench_history import measure_history

        rows.extend(measure_history(options.repeats, nights, row))
    print(
        f"database: {database}; {options.repeats} interleaved repeats; load average before: {load[0]:.1f}, after: {os.getloadavg()[0]:.1f}"
    )
    print("| measure | evalhub min / median | baseline min / median | ratio (medians) | goal | |")
    print("|---|---|---|---|---|---|")
    for line in rows:
        print(line)


if __name__ == "__main__":
    main()
