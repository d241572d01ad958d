"""``manage.py worker``: django-q2's ``qcluster`` with a bounded stop.

On SIGTERM or SIGINT the main process tells every worker process to stop (the execution each one
runs is interrupted, its runtime killed, and handed back to the queue for another worker), lets
django-q2 stop the cluster, and if the cluster has not stopped within ``--grace`` seconds kills
what is left of it: the process exits within a bounded time, never after the night.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import threading
from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError
from django_q.cluster import Cluster
from django_q.management.commands.qcluster import Command as QclusterCommand

from evalhub.commands import require_migrated
from evalhub.secrets import secret_kinds
from runs import leases

logger = logging.getLogger(__name__)

#: The ``--grace`` range in seconds: the stop must leave the runtimes a moment, and end within the hour.
GRACE_RANGE = (1.0, 3600.0)


def grace_seconds(text: str) -> float:
    """``--grace`` as seconds; :class:`CommandError` for anything but a finite number in :data:`GRACE_RANGE`
    (a huge value overflows the stop timer after SIGTERM, ``nan`` never fires, 0 or less is no grace)."""
    low, high = GRACE_RANGE
    try:
        seconds = float(text)
    except (TypeError, ValueError):
        seconds = math.nan
    if not (math.isfinite(seconds) and low <= seconds <= high):
        # Never quote a key pasted here (as evalhub/settings.py _shown).
        shown = "a value that looks like a secret (not shown)" if secret_kinds(text) else repr(text)
        raise CommandError(f"--grace must be a number of seconds from {low:g} to {high:g} (for example 30), not {shown}")
    return seconds


def running_line(q_cluster: dict, grace: float) -> str:
    """What the worker prints once its cluster runs: the worker processes, the broker (named, never
    its URL, which may hold a password) and how to stop it."""
    workers = int(q_cluster.get("workers", 1))
    broker = "Redis (REDIS_URL)" if q_cluster.get("redis") else "the database (django-q2's ORM broker)"
    return (
        f"worker running: {workers} worker process{'es' if workers != 1 else ''} taking executions from {broker}; "
        f"Ctrl-C or SIGTERM stops it within {grace:g} s"
    )


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (Linux ``/proc``; empty elsewhere)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class Command(QclusterCommand):
    help = "Start a django-q2 cluster that stops within --grace seconds of SIGTERM/SIGINT, handing its executions back."

    def add_arguments(self, parser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--grace", default="30", help="Seconds (1 to 3600) to wait for the cluster to stop before killing it.")

    def handle(self, *args, **options) -> None:
        grace = grace_seconds(str(options["grace"]))
        # django-q2's cluster does not look: on a database never migrated its processes log
        # "no such table" twice a second until killed, and SIGTERM waits out the whole grace.
        require_migrated(then=", then start the worker")
        settings.SECRET_KEY  # noqa: B018 — the cluster signs its tasks with it
        leases.prepare_cluster_shutdown()
        cluster = Cluster()
        stopping = threading.Event()

        def hard_stop() -> None:
            logger.warning("the cluster did not stop within %.0f s: killing its processes", grace)
            for pid in descendants(os.getpid()):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            os._exit(1)

        def on_stop(signum: int, frame: object) -> None:
            if stopping.is_set():
                return
            stopping.set()
            leases.signal_cluster_shutdown()
            timer = threading.Timer(grace, hard_stop)
            timer.daemon = True
            timer.start()
            cluster.sig_handler(signum, frame)

        signal.signal(signal.SIGTERM, on_stop)
        signal.signal(signal.SIGINT, on_stop)
        cluster.start()
        if options.get("run_once", False):
            cluster.stop()
        else:
            # django-q2 says it started only at INFO, below the default log level: without this
            # line `make worker` prints nothing, and a person cannot tell it is running.
            self.stdout.write(running_line(settings.Q_CLUSTER, grace))
