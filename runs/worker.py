"""What a django-q2 worker process does besides running tasks: stop within a bounded time, and
recover what other workers left behind.

Connected in ``runs.apps.RunsConfig.ready`` to django-q2's ``post_spawn`` (in each new worker
process) and ``pre_execute`` (before each task).
"""

from __future__ import annotations

import gc
import logging
from typing import Any

from django.db import connection

from evalhub.secrets import redact
from runs import leases

logger = logging.getLogger(__name__)


def keep_database_connection() -> None:
    """Keep this worker process's database connection across its tasks when the settings would
    close it after each one (SQLite's ``CONN_MAX_AGE`` 0).

    django-q2 closes connections older than ``CONN_MAX_AGE`` before every task; for SQLite that
    meant opening the file, running the connection's PRAGMAs and reading the schema again for
    every execution — more than a no-op execution's own statements. A connection that saw an
    error is still closed (Django's ``close_if_unusable_or_obsolete``). PostgreSQL's connections
    already live for ``conn_max_age`` (``evalhub.settings.database_config``); they are left so.
    Only worker processes do this: django-q2's own processes keep the settings as they are.
    """
    if connection.vendor == "sqlite" and connection.settings_dict.get("CONN_MAX_AGE") == 0:
        # Read when the connection opens: django-q2 closes every connection before it spawns
        # workers, so this process's first task opens one that lives on.
        connection.settings_dict["CONN_MAX_AGE"] = None


def keep_startup_objects_out_of_collections() -> None:
    """Leave every object this worker process holds when it starts out of the cyclic garbage
    collector's passes (``gc.freeze``): Django's and evalhub's modules and settings, about 137,000
    objects that live as long as the process.

    Without it, each full collection walks all of them: in a worker running night after night
    of no-op executions, one full collection took about 110 ms every 500 tasks (0.2 ms an
    execution, docs/benchmarks.md); with them frozen, the collector spent 5-12 ms in all over the
    same 500. What the process allocates afterwards is collected as before; the frozen objects are
    never freed, and they would not have been (a worker is replaced after ``recycle`` tasks)."""
    gc.freeze()


def on_worker_start(sender: Any = None, proc_name: str = "", **kwargs: Any) -> None:
    """A worker process started: SIGTERM/SIGINT now stop it within a bounded time (the current
    execution is interrupted and handed back), its database connection is kept across its tasks
    (:func:`keep_database_connection`), and the reaper runs once, so a night left behind by a
    dead worker goes on as soon as any worker is up; what it then holds — the modules its tasks
    run through included — is left out of the garbage collector's passes
    (:func:`keep_startup_objects_out_of_collections`). Never raises (the worker must start)."""
    leases.install_worker_signal_handlers()
    keep_database_connection()
    try:
        from runs.recovery import reap

        summary = reap()
        if summary.taken_back or summary.finalised or summary.redispatched or summary.reported:
            logger.warning("worker %s started: %s", proc_name, summary.line())
    except Exception as exc:
        logger.warning("worker %s started; the reaper failed: %s", proc_name, redact(f"{type(exc).__name__}: {exc}"))
    # Imported now rather than by the first task, so that they are among what is frozen.
    import runs.tasks  # noqa: F401

    keep_startup_objects_out_of_collections()


def before_task(sender: Any = None, func: Any = None, task: Any = None, **kwargs: Any) -> None:
    """A worker asked to stop takes no new task: it exits (the task is recovered by the reaper or
    the broker's redelivery)."""
    if leases.shutdown_requested():
        raise SystemExit(0)
