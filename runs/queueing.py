"""Queueing an execution's task: ``runs.tasks.run_execution`` put on the django-q2 queue once the
current transaction commits, with when and how many times it was queued recorded on its row."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from runs.models import Execution

#: Executions whose dispatch is recorded by one update (the ids of one ``IN`` list).
DISPATCH_CHUNK = 500


def dispatch_execution(execution_pk: int) -> None:
    """Put ``runs.tasks.run_execution(execution_pk)`` on the queue (after the current transaction
    commits) and record when; the task name says which execution and which dispatch it is."""
    dispatch_executions([execution_pk])


def dispatch_executions(execution_pks: Sequence[int]) -> None:
    """:func:`dispatch_execution` for many executions at once: once the current transaction
    commits, one update records the dispatch of all of them and one query reads their task
    names, then one task per execution is queued, in the given order."""
    pks = list(execution_pks)

    def enqueue() -> None:
        from django_q.tasks import async_task

        now = timezone.now()
        for first in range(0, len(pks), DISPATCH_CHUNK):
            chunk = pks[first : first + DISPATCH_CHUNK]
            Execution.objects.filter(pk__in=chunk).update(dispatched_at=now, dispatches=F("dispatches") + 1)
            rows = {
                pk: rest for pk, *rest in Execution.objects.filter(pk__in=chunk).values_list("pk", "run_id", "execution_id", "dispatches")
            }
            for pk in chunk:
                if pk not in rows:
                    continue
                run_id, execution_id, dispatches = rows[pk]
                async_task(
                    "runs.tasks.run_execution",
                    pk,
                    task_name=f"run-{run_id}-{execution_id}-{dispatches}",
                    group=f"run-{run_id}",
                )

    if pks:
        transaction.on_commit(enqueue)
