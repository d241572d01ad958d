"""``make bench``'s multi-process part: executions per second through real qcluster workers
against django-q2's own no-op task rate on the same broker, and a night's wall time with 1 and 2
workers. Prints a Markdown table (copied into docs/benchmarks.md).

Run as ``python tests/bench_cluster.py [--night-delay 2] [--repeats 3] [--pairs 3] [--rates-only]
[--compare TREE]``: it migrates a file SQLite database in a temporary directory (the embedded default:
SQLite + ORM broker), or uses ``DATABASE_URL`` and ``REDIS_URL`` when both are set, and starts
and stops its own clusters. ``--rates-only`` leaves out the nights of slow executions;
``--compare TREE`` (another checkout, e.g. a worktree of ``main``) measures the rates of that tree
too, interleaved with this one's, each tree's night against its own no-op (the same settings and
cluster command for both sides of each ratio).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable

# Both sides are timed alike, by the task rows the cluster saves (django-q2's own clock, set in the
# worker process): from the first task's ``started`` to the last one's ``stopped``. The same
# ``async_task`` call queues both sides' tasks on the same broker, through the same cluster command
# and Q_CLUSTER settings, and both wait the same way for all their rows (every 0.1 s: the wait does
# not set the clock, so it need not compete with the cluster for the cores). Counting from
# the first task taken rather than from the first ``async_task`` leaves out the pusher's poll phase:
# the ORM broker sleeps ``poll`` whenever it finds the queue empty, so a batch was first taken after
# a random 0-200 ms wait that has nothing to do with either side's tasks. A night's last task
# finishes and reports the run before it stops, so evalhub's time covers the finalisation too. The
# night's schedule and run are built before anything is queued (the nightly task's work, not the
# executions').
SNIPPET = """
import json, sys, time
import django
django.setup()
from django.db import transaction
from django.db.models import Max, Min
from django_q.models import Task
from django_q.tasks import async_task
command = sys.argv[1]
def worked(group):
    span = Task.objects.filter(group=group).aggregate(first=Min("started"), last=Max("stopped"))
    return (span["last"] - span["first"]).total_seconds()
if command == "noop":
    n = int(sys.argv[2])
    group = f"noop-{time.time_ns()}"
    started = time.monotonic()
    for _ in range(n):
        async_task("tests.cluster_support.noop", group=group)
    while Task.objects.filter(group=group).count() < n:
        time.sleep(0.1)
    print(json.dumps({"seconds": time.monotonic() - started, "worked": worked(group), "n": n}))
elif command == "night":
    from decimal import Decimal
    from django.utils import timezone
    from runs.models import Run
    from runs.periodic import declare_periodic_tasks
    try:
        from runs.creation import create_run
        from runs.dispatch import dispatch_run
    except ImportError:  # a --compare tree from before runs.services was split
        from runs.services import create_run, dispatch_run
    from schedules.models import Schedule
    from schedules.services import schedule_for_night
    from tests.builders import load_reference_catalog
    from tests.cluster_support import NIGHT, SEED
    Run.objects.all().delete()
    Schedule.objects.all().delete()
    load_reference_catalog()
    declare_periodic_tasks(now=timezone.now())
    started = time.monotonic()
    schedule, _ = schedule_for_night(seed=SEED, now=NIGHT)
    run, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal(12), trigger="nightly")
    queued = time.monotonic()
    with transaction.atomic():
        n = dispatch_run(run)
    while Task.objects.filter(group=f"run-{run.pk}").count() < n:
        time.sleep(0.1)
    ended = time.monotonic()
    row = Run.objects.get(pk=run.pk)
    reported = Run.objects.filter(pk=run.pk, report__isnull=False).exists()
    print(json.dumps({"seconds": ended - started, "prepare": queued - started, "executing": ended - queued, "worked": worked(f"run-{run.pk}"), "n": n, "status": row.status, "reported": reported}))
"""


def environment(base: dict[str, str], workers: int, delay: float, repo: Path = REPO) -> dict[str, str]:
    return {
        **base,
        "PYTHONPATH": str(repo),
        "EVALHUB_TEST_Q_WORKERS": str(workers),
        "EVALHUB_TEST_DELAY_S": str(delay),
        "OPENAI_API_KEY": "x-bench-1",
        "OPENROUTER_API_KEY": "x-bench-2",
        "ANTHROPIC_API_KEY": "x-bench-3",
    }


#: The cluster's processes, by what django-q2 spawns them for: its sentinel's children in the
#: order it starts them (``django_q.cluster.Sentinel.spawn_cluster``: the workers, then the
#: monitor, then the pusher). A benchmark cluster runs fewer tasks than a worker's ``recycle``
#: (500), so no process is started again.
ROLES = ("sentinel", "pusher", "monitor", "workers")


def cpu_seconds(cluster_pid: int, workers: int) -> dict[str, float]:
    """CPU time (user + system, seconds) each role of the cluster started as ``cluster_pid``
    (the leader of its process group) has used so far, read from ``/proc``; empty where
    ``/proc`` cannot tell (not Linux, or not the processes django-q2 starts)."""
    tick = os.sysconf("SC_CLK_TCK")
    found: list[tuple[int, int, int, float]] = []  # (parent, start time, pid, CPU seconds)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        if int(fields[2]) == cluster_pid:  # the process group
            found.append((int(fields[1]), int(fields[19]), int(entry.name), (int(fields[11]) + int(fields[12])) / tick))
    sentinels = [process for process in found if process[0] == cluster_pid]
    if len(sentinels) != 1:
        return {}
    children = sorted(process for process in found if process[0] == sentinels[0][2])
    if len(children) != workers + 2:
        return {}
    return {
        "sentinel": sentinels[0][3],
        "workers": sum(process[3] for process in children[:workers]),
        "monitor": children[workers][3],
        "pusher": children[workers + 1][3],
    }


def measure(base: dict[str, str], workers: int, delay: float, batches: list[list[str]], repo: Path = REPO) -> list[dict]:
    """Start one cluster of ``workers`` worker processes on ``repo``'s code, warm it up with one
    no-op task, run each batch (the SNIPPET's command and arguments) in turn, and stop it; returns
    each batch's timings, with ``cpu``: the CPU seconds each of the cluster's roles used while
    the batch ran and settled (:func:`cpu_seconds`; empty when they cannot be told apart)."""
    env = {**environment(base, workers, delay, repo), "EVALHUB_TEST_Q_NAME": f"bench-{uuid.uuid4().hex[:8]}"}
    cluster = subprocess.Popen(
        [PYTHON, "manage.py", "worker", "--grace", "10"],
        cwd=repo,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    results = []
    try:
        # Warm up: the cluster is ready once it has run one no-op task.
        subprocess.run([PYTHON, "-c", SNIPPET, "noop", "1"], cwd=repo, env=env, check=True, capture_output=True, timeout=300)
        for command, *args in batches:
            before = cpu_seconds(cluster.pid, workers)
            done = subprocess.run([PYTHON, "-c", SNIPPET, command, *args], cwd=repo, env=env, capture_output=True, text=True, timeout=900)
            if done.returncode != 0:
                raise SystemExit(f"bench_cluster: {command} with {workers} worker(s) failed:\n{done.stderr[-3000:]}")
            result = json.loads(done.stdout.strip().splitlines()[-1])
            # Let what a batch left behind (the monitor's last saves) settle before the next one.
            time.sleep(0.5)
            after = cpu_seconds(cluster.pid, workers)
            result["cpu"] = {role: after[role] - before[role] for role in ROLES} if before and after else {}
            print(f"  {repo.name}: {command}, {workers} worker(s), {delay:g} s executions: {result}", file=sys.stderr, flush=True)
            results.append(result)
        return results
    finally:
        cluster.send_signal(signal.SIGTERM)
        try:
            cluster.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(cluster.pid, signal.SIGKILL)


def main() -> None:
    parser = argparse.ArgumentParser()
    # As many no-op tasks as a night has executions: the pipeline's per-task costs (the pusher's
    # dequeue, the monitor's save) weigh on both sides alike.
    parser.add_argument("--noop-tasks", type=int, default=40)
    parser.add_argument("--night-delay", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=3, help="pairs of batches (a no-op batch and a night) per cluster")
    parser.add_argument("--rates-only", action="store_true", help="leave out the nights of slow executions")
    parser.add_argument("--compare", type=Path, help="another tree whose rates are measured interleaved with this one's")
    options = parser.parse_args()
    trees = [REPO] + ([options.compare.resolve()] if options.compare else [])
    directory = Path(tempfile.mkdtemp(prefix="evalhub-bench-"))
    base = {key: value for key, value in os.environ.items() if not key.startswith("EVALHUB_")}
    # No calls log: the no-op executor writes nothing (tests/cluster_support.py SlowExecutor).
    base.update({"DJANGO_SETTINGS_MODULE": "tests.cluster_settings"})
    shared = base.get("DATABASE_URL") and base.get("REDIS_URL")
    if not shared:
        base.pop("DATABASE_URL", None)
        base.pop("REDIS_URL", None)
    broker = "PostgreSQL + Redis" if shared else "SQLite + ORM broker"
    bases: dict[Path, dict[str, str]] = {}
    for number, tree in enumerate(trees):
        # SQLite: each tree on a file of its own; PostgreSQL: the one database ``DATABASE_URL``
        # names, migrated by each tree (trees whose migrations differ need two databases).
        bases[tree] = {**base} if shared else {**base, "EVALHUB_SQLITE_PATH": str(directory / f"bench-{number}.sqlite3")}
        migrate(bases[tree], tree)
    rates = {tree: {workers: {"noop": [], "evalhub": []} for workers in (1, 2)} for tree in trees}
    # CPU seconds and tasks, summed over every batch of a side: each role's CPU per task.
    spent = {
        tree: {workers: {side: {"tasks": 0, **dict.fromkeys(ROLES, 0.0)} for side in ("noop", "evalhub")} for workers in (1, 2)}
        for tree in trees
    }
    # Interleaved repeats: for 1 then 2 workers, again and again (with ``--compare`` each tree in
    # turn, their order alternating), one cluster per tree that runs ``--pairs`` pairs of batches,
    # a no-op batch and a night, the pair's order alternating too. Both sides of a ratio run on the
    # same cluster processes, warmed alike, and a machine shared with other jobs slows them alike.
    for repeat in range(options.repeats):
        for workers in (1, 2):
            for tree in trees if repeat % 2 == 0 else trees[::-1]:
                pairs = [
                    [["noop", str(options.noop_tasks)], ["night"]][:: 1 if (repeat + pair) % 2 == 0 else -1]
                    for pair in range(options.pairs)
                ]
                for result in measure(bases[tree], workers, 0, [batch for pair in pairs for batch in pair], repo=tree):
                    # The rate counts from the first task taken to the last one stopped (see
                    # SNIPPET): building and saving the night's schedule and run (``prepare``) is
                    # the nightly task's, not the executions', and the pusher's first poll is
                    # neither side's.
                    side = "evalhub" if "status" in result else "noop"
                    rates[tree][workers][side].append(result["n"] / result["worked"])
                    if result["cpu"]:
                        spent[tree][workers][side]["tasks"] += result["n"]
                        for role in ROLES:
                            spent[tree][workers][side][role] += result["cpu"][role]
    print(f"broker: {broker}; {options.repeats} interleaved repeats of {options.pairs} pairs; load average: {os.getloadavg()[0]:.1f}")
    print("| tree | workers | django-q2 no-op tasks/s (best / median) | evalhub no-op executions/s (best / median) | ratio (medians) |")
    print("|---|---|---|---|---|")
    for tree in trees:
        for workers, rate in rates[tree].items():
            noop_rate, execution_rate = statistics.median(rate["noop"]), statistics.median(rate["evalhub"])
            print(
                f"| {tree.name} | {workers} | {max(rate['noop']):.1f} / {noop_rate:.1f} | {max(rate['evalhub']):.1f} / {execution_rate:.1f} "
                f"| {execution_rate / noop_rate:.2f}× |"
            )
    # Both sides keep the two cores busy, so a side's rate follows the CPU its tasks cost the
    # whole cluster: the ratio of the totals below is about the ratio of the rates.
    print()
    print(
        "| tree | workers | CPU per task, ms: no-op (pusher / monitor / workers / sentinel = total) | evalhub's execution (same) | ratio of totals |"
    )
    print("|---|---|---|---|---|")
    for tree in trees:
        for workers in (1, 2):
            cells, totals = [], []
            for side in ("noop", "evalhub"):
                used = spent[tree][workers][side]
                if not used["tasks"]:
                    cells.append("—")
                    continue
                per_task = {role: used[role] * 1000 / used["tasks"] for role in ROLES}
                totals.append(sum(per_task.values()))
                cells.append(
                    " / ".join(f"{per_task[role]:.1f}" for role in ("pusher", "monitor", "workers", "sentinel")) + f" = {totals[-1]:.1f}"
                )
            ratio = f"{totals[0] / totals[1]:.2f}×" if len(totals) == 2 else "—"
            print(f"| {tree.name} | {workers} | {cells[0]} | {cells[1]} | {ratio} |")
    if options.rates_only:
        return
    slow = {workers: measure(bases[REPO], workers, options.night_delay, [["night"]])[0]["seconds"] for workers in (1, 2)}
    print(
        f"| night of 40 × {options.night_delay:g} s executions | 1 worker: {slow[1]:.1f} s | 2 workers: {slow[2]:.1f} s | {slow[1] / slow[2]:.2f}× faster |"
    )


def migrate(base: dict[str, str], repo: Path) -> None:
    """Migrate ``repo``'s schema into the database ``base`` names and load the reference catalog."""
    subprocess.run([PYTHON, "manage.py", "migrate", "-v0"], cwd=repo, env=environment(base, 1, 0, repo), check=True)
    subprocess.run([PYTHON, "manage.py", "load_reference"], cwd=repo, env=environment(base, 1, 0, repo), check=True, capture_output=True)


if __name__ == "__main__":
    main()
