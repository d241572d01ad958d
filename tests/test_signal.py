"""The signal across nights over real nightly histories (runs/signal.py): the history per case ×
candidate of one bundle, evalhub's own significant_regression alert (once, delivered, never
among the reference's), bundle and case-version resets, the pages and the API with their query
counts pinned. The nights are built by the services a nightly uses (tests/signal_nights.py)."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal

import pytest
from django.core import mail
from django.urls import reverse
from django.utils import timezone

from runs.alerting import deliver_report_alerts
from runs.creation import create_run
from runs.dispatch import execute_run
from runs.evaluation.stats import wilson_interval
from runs.models import Alert, ChannelKind, NotificationChannel, Report, Run
from runs.nightly import start_nightly
from runs.reporting import alert_rows, refresh_run
from runs.signal import SIGNIFICANT_REGRESSION, bundle_signal, signal_config
from schedules.models import ScheduleEntry
from schedules.services import Selection
from tests.browser_night import ENVIRON
from tests.signal_nights import BIMODAL_PASSES, FLAKY_PASSES, REGRESSION_PASSES, WEEK_WINDOWS, SignalNights, build_signal_nights

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def week_windows(settings) -> None:
    settings.EVALHUB = {**settings.EVALHUB, **WEEK_WINDOWS, "BASELINE_READY": True}


@pytest.fixture
def week(replay_executors, week_windows) -> SignalNights:
    return build_signal_nights()


def last_report(week: SignalNights) -> Report:
    return Report.objects.select_related("run__schedule").get(run=week.runs[-1])


def cells(week: SignalNights, pair: tuple[str, str]) -> list[tuple[int, int] | None]:
    row = bundle_signal(last_report(week)).row(*pair)
    return [None if cell is None else (cell.passed, cell.trials) for cell in row.cells]


# --- the history -------------------------------------------------------------------------------


def test_the_history_holds_each_pair_per_night_of_the_bundle(week: SignalNights) -> None:
    signal = bundle_signal(last_report(week))
    assert [night.run_id for night in signal.nights] == [run.pk for run in week.runs]
    assert len({run.report.bundle_id for run in week.runs}) == 1
    assert cells(week, week.regression) == [(passes, 3) for passes in REGRESSION_PASSES]
    assert cells(week, week.bimodal) == [(passes, 3) for passes in BIMODAL_PASSES]
    assert cells(week, week.flaky) == [(passes, 3) for passes in FLAKY_PASSES]
    verdicts = {(row.case_key, row.candidate_key): row.verdict for row in signal.rows}
    assert verdicts.pop(week.regression) == "regression"
    assert verdicts.pop(week.bimodal) == "flaky"
    assert verdicts.pop(week.flaky) == "flaky"
    assert set(verdicts.values()) == {"stable"}
    # Skipped executions (opencode: no key) are never scored: they have no history at all.
    assert not [row for row in signal.rows if row.candidate_key.startswith("opencode")]
    regression = signal.row(*week.regression).signal
    assert (regression.recent.passed, regression.recent.trials, regression.baseline.passed, regression.baseline.trials) == (2, 9, 12, 12)
    assert regression.p_value < 0.05 and regression.effect == pytest.approx(2 / 9 - 1)
    # An earlier report sees only the nights up to it.
    report = Report.objects.select_related("run__schedule").get(run=week.runs[3])
    signal = bundle_signal(report)
    assert [night.run_id for night in signal.nights] == [run.pk for run in week.runs[:4]]
    assert signal.row(*week.regression).verdict == "stable"  # four clean nights, not yet tested
    assert signal.row(*week.regression).signal.reason == "4 scored nights of 7 needed (4 baseline + 3 recent)"


# --- evalhub's own alert -----------------------------------------------------------------------


def test_a_significant_regression_raises_one_alert_of_its_own_and_no_reference_alert_changes(week: SignalNights) -> None:
    alerts = list(Alert.objects.filter(code=SIGNIFICANT_REGRESSION))
    assert [(alert.report.run_id, alert.case_key, alert.candidate_key, alert.severity) for alert in alerts] == [
        (week.runs[-1].pk, *week.regression, "warning")
    ]
    assert alerts[0].message.startswith(f"{week.regression[0]}/{week.regression[1]} passed 2/9 over the last 3 nights (22%) against 12/12")
    for run in week.runs:
        report = Report.objects.get(run=run)
        # The reference's list is kept exactly, and it never holds evalhub's own alert.
        assert all(document["code"] != SIGNIFICANT_REGRESSION for document in report.alert_documents)
        reference_rows = list(report.alerts.exclude(code=SIGNIFICANT_REGRESSION).values("code", "severity", "case_key", "candidate_key"))
        expected = [
            {key: row[key] for key in ("code", "severity", "case_key", "candidate_key")} for row in alert_rows(report.alert_documents)
        ]
        assert reference_rows == expected


def test_the_alert_is_delivered_through_the_alert_channels_once(week: SignalNights, settings) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    channel = NotificationChannel(name="oncall mail", kind=ChannelKind.EMAIL, recipients=["oncall@example.test"])
    channel.full_clean()
    channel.save()
    assert deliver_report_alerts(last_report(week)) == 1
    assert [message.subject for message in mail.outbox] == [
        f"[evalhub] warning: significant_regression — {week.regression[0]} · {week.regression[1]}"
    ]
    assert deliver_report_alerts(last_report(week)) == 0  # once per alert and channel
    # Another measured run of the bundle while the regression lasts raises no second alert.
    again, _ = create_run(schedule=week.runs[-1].schedule, cost_ceiling_usd=Decimal("12"))
    execute_run(again, environ=ENVIRON)
    report = Report.objects.get(run=again)
    assert bundle_signal(Report.objects.select_related("run__schedule").get(pk=report.pk)).row(*week.regression).verdict == "regression"
    assert not report.alerts.filter(code=SIGNIFICANT_REGRESSION).exists()
    assert Alert.objects.filter(code=SIGNIFICANT_REGRESSION).count() == 1


def test_no_alert_until_the_baseline_is_declared_ready(replay_executors, settings) -> None:
    settings.EVALHUB = {**settings.EVALHUB, **WEEK_WINDOWS, "BASELINE_READY": False}
    week = build_signal_nights()
    assert bundle_signal(last_report(week)).row(*week.regression).verdict == "regression"
    assert not Alert.objects.filter(code=SIGNIFICANT_REGRESSION).exists()


# --- what starts a new history -----------------------------------------------------------------


def test_a_bundle_scoring_rules_or_case_version_change_starts_a_new_history(week: SignalNights, settings) -> None:
    settings.EVALHUB = {**settings.EVALHUB, "RUNNER_BUILD": "build-43"}
    later, _ = create_run(schedule=week.runs[-1].schedule, cost_ceiling_usd=Decimal("12"))
    execute_run(later, environ=ENVIRON)
    report = Report.objects.select_related("run__schedule").get(run=later)
    assert report.bundle_id != week.runs[-1].report.bundle_id
    signal = bundle_signal(report)
    assert [night.run_id for night in signal.nights] == [later.pk]
    row = signal.row(*week.regression)
    assert row.signal.overall.trials == 3 and not row.signal.tested and row.verdict == "flaky"
    assert not report.alerts.filter(code=SIGNIFICANT_REGRESSION).exists()
    # New scoring rules start a new history too.
    last = last_report(week)
    Report.objects.filter(pk=last.pk).update(scoring_version="scorecard-v9")
    last.refresh_from_db()
    assert [night.run_id for night in bundle_signal(last).nights] == [week.runs[-1].pk]
    Report.objects.filter(pk=last.pk).update(scoring_version=week.runs[0].report.scoring_version)
    # So does a new version of the case, for that case only. The case was edited before the last night's schedule was built: its entries carry version 2.
    ScheduleEntry.objects.filter(schedule=week.runs[-1].schedule, case_key=week.regression[0]).update(case_version=2)
    row = bundle_signal(last_report(week)).row(*week.regression)
    assert row.case_version == 2
    assert [cell is not None for cell in row.cells] == [False] * 6 + [True]
    assert not row.signal.tested and row.verdict == "flaky"
    assert bundle_signal(last_report(week)).row(*week.bimodal).case_version == 1


def test_refreshes_are_not_history(week: SignalNights, reader_client) -> None:
    refresh = refresh_run(week.runs[-1], generated_at="2026-12-01T05:00:00.000Z")
    report = Report.objects.select_related("run__schedule").get(run=refresh)
    assert bundle_signal(report) is None
    # A refresh never enters another report's history either.
    assert [night.run_id for night in bundle_signal(last_report(week)).nights] == [run.pk for run in week.runs]
    response = reader_client.get("/api/signal/", {"run": refresh.pk})
    assert response.status_code == 400
    assert response.json() == {"detail": f"Run {refresh.pk} is a refresh (re-scored, not measured): it has no history."}
    page = reader_client.get(reverse("pages:signal"), {"run": refresh.pk})
    assert page.status_code == 200 and page.context["signal"] is None
    assert "is a refresh (re-scored, not measured): it is not history." in page.content.decode()


# --- pages and API -----------------------------------------------------------------------------


def test_the_heat_map_the_run_report_and_the_compare_page_show_the_verdicts(week: SignalNights, reader_client) -> None:
    response = reader_client.get(reverse("pages:signal"))
    assert response.status_code == 200
    html = response.content.decode()
    case, candidate = week.regression
    assert f'data-case="{case}" data-candidate="{candidate}" data-verdict="regression"' in html
    assert html.count("badge-flaky") == 2 and html.count("badge-regression") == 1
    assert response.context["signal"].run_id == week.runs[-1].pk
    earlier = reader_client.get(reverse("pages:signal"), {"run": week.runs[2].pk})
    assert earlier.context["signal"].run_id == week.runs[2].pk and b"badge-regression" not in earlier.content
    # A bad run: a clear error, never a 500.
    for query, status, text in (({"run": "x"}, 400, "Enter a whole number."), ({"run": "999999"}, 404, "There is no run 999999.")):
        response = reader_client.get(reverse("pages:signal"), query)
        assert response.status_code == status and text in response.content.decode()

    # The run report: what moved since the bundle's previous night, and what it is.
    response = reader_client.get(reverse("pages:run", args=[week.runs[-1].pk]))
    changes = {(change.history.case_key, change.history.candidate_key): change for change in response.context["night_changes"]}
    assert changes[week.regression].direction == "improvement" and changes[week.regression].verdict == "flaky"  # 0/3 → 1/3
    assert changes[week.bimodal].direction == "improvement" and changes[week.bimodal].verdict == "flaky"
    assert "Signal across nights" in response.content.decode()
    response = reader_client.get(reverse("pages:run", args=[week.runs[4].pk]))
    changes = {(change.history.case_key, change.history.candidate_key): change for change in response.context["night_changes"]}
    assert changes[week.regression].verdict == "noise"  # 3/3 → 1/3 after four clean nights: one change
    assert changes[week.bimodal].verdict == "flaky"

    # The compare page labels each change.
    def labels(a: Run, b: Run) -> dict[tuple[str, str], set[str]]:
        response = reader_client.get(reverse("pages:compare"), {"a": a.pk, "b": b.pk})
        found: dict[tuple[str, str], set[str]] = {}
        for row, change in response.context["signal_rows"]:
            if change is not None:
                found.setdefault((row.case_key, row.candidate_key), set()).add(change.verdict)
        return found

    runs = week.runs
    assert labels(runs[3], runs[6])[week.regression] == {"significant"}
    assert labels(runs[1], runs[2])[week.flaky] == {"noise"}
    assert labels(runs[2], runs[3])[week.flaky] == {"flaky"}
    assert labels(runs[5], runs[6])[week.bimodal] == {"flaky"}


def test_the_api_gives_the_same_data_in_a_fixed_number_of_queries(week: SignalNights, reader_client, django_assert_num_queries) -> None:
    body = reader_client.get("/api/signal/").json()
    assert body["runId"] == week.runs[-1].pk and body["windows"] == {"recentNights": 3, "baselineNights": 4, "alpha": 0.05}
    assert [night["runId"] for night in body["nights"]] == [run.pk for run in week.runs]
    rows = {(row["caseId"], row["candidateId"]): row for row in body["rows"]}
    regression = rows[week.regression]
    assert regression["cells"] == [{"passed": passes, "trials": 3} for passes in REGRESSION_PASSES]
    assert regression["signal"]["verdict"] == "regression" and regression["signal"]["pValue"] < 0.05
    assert regression["signal"]["recent"] == {
        "nights": 3,
        "passed": 2,
        "trials": 9,
        "rate": 2 / 9,
        "interval": list(wilson_interval(2, 9)),
    }
    assert rows[week.bimodal]["signal"]["verdict"] == "flaky" and rows[week.bimodal]["signal"]["dispersionP"] < 0.01
    assert body["counts"]["regression"] == 1 and body["counts"]["flaky"] == 2
    assert {(change["caseId"], change["candidateId"]): change["verdict"] for change in body["changes"]}[week.bimodal] == "flaky"
    assert reader_client.get("/api/signal/", {"run": week.runs[0].pk}).json()["nights"] == [
        {"runId": week.runs[0].pk, "reportId": week.runs[0].report.pk, "night": week.runs[0].schedule.night.isoformat()}
    ]
    for query, status, error in (
        ({"run": "abc"}, 400, {"run": ["Give a run id: 1, 2, ..."]}),
        ({"bundle": "x"}, 400, {"bundle": ["Unknown query parameter. Accepted: run."]}),
        ({"run": "999999"}, 404, {"detail": "There is no run 999999."}),
    ):
        response = reader_client.get("/api/signal/", query)
        assert (response.status_code, response.json()) == (status, error)

    # The query counts stay the same with few or many nights.
    first, last = week.runs[0], week.runs[-1]
    for run in (first, last):
        with django_assert_num_queries(4):  # session, user, the report with run and schedule, the history
            reader_client.get(reverse("pages:signal"), {"run": run.pk})
        with django_assert_num_queries(4):
            reader_client.get("/api/signal/", {"run": run.pk})
    with django_assert_num_queries(4):
        reader_client.get(reverse("pages:signal"))


def test_the_default_signal_is_the_newest_whole_night_not_a_newer_selection(week: SignalNights, reader_client) -> None:
    """A small manual selection run after the night (measured, but two executions of its own
    bundle) is not what the Signal page means by the newest night."""
    schedule = week.runs[-1].schedule
    # Two executions of the night's opencode candidate: the week leaves opencode unconfigured
    # (skipped). Which opencode candidate, and what the first two executions are, rotate with the week.
    opencode = next(entry.candidate_key for entry in schedule.entries.all() if entry.candidate["adapter"] == "opencode_server")
    manual, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal("5"), selection=Selection(candidate_ids=(opencode,), limit=2))
    execute_run(manual, environ=ENVIRON)
    assert Report.objects.filter(run=manual, is_scripted=False, is_refresh=False).exists()
    assert reader_client.get("/api/signal/").json()["runId"] == week.runs[-1].pk
    assert reader_client.get(reverse("pages:signal")).context["signal"].nights[-1].run_id == week.runs[-1].pk
    # Asked for by id, it still is its own bundle's history, whose first night has nothing before it
    # (and, its two executions skipped, nothing scored: the run page says so, as the Signal page does).
    html = reader_client.get(reverse("pages:run", args=[manual.pk])).content.decode()
    assert "The bundle has 1 night in its history so far, none of it scored." in html and "no change can be significant yet" in html
    assert set(manual.executions.values_list("classification", flat=True)) == {"skipped"}
    assert "Nothing of this bundle was scored yet: every execution was skipped or failed on the infrastructure." in html


def test_the_heat_map_says_plainly_how_many_nights_it_read_and_shows(week: SignalNights, reader_client, settings) -> None:
    html = reader_client.get(reverse("pages:signal")).content.decode()
    assert f"{len(week.runs)} nights of history, all shown below." in html
    assert " read)" not in html
    # Narrower windows: the heat map shows the newest three nights, the test reads back further.
    settings.EVALHUB = {**settings.EVALHUB, "SIGNAL_RECENT_NIGHTS": 1, "SIGNAL_BASELINE_NIGHTS": 2}
    html = reader_client.get(reverse("pages:signal")).content.decode()
    assert f"{len(week.runs)} nights of history read, the newest 3 shown below: each case × candidate is tested on its own" in html


def test_a_signal_page_with_nothing_scored_says_what_to_do_next(reference_catalog, reader_client) -> None:
    """Every execution skipped (no provider variables): one night, and the way to a measured one."""
    night = dt.datetime(2026, 11, 30, 4, 0, tzinfo=dt.UTC)
    run = start_nightly(seed="runner-live-seven-week-v1", cost_ceiling_usd=Decimal("12"), now=night, environ={}, execute=True).run
    assert set(run.executions.values_list("classification", flat=True)) == {"skipped"}
    html = reader_client.get(reverse("pages:signal")).content.decode()
    assert "1 night of history shown below." in html
    empty = html[html.index("Nothing of this bundle was scored yet") :]
    empty = empty[: empty.index("</p>")]
    assert "Set the candidates' required environment variables where the nightly runs" in empty
    assert f'<a href="{reverse("pages:candidates")}">Candidates</a>' in empty
    assert '<code class="command">manage.py nightly --execute</code>' in empty
    assert f'<code class="command">manage.py rerun {run.pk} --skipped</code>' in empty
    assert "never counts as history" in empty


def test_the_api_before_anything_was_measured_is_a_404(reader_client) -> None:
    response = reader_client.get("/api/signal/")
    assert response.status_code == 404
    assert response.json() == {"detail": "Nothing was measured yet: no live report to read a history from."}
    assert reader_client.get(reverse("pages:signal")).status_code == 200


def test_the_signal_settings_have_sensible_defaults() -> None:
    config = signal_config()
    assert (config.recent_nights, config.baseline_nights, config.alpha) == (3, 6, 0.05)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"SIGNAL_RECENT_NIGHTS": 0}, "recent_nights must be a whole number of nights of at least 1, not 0"),
        ({"SIGNAL_ALPHA": 1}, r"alpha must be a level in \(0, 0.5\], not 1"),
    ],
)
def test_unusable_signal_settings_are_a_system_check_error(settings, overrides: dict, message: str) -> None:
    from evalhub.checks import check_evalhub_settings

    settings.EVALHUB = {**settings.EVALHUB, **overrides}
    (error,) = check_evalhub_settings()
    assert error.id == "evalhub.E012"
    assert re.search(message, error.msg)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("abc", "EVALHUB_SIGNAL_ALPHA must be a decimal number such as 0.05, not 'abc'"),
        ("0", "EVALHUB_SIGNAL_ALPHA must be above 0 and at most 0.5, not '0'"),
        ("nan", "EVALHUB_SIGNAL_ALPHA must be above 0 and at most 0.5, not 'nan'"),
        ("0.9", "EVALHUB_SIGNAL_ALPHA must be above 0 and at most 0.5, not '0.9'"),
    ],
)
def test_a_bad_signal_level_in_the_environment_stops_start_up_clearly(monkeypatch, value: str, message: str) -> None:
    from django.core.exceptions import ImproperlyConfigured

    from evalhub.settings import env_level

    monkeypatch.setenv("EVALHUB_SIGNAL_ALPHA", value)
    with pytest.raises(ImproperlyConfigured, match=re.escape(message)):
        env_level("EVALHUB_SIGNAL_ALPHA", 0.05)
    monkeypatch.setenv("EVALHUB_SIGNAL_ALPHA", " 0.01 ")
    assert env_level("EVALHUB_SIGNAL_ALPHA", 0.05) == 0.01


def test_a_failing_signal_check_never_costs_the_run_its_report(replay_executors, settings, monkeypatch, caplog) -> None:
    from tests.browser_night import _nightly
    from tests.builders import load_reference_catalog

    settings.EVALHUB = {**settings.EVALHUB, "BASELINE_READY": True}

    def broken(report: Report) -> list[Alert]:
        raise RuntimeError("the statistics broke")

    monkeypatch.setattr("runs.reporting.significant_regression_alerts", broken)
    load_reference_catalog()
    run = _nightly(timezone.now(), 1)
    report = Report.objects.get(run=run)
    assert report.executions == run.executions.count() and not run.error
    assert "the significant_regression check failed: RuntimeError: the statistics broke" in caplog.text
