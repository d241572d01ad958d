"""The nightly's django-q2 schedule, time zones and daylight saving (docs/failure-modes.md B2).

The nightly is declared at ``EVALHUB_NIGHTLY_TIME_UTC`` and a night is a UTC date, so neither the
rotation week nor the identity of a night depends on ``TIME_ZONE``.
"""

from __future__ import annotations

import datetime as dt
import io
from decimal import Decimal
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone
from django_q.models import Schedule as QSchedule

from runs.nightly import start_nightly
from runs.periodic import (
    NIGHTLY_TASK_FUNC,
    NIGHTLY_TASK_NAME,
    declare_periodic_tasks,
    next_occurrence,
    parse_nightly_time,
)
from schedules.building import rotation_day
from schedules.models import Schedule
from schedules.services import iso_timestamp, preview_schedule

pytestmark = pytest.mark.django_db

SEED = "runner-live-seven-week-v1"
BERLIN = "Europe/Berlin"


def utc(*parts: int) -> dt.datetime:
    return dt.datetime(*parts, tzinfo=dt.UTC)


def setup_schedules() -> str:
    out = io.StringIO()
    call_command("setup_schedules", stdout=out)
    return out.getvalue()


def nightly_rows() -> list[QSchedule]:
    return list(QSchedule.objects.filter(name=NIGHTLY_TASK_NAME))


# --- parsing the configured time -------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [("04:00", (4, 0)), (" 23:59 ", (23, 59)), ("00:00", (0, 0))])
def test_a_nightly_time_is_hh_mm_utc(text: str, expected: tuple[int, int]) -> None:
    parsed = parse_nightly_time(text)
    assert (parsed.hour, parsed.minute, parsed.tzinfo) == (*expected, dt.UTC)


@pytest.mark.parametrize("text", ["4:00", "24:00", "04:60", "+4:00", "04:00:00", "", "noon", "04.00", "\u0660\u0664:\u0660\u0660", None])
def test_anything_else_is_refused_saying_what_to_fix(text: Any) -> None:
    with pytest.raises(ValueError, match=r"^EVALHUB_NIGHTLY_TIME_UTC must be a UTC time of day as HH:MM such as 04:00, not "):
        parse_nightly_time(text)


def test_the_next_occurrence_is_today_or_tomorrow_in_utc() -> None:
    at = parse_nightly_time("04:00")
    assert next_occurrence(at, now=utc(2026, 8, 19, 3, 59)) == utc(2026, 8, 19, 4, 0)
    assert next_occurrence(at, now=utc(2026, 8, 19, 4, 0)) == utc(2026, 8, 19, 4, 0)
    assert next_occurrence(at, now=utc(2026, 8, 19, 4, 1)) == utc(2026, 8, 20, 4, 0)


def test_the_next_occurrence_ignores_the_zone_now_is_given_in() -> None:
    berlin_evening = dt.datetime(2026, 8, 19, 23, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))  # 21:00Z
    assert next_occurrence(parse_nightly_time("04:00"), now=berlin_evening) == utc(2026, 8, 20, 4, 0)


# --- setup_schedules -----------------------------------------------------------------------------------------


def test_setup_schedules_declares_one_daily_nightly() -> None:
    output = setup_schedules()
    (row,) = nightly_rows()
    assert (row.func, row.schedule_type, row.repeats) == (NIGHTLY_TASK_FUNC, QSchedule.DAILY, -1)
    assert row.args in (None, "") and row.kwargs in (None, "")
    next_run = row.next_run.astimezone(dt.UTC)
    assert (next_run.hour, next_run.minute) == (4, 0)
    prune = QSchedule.objects.get(name="evalhub-prune-history")
    assert (prune.func, prune.schedule_type, prune.repeats) == ("runs.tasks.prune_history", QSchedule.DAILY, -1)
    reaper = QSchedule.objects.get(name="evalhub-reaper")
    assert (reaper.func, reaper.schedule_type, reaper.minutes, reaper.repeats) == ("runs.tasks.reap", QSchedule.MINUTES, 1, -1)
    notify = QSchedule.objects.get(name="evalhub-deliver-notifications")
    assert (notify.func, notify.schedule_type, notify.minutes, notify.repeats) == (
        "runs.tasks.deliver_notifications",
        QSchedule.MINUTES,
        1,
        -1,
    )
    assert output == (
        f"evalhub-nightly: runs.tasks.run_nightly daily, next run {next_run:%Y-%m-%d %H:%M} UTC\n"
        f"evalhub-prune-history: runs.tasks.prune_history daily, next run {prune.next_run.astimezone(dt.UTC):%Y-%m-%d %H:%M} UTC\n"
        "evalhub-reaper: runs.tasks.reap every minute, due now (the next worker to start runs it)\n"
        "evalhub-deliver-notifications: runs.tasks.deliver_notifications every minute, due now (the next worker to start runs it)\n"
    )
    # An hour later with no worker, the minute tasks are still due, not "next run" an hour ago.
    QSchedule.objects.filter(schedule_type=QSchedule.MINUTES).update(next_run=timezone.now() - dt.timedelta(hours=1))
    assert setup_schedules().splitlines()[2:] == [
        "evalhub-reaper: runs.tasks.reap every minute, due now (the next worker to start runs it)",
        "evalhub-deliver-notifications: runs.tasks.deliver_notifications every minute, due now (the next worker to start runs it)",
    ]


def test_setup_schedules_twice_changes_nothing() -> None:
    setup_schedules()
    (first,) = nightly_rows()
    setup_schedules()
    (second,) = nightly_rows()
    assert (second.pk, second.next_run, second.func, second.schedule_type) == (
        first.pk,
        first.next_run,
        first.func,
        first.schedule_type,
    )


def test_a_later_deploy_does_not_move_the_next_run() -> None:
    declare_periodic_tasks(now=utc(2026, 8, 19, 3, 0))
    declare_periodic_tasks(now=utc(2026, 8, 19, 12, 0))  # the same time configured: no skipped night
    (row,) = nightly_rows()
    assert row.next_run == utc(2026, 8, 19, 4, 0)


def test_changing_the_configured_time_moves_the_next_run(settings: Any) -> None:
    declare_periodic_tasks(now=utc(2026, 8, 19, 3, 0))
    settings.EVALHUB = {**settings.EVALHUB, "NIGHTLY_TIME_UTC": "05:30"}
    declare_periodic_tasks(now=utc(2026, 8, 19, 3, 0))
    (row,) = nightly_rows()
    assert row.next_run == utc(2026, 8, 19, 5, 30)


def test_an_edited_row_is_put_back(settings: Any) -> None:
    declare_periodic_tasks(now=utc(2026, 8, 19, 3, 0))
    QSchedule.objects.filter(name=NIGHTLY_TASK_NAME).update(func="elsewhere.task", schedule_type=QSchedule.HOURLY, repeats=3)
    declare_periodic_tasks(now=utc(2026, 8, 19, 3, 0))
    (row,) = nightly_rows()
    assert (row.func, row.schedule_type, row.repeats, row.next_run) == (
        NIGHTLY_TASK_FUNC,
        QSchedule.DAILY,
        -1,
        utc(2026, 8, 19, 4, 0),
    )


def test_arguments_a_hook_a_cron_or_a_cluster_given_in_the_admin_are_taken_off_every_declared_task() -> None:
    # The nightly with an argument failed every night ("run_nightly() takes 0 positional
    # arguments"), and the argument, a pasted key, was stored in each failed task's row.
    rows = declare_periodic_tasks(now=utc(2026, 8, 19, 3, 0))
    QSchedule.objects.filter(pk__in=[row.pk for row in rows]).update(
        args="'sk-abcdefghijklmnop1234'", kwargs="x=1", hook="os.system", cron="* * * * *", cluster="elsewhere", intended_date_kwarg="day"
    )
    declared = declare_periodic_tasks(now=utc(2026, 8, 19, 3, 0))
    assert [row.pk for row in declared] == [row.pk for row in rows]
    for row in QSchedule.objects.filter(pk__in=[row.pk for row in rows]):
        assert (row.args, row.kwargs, row.hook, row.cron, row.cluster, row.intended_date_kwarg) == (None,) * 6


@pytest.mark.parametrize("bad", ["4am", "25:00", "04:00 UTC", ""])
def test_a_bad_nightly_time_is_a_command_error(settings: Any, bad: str) -> None:
    settings.EVALHUB = {**settings.EVALHUB, "NIGHTLY_TIME_UTC": bad}
    with pytest.raises(CommandError, match=rf"^EVALHUB_NIGHTLY_TIME_UTC must be a UTC time of day as HH:MM such as 04:00, not '{bad}'$"):
        setup_schedules()
    assert nightly_rows() == []


def test_setup_schedules_in_a_local_time_zone_still_uses_utc(settings: Any) -> None:
    settings.TIME_ZONE = BERLIN
    declare_periodic_tasks(now=utc(2025, 10, 25, 12, 0))
    (row,) = nightly_rows()
    assert row.next_run == utc(2025, 10, 26, 4, 0)


def test_django_q_keeps_the_daily_run_at_the_same_utc_time_across_dst() -> None:
    """With django-q2's time zone at UTC (the default here; evalhub.E005 guards it), the run after
    the fall-back night and after the spring-forward night stays at 04:00Z."""
    row = QSchedule(name="probe", func=NIGHTLY_TASK_FUNC, schedule_type=QSchedule.DAILY, next_run=utc(2025, 10, 25, 4, 0))
    assert row.calculate_next_run() == utc(2025, 10, 26, 4, 0)
    assert row.calculate_next_run(utc(2025, 10, 26, 4, 0)) == utc(2025, 10, 27, 4, 0)
    assert row.calculate_next_run(utc(2025, 3, 29, 4, 0)) == utc(2025, 3, 30, 4, 0)


def test_a_local_django_q_time_zone_would_move_the_run_an_hour(monkeypatch: pytest.MonkeyPatch) -> None:
    """Why evalhub.E005 exists: django-q2 keeps daily runs at the same local wall time."""
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "TIME_ZONE", BERLIN)
    row = QSchedule(name="probe", func=NIGHTLY_TASK_FUNC, schedule_type=QSchedule.DAILY, next_run=utc(2025, 10, 25, 4, 0))
    assert row.calculate_next_run() == utc(2025, 10, 26, 5, 0)


# --- nights and rotation weeks do not depend on TIME_ZONE ----------------------------------------------------


def deliver(now: dt.datetime) -> Any:
    return start_nightly(seed=SEED, cost_ceiling_usd=Decimal(12), now=now, environ={}, execute=True)


@pytest.mark.parametrize("time_zone", ["UTC", BERLIN, "America/Los_Angeles", "Pacific/Kiritimati"])
def test_the_rotation_week_does_not_depend_on_time_zone(reference_catalog: None, settings: Any, time_zone: str) -> None:
    settings.TIME_ZONE = time_zone
    # Thursday 2026-08-20 01:30 in Berlin is still Wednesday 23:30Z: the week has not rolled yet.
    berlin = dt.datetime(2026, 8, 20, 1, 30, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    document = preview_schedule(seed=SEED, now=berlin)
    assert document["generatedAt"] == "2026-08-19T23:30:00.000Z"
    assert document["rotationDay"] == 0
    assert preview_schedule(seed=SEED, now=utc(2026, 8, 20, 0, 0))["rotationDay"] == 1


def test_the_same_schedule_is_built_in_any_time_zone(reference_catalog: None, settings: Any) -> None:
    now = utc(2026, 11, 30, 4, 0)
    settings.TIME_ZONE = "UTC"
    in_utc = preview_schedule(seed=SEED, now=now)
    settings.TIME_ZONE = BERLIN
    assert preview_schedule(seed=SEED, now=now) == in_utc
    assert in_utc["rotationDay"] == rotation_day(iso_timestamp(now))


def test_both_0230_berlin_deliveries_on_the_fall_back_night_are_one_night(reference_catalog: None, settings: Any) -> None:
    settings.TIME_ZONE = BERLIN
    first = deliver(utc(2025, 10, 26, 0, 30))  # 02:30 CEST
    second = deliver(utc(2025, 10, 26, 1, 30))  # 02:30 CET, the repeated hour
    assert (first.executed, second.executed) == (True, False)
    assert list(Schedule.objects.values_list("night", flat=True)) == [dt.date(2025, 10, 26)]
    assert second.run.pk == first.run.pk


def test_the_spring_forward_night_still_runs(reference_catalog: None, settings: Any) -> None:
    settings.TIME_ZONE = BERLIN
    before = deliver(utc(2025, 3, 30, 0, 30))  # 01:30 CET; 02:30 local does not exist that night
    after = deliver(utc(2025, 3, 30, 1, 30))  # 03:30 CEST
    assert (before.executed, after.executed) == (True, False)
    assert list(Schedule.objects.values_list("night", flat=True)) == [dt.date(2025, 3, 30)]
    assert deliver(utc(2025, 3, 31, 4, 0)).executed


@pytest.mark.parametrize(
    ("edit", "field", "message"),
    [
        ({"func": "os.system", "args": ""}, "func", "evalhub's workers run only its own periodic tasks: runs.tasks.run_nightly,"),
        ({"args": "'sk-abcdefghijklmnop1234'"}, "args", "evalhub's periodic tasks take no arguments"),
        ({"kwargs": "day=1"}, "kwargs", "evalhub's periodic tasks take no arguments"),
        ({"hook": "os.system"}, "hook", "record their result in their own rows"),
    ],
)
def test_the_admin_refuses_a_periodic_task_that_is_not_evalhub_s_own_as_declared(staff_client, edit, field, message) -> None:
    from django.urls import reverse

    (nightly, *_) = declare_periodic_tasks(now=utc(2026, 8, 19, 3, 0))
    form = {
        "name": nightly.name,
        "func": nightly.func,
        "hook": "",
        "args": "",
        "kwargs": "",
        "schedule_type": nightly.schedule_type,
        "minutes": "",
        "repeats": "-1",
        "next_run_0": "2026-08-19",
        "next_run_1": "04:00:00",
        "cron": "",
        "cluster": "",
        "intended_date_kwarg": "",
        **edit,
    }
    response = staff_client.post(reverse("admin:django_q_schedule_change", args=[nightly.pk]), form)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert message in " ".join(errors[field])
    assert "sk-abcdefghijklmnop1234" not in response.content.decode()
    nightly.refresh_from_db()
    assert (nightly.func, nightly.args, nightly.kwargs, nightly.hook) == (NIGHTLY_TASK_FUNC, None, None, None)
    # As declared, the same form saves.
    saved = staff_client.post(
        reverse("admin:django_q_schedule_change", args=[nightly.pk]), {**form, **dict.fromkeys(edit, ""), "func": NIGHTLY_TASK_FUNC}
    )
    assert saved.status_code == 302
