"""What a django-q2 worker process does besides running tasks: stop within a bounded time, and
recover what other workers left behind.

Connected in ``runs.apps.RunsConfig.ready`` to django-q2's ``post_spawn`` (in each new worker
process) and ``pre_execute`` (before each task).
"""

from __future__ import annotations

import logging
from typing import Any

from evalhub.secrets import redact
from runs import leases

logger = logging.getLogger(__name__)


def on_worker_start(sender: Any = None, proc_name: str = "", **kwargs: Any) -> None:
    """A worker process started: SIGTERM/SIGINT now stop it within a bounded time (the current
    execution is interrupted and handed back), and the reaper runs once, so a night left behind
    by a dead worker goes on as soon as any worker is up. Never raises (the worker must start)."""
    leases.install_worker_signal_handlers()
    try:
        from runs.services import reap

        summary = reap()
        if summary.taken_back or summary.finalised or summary.redispatched or summary.reported:
            logger.warning("worker %s started: %s", proc_name, summary.line())
    except Exception as exc:
        logger.warning("worker %s started; the reaper failed: %s", proc_name, redact(f"{type(exc).__name__}: {exc}"))


def before_task(sender: Any = None, func: Any = None, task: Any = None, **kwargs: Any) -> None:
    """A worker asked to stop takes no new task: it exits (the task is recovered by the reaper or
    the broker's redelivery)."""
    if leases.shutdown_requested():
        raise SystemExit(0)
