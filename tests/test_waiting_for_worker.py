"""A run whose executions are queued while no worker runs says so on its page and in its progress
(runs/queries.py ``waiting_for_a_worker``): "0 of 40 settled, updating as they settle" alone would
wait for ever. Alive is what django-q2's clusters say of themselves (``django_q.status.Stat``)."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.signing import SignedPackage
from django_q.status import Stat, Status

from runs.models import Execution, ExecutionStatus

pytestmark = pytest.mark.django_db

NOTICE = 'class="no-worker notice notice-warn"'


@pytest.fixture
def queued_night(dispatched_night):
    """The night's 40 executions with their tasks on the queue (``dispatched_at`` set, as
    ``runs.queueing.dispatch_executions`` records once its transaction commits)."""
    Execution.objects.filter(run=dispatched_night).update(dispatched_at=timezone.now())
    return dispatched_night


def a_cluster_is_alive(cluster_id: str = "test-cluster", seconds: int = 60) -> None:
    """Save a cluster's status where its sentinel would (the broker's cache), as django-q2 does."""
    broker = get_broker()
    broker.set_stat(Stat.get_key(cluster_id), SignedPackage.dumps(Status(pid=4242, cluster_id=cluster_id), True), seconds)


def notice_of(page: str) -> str:
    start = page.index(NOTICE)
    return page[start : page.index("</p>", start)]


def test_a_queued_run_with_no_worker_says_a_worker_is_needed(queued_night, reader_client):
    page = reader_client.get(reverse("pages:run", args=[queued_night.pk])).content.decode()
    progress = reader_client.get(reverse("pages:run-progress", args=[queued_night.pk])).json()

    notice = notice_of(page)
    assert " hidden" not in notice.split(">", 1)[0]
    assert "No worker is running" in notice and '<span class="waiting">40</span>' in notice
    assert '<code class="command">manage.py worker</code>' in notice
    assert progress["waitingForWorker"] == 40


def test_settled_executions_are_no_longer_counted_as_waiting(queued_night, reader_client):
    first = queued_night.executions.order_by("position").first()
    Execution.objects.filter(pk=first.pk).update(status=ExecutionStatus.FINISHED, classification="skipped", failure_code="run_cancelled")

    assert reader_client.get(reverse("pages:run-progress", args=[queued_night.pk])).json()["waitingForWorker"] == 39


def test_a_live_cluster_takes_the_notice_away(queued_night, reader_client):
    a_cluster_is_alive()

    page = reader_client.get(reverse("pages:run", args=[queued_night.pk])).content.decode()
    progress = reader_client.get(reverse("pages:run-progress", args=[queued_night.pk])).json()

    assert " hidden" in notice_of(page).split(">", 1)[0]
    assert progress["waitingForWorker"] == 0


def test_a_status_that_cannot_be_read_says_nothing_and_the_page_still_answers(queued_night, reader_client, monkeypatch):
    def unreadable(*args, **kwargs):
        raise ConnectionError("cache down")

    monkeypatch.setattr(Stat, "get_all", staticmethod(unreadable))

    response = reader_client.get(reverse("pages:run", args=[queued_night.pk]))

    assert response.status_code == 200
    assert " hidden" in notice_of(response.content.decode()).split(">", 1)[0]
    assert reader_client.get(reverse("pages:run-progress", args=[queued_night.pk])).json()["waitingForWorker"] == 0


def test_executions_never_queued_ask_nothing_of_the_workers(queued_night, reader_client, monkeypatch):
    """A run executed in the command's own process (``nightly --execute``) queues nothing."""
    Execution.objects.filter(run=queued_night).update(dispatched_at=None)
    asked: list[bool] = []
    monkeypatch.setattr(Stat, "get_all", staticmethod(lambda *args, **kwargs: asked.append(True) or []))

    progress = reader_client.get(reverse("pages:run-progress", args=[queued_night.pk])).json()

    assert progress["waitingForWorker"] == 0
    assert asked == []


def test_a_finished_run_has_no_live_view_and_no_notice(queued_night, reader_client):
    Execution.objects.filter(run=queued_night).update(status=ExecutionStatus.FINISHED, dispatched_at=timezone.now())
    queued_night.status = "finished"
    queued_night.save(update_fields=["status"])

    page = reader_client.get(reverse("pages:run", args=[queued_night.pk])).content.decode()

    assert NOTICE not in page and "live-progress" not in page
