"""The chaos lane: all eight scenarios inject their faults into the real pipeline and every
invariant holds; the results are a chaos-lane run, never history."""

from __future__ import annotations

import datetime as dt
import json
import re
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from runs.chaos import SCENARIOS, ChaosError, run_chaos_lane
from runs.models import Execution, Report, Run, RunLane
from schedules.models import ChaosScenario

NOW = dt.datetime(2026, 8, 19, 4, 0, tzinfo=dt.UTC)
FAULTS = [
    "restart",
    "duplicate_delivery",
    "trace_interruption",
    "trace_truncation",
    "stale_checkpoint",
    "retry_exhaustion",
    "interaction_timeout",
    "wake_race",
]


@pytest.mark.django_db
def test_all_eight_scenarios_hold_their_invariants(reference_catalog) -> None:
    run = run_chaos_lane(now=NOW)
    rows = list(run.executions.order_by("position"))
    assert sorted(SCENARIOS) == sorted(FAULTS)
    assert [row.chaos["fault"] for row in rows] == FAULTS
    failures = {row.chaos["fault"]: [check for check in row.chaos["checks"] if not check["held"]] for row in rows}
    assert failures == dict.fromkeys(FAULTS, [])
    assert all(row.classification == "completed" and len(row.chaos["checks"]) >= 5 for row in rows)
    assert run.lane == RunLane.CHAOS and run.status == "finished"
    # Only the results remain: the scratch runs are gone, and nothing is reported (never history).
    assert list(Run.objects.values_list("lane", flat=True)) == ["chaos"]
    assert Report.objects.count() == 0


@pytest.mark.django_db
def test_money_checks_show_dollars_and_the_attempt_bound_shows_its_limit(reference_catalog) -> None:
    # The page printed a held check as expected 0.210000000000000, actual 0.210000 (the same
    # amount), the ceiling as "0.210000 of 2.000000", and the attempt bound as expected True, actual 2.
    (row,) = run_chaos_lane(keys=["restart"], now=NOW).executions.all()
    checks = {check["check"]: check for check in row.chaos["checks"]}
    counted = checks["the run's spend is what its attempts counted"]
    assert counted["expected"] == counted["actual"] and re.fullmatch(r"\$\d+\.\d\d", counted["actual"])
    assert checks["nothing is left reserved"]["actual"] == "$0.00"
    assert re.fullmatch(re.escape(counted["actual"]) + r" of \$\d+\.\d\d", checks["spend is within the ceiling"]["actual"])
    assert checks["attempts stay within maxAttempts"]["actual"] == "2 of 3"


@pytest.mark.django_db
def test_a_violated_invariant_is_a_failed_execution(reference_catalog, monkeypatch) -> None:
    # Break the reaper: the restart scenario must notice the dead worker's execution is never taken back.
    monkeypatch.setattr("runs.recovery.take_back", lambda *args, **kwargs: False)
    run = run_chaos_lane(keys=["restart"], now=NOW)
    (row,) = run.executions.all()
    assert (row.classification, row.failure_code) == ("infrastructure_failure", "chaos_invariant_violated")
    assert "the reaper takes the dead worker's execution back" in row.failure_message
    assert row.chaos["held"] is False


@pytest.mark.django_db
def test_the_command_names_scenarios_and_fails_on_unknown_ones(reference_catalog) -> None:
    out, err = StringIO(), StringIO()
    call_command("chaos", "chaos-wake-race", "restart", stdout=out, stderr=err)
    assert err.getvalue().startswith("each scenario runs in a scratch chaos-lane run of its own, deleted afterwards")
    assert "held   chaos-restart: one resumable execution owns finalization" in out.getvalue()
    assert out.getvalue().strip().endswith("2 of 2 invariants held")
    with pytest.raises(CommandError, match="unknown chaos scenario meteor: use one of chaos-restart"):
        call_command("chaos", "meteor")
    with pytest.raises(CommandError, match="^a chaos scenario name is empty: use one of chaos-restart"):
        call_command("chaos", "")
    assert Execution.objects.filter(run__lane="chaos").count() == 2


@pytest.mark.django_db
def test_the_lane_needs_the_catalog() -> None:
    with pytest.raises(ChaosError, match="load_reference"):
        run_chaos_lane(now=NOW)


# --- a chaos run is never a measurement: refused where a measurement is expected ---------------


@pytest.fixture
def chaos_run(reference_catalog) -> Run:
    return run_chaos_lane(keys=["restart"], now=NOW)


@pytest.mark.django_db
def test_a_chaos_run_cannot_be_refreshed_by_the_service_the_command_or_the_api(chaos_run: Run, staff_client) -> None:
    from runs.reporting import refresh_run

    said = rf"run {chaos_run.pk} is a chaos run \(faults injected into evalhub's own pipeline.*\); there is nothing to re-score"
    with pytest.raises(ValueError, match=said):
        refresh_run(chaos_run, generated_at="2026-08-19T05:00:00.000Z")
    with pytest.raises(CommandError, match=said):
        call_command("refresh_run", str(chaos_run.pk))
    response = staff_client.post(f"/api/runs/{chaos_run.pk}/refresh/")
    assert response.status_code == 409 and "is a chaos run" in response.json()["detail"]
    assert list(Run.objects.values_list("lane", flat=True)) == ["chaos"]  # no refresh made


@pytest.mark.django_db
def test_a_chaos_execution_s_page_shows_its_scenario_s_checks_not_an_empty_measurement(chaos_run: Run, reader_client) -> None:
    # It said "no observation yet", "no scorecard yet" and "No attempts recorded" of a finished scenario.
    from django.utils.html import escape

    execution = chaos_run.executions.get()
    html = reader_client.get(f"/executions/{execution.pk}/").content.decode()
    assert execution.chaos["checks"]
    assert escape(execution.chaos["expectedInvariant"]) in html
    for check in execution.chaos["checks"]:
        assert f"<tr><td>{escape(check['check'])}</td>" in html
    assert "this execution is the scenario <code>chaos-restart</code>" in html
    # Its candidate is only the entry its scratch run stood on: the page must not read as a test of that model.
    assert "the entry the scratch run stood on: the scenario tests evalhub's pipeline, not this model" in html
    for empty in ("no observation yet", "no scorecard yet", "No attempts recorded"):
        assert empty not in html
    run_page = reader_client.get(f"/runs/{chaos_run.pk}/").content.decode()
    row = run_page.split(f'id="execution-{execution.pk}"', 1)[1].split("</tr>", 1)[0]
    # Its own attempts and cost are none: the scenario's are among its checks.
    assert '<td class="num attempts">—</td>' in row and '<td class="num cost">—</td>' in row


def test_a_chaos_check_shows_its_values_as_json_and_its_table_says_it_scrolls(chaos_run: Run, reader_client) -> None:
    # The page printed Python: ['finished', 'completed'], True, None.
    from django.utils.html import escape

    execution = chaos_run.executions.get()
    html = reader_client.get(f"/executions/{execution.pk}/").content.decode()
    listed = [check for check in execution.chaos["checks"] if isinstance(check["actual"], list)]
    assert listed and any(check["expected"] is True for check in execution.chaos["checks"])
    for check in listed:
        assert f"<code>{escape(json.dumps(check['actual'], ensure_ascii=False))}</code>" in html
    assert "<code>true</code>" in html
    for python in ("<code>True</code>", "<code>False</code>", "<code>None</code>", "[&#x27;"):
        assert python not in html
    table = html.split('<table class="data chaos-checks">', 1)[0]
    assert table.endswith('<div class="scroll scroll-cue">') and "Scroll sideways for more columns" in table[-200:]


@pytest.mark.django_db
def test_the_compare_page_says_a_chaos_run_is_not_a_measurement(chaos_run: Run, reader_client) -> None:
    html = reader_client.get("/compare/", {"a": chaos_run.pk, "b": chaos_run.pk}).content.decode()
    assert f"Not comparable: run {chaos_run.pk} is a chaos run (faults injected" in html
    assert "has no report yet" not in html
    assert f'<option value="{chaos_run.pk}">run {chaos_run.pk} · 2026-08-19 · manual · chaos (not measured)</option>' in html


@pytest.mark.django_db
def test_the_signal_page_and_api_say_a_chaos_run_has_no_history(chaos_run: Run, reader_client) -> None:
    html = reader_client.get("/signal/", {"run": chaos_run.pk}).content.decode()
    assert f"Run {chaos_run.pk} is a chaos run (faults injected" in html and "has no report yet" not in html
    response = reader_client.get("/api/signal/", {"run": chaos_run.pk})
    assert response.status_code == 400
    assert response.json()["detail"].startswith(f"Run {chaos_run.pk} is a chaos run (faults injected")


@pytest.mark.django_db
def test_two_scenarios_of_one_fault_each_get_their_execution(reference_catalog) -> None:
    # The catalog allows a second scenario of a fault (admin, API); the lane ran both under one
    # execution id and stopped on the unique key, leaving its run pending.
    ChaosScenario.objects.create(key="chaos-restart-again", fault="restart", expected_invariant="x", position=100)
    out = StringIO()
    call_command("chaos", "restart", stdout=out)
    run = Run.objects.get(lane="chaos")
    assert run.status == "finished"
    assert sorted(run.executions.values_list("execution_id", "case_key")) == [
        ("chaos-restart", "chaos-restart"),
        ("chaos-restart-again", "chaos-restart-again"),
    ]
    assert out.getvalue().strip().endswith("2 of 2 invariants held")


@pytest.mark.django_db
def test_each_chaos_execution_is_named_as_its_scenario_and_ids_cut_alike_stay_apart(reference_catalog) -> None:
    # Named by the fault before (chaos-duplicate_delivery beside the case chaos-duplicate-delivery).
    long_key = "chaos-restart-" + "x" * 40
    ChaosScenario.objects.create(key=long_key, fault="restart", expected_invariant="x", position=100)
    ChaosScenario.objects.create(key=long_key + "y", fault="restart", expected_invariant="x", position=101)
    run = run_chaos_lane(keys=["duplicate_delivery", long_key, long_key + "y"], now=NOW)
    assert list(run.executions.order_by("position").values_list("execution_id", "case_key")) == [
        ("chaos-duplicate-delivery", "chaos-duplicate-delivery"),
        (long_key[:32], long_key),
        (long_key[:30] + "-2", long_key + "y"),
    ]


@pytest.mark.django_db
def test_a_scenario_id_spelt_like_a_fault_selects_that_scenario_alone(reference_catalog) -> None:
    # The admin action passes the selected scenarios' ids: one with the id "restart" also ran
    # every scenario of the fault restart.
    ChaosScenario.objects.create(key="restart", fault="wake_race", expected_invariant="x", position=100)
    run = run_chaos_lane(keys=["restart"], now=NOW)
    assert list(run.executions.values_list("case_key", flat=True)) == ["restart"]
    run = run_chaos_lane(keys=["wake_race"], now=NOW)
    assert sorted(run.executions.values_list("case_key", flat=True)) == ["chaos-wake-race", "restart"]
