"""evalhub's own health checks for ``/health/`` (django-health-check), beside the library's
database and cache checks: the broker answers, the last nightly is no older than its schedule
allows, no execution is running past its lease, queued executions are being taken, and every
live runtime is installed.

Each check raises ``ServiceUnavailable`` with a sentence saying what is wrong and what to do;
none names a secret. :class:`HealthView` serves them: the status is public (load balancers and
monitors read it without signing in), the sentences — run ids, times — only for signed-in users.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from django.db import connections
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from health_check.base import HealthCheck, HealthCheckResult
from health_check.exceptions import ServiceUnavailable
from health_check.views import HealthCheckView

from evalhub.conf import evalhub_setting
from runs.models import Execution, ExecutionStatus, Run, Trigger
from runs.periodic import NIGHTLY_TASK_NAME, parse_nightly_time

#: How late a nightly may start after its scheduled time before it counts as missed (the cluster
#: checks schedules every 30 s; building and saving a night takes seconds).
NIGHTLY_GRACE = dt.timedelta(hours=1)
#: How long past its lease an execution may still be running: the reaper runs every minute.
LEASE_GRACE = dt.timedelta(minutes=2)
#: How long a queued execution may wait while nothing runs: a worker takes a task within seconds.
QUEUE_GRACE = dt.timedelta(minutes=10)


def _fmt(moment: dt.datetime) -> str:
    return f"{moment.astimezone(dt.UTC):%Y-%m-%d %H:%M} UTC"


@dataclasses.dataclass
class Broker(HealthCheck):
    """The django-q2 broker (Redis, or the ORM broker's database) answers."""

    def run(self) -> None:
        from django_q.brokers import get_broker
        from django_q.conf import Conf

        try:
            broker = get_broker()
            if not broker.ping():
                raise ServiceUnavailable("the task broker did not answer")
            broker.queue_size()
        except ServiceUnavailable:
            raise
        except Exception as exc:
            if Conf.ORM:
                # The embedded broker is a table of the database (django-q2's ORM broker).
                raise ServiceUnavailable(
                    f"the task broker's table cannot be read ({type(exc).__name__}): is the database migrated? run `manage.py migrate`"
                ) from None
            raise ServiceUnavailable(
                f"the task broker cannot be reached ({type(exc).__name__}): check REDIS_URL and that Redis runs"
            ) from None


@dataclasses.dataclass
class Nightly(HealthCheck):
    """The newest nightly run started no earlier than the last time the schedule called for one
    (``EVALHUB_NIGHTLY_TIME_UTC``, allowing :data:`NIGHTLY_GRACE`); before the first nightly, the
    schedule exists and is not overdue."""

    def run(self) -> None:
        from django_q.models import Schedule as QSchedule

        now = timezone.now()
        task = QSchedule.objects.filter(name=NIGHTLY_TASK_NAME).only("next_run").first()
        if task is None:
            raise ServiceUnavailable("the nightly is not scheduled: run `manage.py setup_schedules`")
        at = parse_nightly_time(evalhub_setting("NIGHTLY_TIME_UTC"))
        # The latest scheduled start that is already past its grace.
        cutoff = (now - NIGHTLY_GRACE).astimezone(dt.UTC)
        due = dt.datetime.combine(cutoff.date(), at)
        if due > cutoff:
            due -= dt.timedelta(days=1)
        last = Run.objects.filter(trigger=Trigger.NIGHTLY).order_by("-created_at").values_list("created_at", flat=True).first()
        if last is None:
            if task.next_run is not None and task.next_run < now - NIGHTLY_GRACE:
                raise ServiceUnavailable(f"the first nightly was due at {_fmt(task.next_run)} and has not run: is a worker running?")
            return
        if last < due - dt.timedelta(minutes=5):
            hours = (now - last).total_seconds() / 3600
            raise ServiceUnavailable(
                f"the last nightly started {hours:.0f} h ago ({_fmt(last)}); one was due at {_fmt(due)}: is a worker running?"
            )


@dataclasses.dataclass
class Leases(HealthCheck):
    """No execution is still running :data:`LEASE_GRACE` after its lease expired (the reaper, run
    by the workers every minute, takes such executions back)."""

    def run(self) -> None:
        stuck = Execution.objects.filter(status=ExecutionStatus.RUNNING, lease_expires_at__lt=timezone.now() - LEASE_GRACE)
        oldest = stuck.order_by("lease_expires_at").values_list("lease_expires_at", "run_id").first()
        if oldest is not None:
            count = stuck.count()
            raise ServiceUnavailable(
                f"{count} execution(s) still running past their leases (the oldest, of run {oldest[1]}, expired at "
                f"{_fmt(oldest[0])}): the reaper is not running; start a worker (`manage.py worker`)"
            )


@dataclasses.dataclass
class Queue(HealthCheck):
    """Queued executions are being taken: none has waited :data:`QUEUE_GRACE` while nothing runs
    (a night queued with ``--queue`` and no worker started would otherwise look healthy)."""

    def run(self) -> None:
        if Execution.objects.filter(status=ExecutionStatus.RUNNING).exists():
            return  # workers are busy; a queue behind them (or a provider's limit) is normal
        waiting = Execution.objects.filter(status=ExecutionStatus.PENDING, dispatched_at__lt=timezone.now() - QUEUE_GRACE)
        oldest = waiting.order_by("dispatched_at").values_list("dispatched_at", "run_id").first()
        if oldest is not None:
            raise ServiceUnavailable(
                f"{waiting.count()} queued execution(s) waiting and none running (the oldest, of run {oldest[1]}, queued at "
                f"{_fmt(oldest[0])}): no worker is taking tasks; start one (`manage.py worker`)"
            )


@dataclasses.dataclass
class Runtimes(HealthCheck):
    """Every runtime a registered executor needs (codex, opencode, the ACP agents) is installed at
    its pinned version (``runs.executors.runtime_problems``)."""

    def run(self) -> None:
        from runs.executors import runtime_problems

        problems = runtime_problems()
        if problems:
            raise ServiceUnavailable("live runtime missing: " + "; ".join(problems))


#: The ``/health/`` checks, in order: the database, the cache, the broker, then evalhub's own.
CHECKS = (
    "health_check.checks.Database",
    "health_check.checks.Cache",
    Broker,
    Nightly,
    Leases,
    Queue,
    Runtimes,
)


#: What a visitor who is not signed in reads for a failing check, in place of its sentence.
DETAILS_HIDDEN = "failing (sign in to see why)"


class _ClosingExecutor(ThreadPoolExecutor):
    """A pool for one request's synchronous checks whose threads close their database
    connections when each check ends.

    The library runs them in the event loop's default executor: under a WSGI server every
    request's loop makes new threads, and each thread's connection (kept ``CONN_MAX_AGE``
    seconds on PostgreSQL, ``evalhub.settings.database_config``) was left open until the thread
    was collected — ``runserver`` used up the server's connections within a minute of requests."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        def run() -> Any:
            try:
                return fn(*args, **kwargs)
            finally:
                connections.close_all()

        return super().submit(run)


class HealthView(HealthCheckView):
    """django-health-check's view with three changes (its 4.x view has no setting for them):

    * a failing check answers **503 Service Unavailable**, not the library's 500 (which reads as
      evalhub itself crashing, and which a monitor cannot tell from a traceback);
    * a visitor who is not signed in reads each check's name and whether it passed, never why it
      failed (run ids, times, paths): every format the library renders (HTML, JSON, text, feeds)
      reads the same results, so they are replaced as the library stores them;
    * its synchronous checks run in a pool of the request's own whose threads close their
      database connections (:class:`_ClosingExecutor`).
    """

    show_details = False

    @contextlib.contextmanager
    def get_executor(self) -> Iterator[ThreadPoolExecutor]:
        pool = _ClosingExecutor(max_workers=len(CHECKS), thread_name_prefix="evalhub-health")
        try:
            yield pool
        finally:
            # Not waited for: a check past its timeout already answered 503, and ends on its own.
            pool.shutdown(wait=False)

    async def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        self.show_details = (await request.auser()).is_authenticated
        response = await super().get(request, *args, **kwargs)
        if response.status_code == 500:
            response.status_code = 503
        return response

    @property
    def results(self) -> list[HealthCheckResult]:
        return self._results

    @results.setter
    def results(self, results: list[HealthCheckResult]) -> None:
        # The library's ``get`` assigns the gathered results, then renders from this attribute.
        if not self.show_details:
            results = [
                dataclasses.replace(result, error=ServiceUnavailable(DETAILS_HIDDEN)) if result.error else result for result in results
            ]
        self._results = results
