"""The slow fake executor and the driver of the multi-process tests (``tests/test_cluster.py``).

``python -c 'from tests.cluster_support import main; main()' prepare|status ...`` runs with
``DJANGO_SETTINGS_MODULE=tests.cluster_settings`` against the database the workers share."""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
import signal
import subprocess
import sys
import time
from decimal import Decimal
from typing import Any

from runs.executors.base import ExecutionRequest, Executor

SEED = "runner-live-seven-week-v1"
NIGHT = dt.datetime(2026, 8, 19, 4, 0, tzinfo=dt.UTC)
ENVIRON = {"OPENAI_API_KEY": "x-cluster-1", "OPENROUTER_API_KEY": "x-cluster-2", "ANTHROPIC_API_KEY": "x-cluster-3"}


class SlowExecutor(Executor):
    """Sleeps ``EVALHUB_TEST_DELAY_S`` seconds like a runtime would, logs the call (execution id,
    attempt, pid) to ``EVALHUB_TEST_CALLS`` when it names a file, and returns a completed
    observation costing $0.01."""

    runtime_name = "slow fake"

    def execute(self, request: ExecutionRequest) -> dict[str, Any]:
        from tests.builders import completed_observation

        delay, calls_path, child_pids_path = _knobs()
        # Like a live runtime, optionally a child in a session of its own, killed on the way out
        # (as runs/executors/live/drivers/common.py kill_process_group does).
        child = None
        if child_pids_path:
            child = subprocess.Popen(["sleep", "600"], start_new_session=True)
            with open(child_pids_path, "a", encoding="utf-8") as pids:
                pids.write(f"{child.pid}\n")
        if calls_path:
            with open(calls_path, "a", encoding="utf-8") as calls:
                calls.write(f"{request.entry['executionId']} {request.attempt} {os.getpid()}\n")
        try:
            # A no-op executor does not even sleep(0): that gives up the GIL, and a worker's
            # other threads (django-q2's result feeder) may keep it for milliseconds.
            if delay > 0:
                time.sleep(delay)
        finally:
            if child is not None:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
        return completed_observation(dict(request.entry), cost_usd=0.01)


@functools.cache
def _knobs() -> tuple[float, str, str]:
    """``(EVALHUB_TEST_DELAY_S, EVALHUB_TEST_CALLS, EVALHUB_TEST_CHILD_PIDS)``, read once per
    process: the processes that run this executor are started with them, and the benchmark's
    no-op executor (``tests/bench_cluster.py``) should cost its worker nothing per call, not the
    three environment lookups (each a missed key's exception) it cost before."""
    return (
        float(os.environ.get("EVALHUB_TEST_DELAY_S", "0.3")),
        os.environ.get("EVALHUB_TEST_CALLS", ""),
        os.environ.get("EVALHUB_TEST_CHILD_PIDS", ""),
    )


def noop() -> None:
    """django-q2's own no-op task, for the benchmark's baseline."""


def prepare(ceiling: str = "12") -> dict[str, Any]:
    """Load the catalog, declare the periodic tasks, and queue tonight's 40 executions."""
    from django.utils import timezone

    from runs.nightly import start_nightly
    from runs.periodic import declare_periodic_tasks
    from tests.builders import load_reference_catalog

    load_reference_catalog()
    declare_periodic_tasks(now=timezone.now())
    outcome = start_nightly(seed=SEED, cost_ceiling_usd=Decimal(ceiling), now=NIGHT, environ=ENVIRON, execute=True, dispatch=True)
    return {"run": outcome.run.pk, "executions": outcome.run.executions.count()}


def status(run_id: int) -> dict[str, Any]:
    """Every invariant the tests check, as plain data."""
    from django.db.models import Count, Max, Sum

    from runs.models import Attempt, Report, Run

    run = Run.objects.get(pk=run_id)
    executions = run.executions.all()
    per_execution = executions.annotate(
        observed=Count("attempts", filter=__import__("django.db.models", fromlist=["Q"]).Q(attempts__outcome="observation")),
        attempts_n=Count("attempts"),
    )
    return {
        "status": run.status,
        "spent": str(run.spent_usd),
        "reserved": str(run.reserved_usd),
        "ceiling": str(run.cost_ceiling_usd),
        "executions": executions.count(),
        "finished": executions.filter(status="finished").count(),
        "completed": executions.filter(classification="completed").count(),
        "observed_once": per_execution.filter(observed=1).count(),
        "max_attempts_used": per_execution.aggregate(most=Max("attempts_n"))["most"] or 0,
        "open_attempts": Attempt.objects.filter(execution__run=run, outcome="running").count(),
        "worker_lost": Attempt.objects.filter(execution__run=run, outcome="worker_lost").count(),
        "counted": str(Attempt.objects.filter(execution__run=run).aggregate(total=Sum("counted_usd"))["total"] or 0),
        "owners": sorted(set(executions.exclude(owner="").values_list("owner", flat=True))),
        "running_owners": sorted(set(executions.filter(status="running").values_list("owner", flat=True))),
        "reports": Report.objects.filter(run=run).count(),
    }


def main() -> None:
    import django

    django.setup()
    command, *args = sys.argv[1:]
    result = prepare(*args) if command == "prepare" else status(int(args[0]))
    print(json.dumps(result))
