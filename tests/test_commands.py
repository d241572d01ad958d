"""The command line: ``schedule``, ``nightly`` and ``demo_admin``.

Most cases go through ``call_command`` and ``CommandError``; a few run the real
``manage.py`` in a child process (file SQLite with the reference catalog) to show that a bad flag
exits non-zero with a message and no traceback.
"""

from __future__ import annotations

import io
import json
import subprocess
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from candidates.models import Candidate
from runs.executors.replay import REPLAY_CALLS, REPLAY_STORE
from runs.models import Run
from schedules.building import build_schedule
from schedules.models import Schedule
from tests.builders import completed_observation
from tests.reference import golden_vectors, reference_cases, reference_manifest_slots
from tests.test_sqlite_concurrency import PYTHON, REPO, child_environment, migrated_sqlite_file

pytestmark = pytest.mark.django_db

SEED = "runner-live-seven-week-v1"
GENERATED_AT = "2026-08-24T00:00:00.000Z"  # rotation day 1
CREDENTIALS = ("OPENAI_API_KEY", "OPENROUTER_API_KEY", "ANTHROPIC_API_KEY")


def run(*args: str) -> str:
    """Call a management command; what it printed on stdout."""
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def schedule_json(*args: str) -> dict[str, Any]:
    return json.loads(run("schedule", "--json", *args))


@pytest.fixture
def no_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in CREDENTIALS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for number, name in enumerate(CREDENTIALS):
        monkeypatch.setenv(name, f"x-value-{number}-abcdef")


# --- schedule ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("vector", golden_vectors()["schedules"], ids=lambda v: f"{v['input']['seed']}-day{v['input']['rotationDay']}")
def test_schedule_json_with_day_and_timestamp_is_the_reference_schedule(reference_catalog: None, vector: dict) -> None:
    given = vector["input"]
    printed = run(
        "schedule", "--json", "--seed", given["seed"], "--rotation-day", str(given["rotationDay"]),
        "--generated-at", given["generatedAt"],
    )
    assert json.dumps(json.loads(printed)) == json.dumps(vector["output"])


def test_schedule_json_equals_build_schedule_with_both_given(reference_catalog: None) -> None:
    expected = build_schedule(
        seed=SEED, rotation_day=3, generated_at=GENERATED_AT, slots=reference_manifest_slots(), cases=reference_cases()
    )
    assert schedule_json("--rotation-day", "3", "--generated-at", GENERATED_AT) == json.loads(json.dumps(expected))


def test_schedule_json_derives_the_day_from_the_timestamp(reference_catalog: None) -> None:
    document = schedule_json("--generated-at", GENERATED_AT)
    assert (document["rotationDay"], document["generatedAt"]) == (1, GENERATED_AT)
    expected = build_schedule(
        seed=SEED, rotation_day=1, generated_at=GENERATED_AT, slots=reference_manifest_slots(), cases=reference_cases()
    )
    assert document == json.loads(json.dumps(expected))


def test_schedule_json_only_a_day_uses_now_as_the_timestamp(reference_catalog: None) -> None:
    document = schedule_json("--rotation-day", "5")
    assert document["rotationDay"] == 5
    assert document["generatedAt"].endswith("Z")


def test_schedule_without_flags_is_tonights(reference_catalog: None) -> None:
    from schedules.building import rotation_day

    document = schedule_json()
    assert document["rotationDay"] == rotation_day(document["generatedAt"])
    assert document["expectedExecutions"] == 40


def test_schedule_table_lists_every_entry_and_the_total(reference_catalog: None) -> None:
    table = run("schedule", "--generated-at", GENERATED_AT)
    lines = table.splitlines()
    assert lines[0] == f"seed {SEED} · rotation day 1 · generated {GENERATED_AT}"
    assert lines[1] == (
        "line-up: codex-strong=codex-luna, opencode-strong=opencode-glm, opencode-inexpensive=opencode-glm-flash, "
        "acpx-claude=acpx-claude-sonnet, acpx-codex=acpx-codex-sol"
    )
    assert lines[-1] == "40 executions"
    assert len([line for line in lines if " rwe-" in line]) == 40


def test_schedule_does_not_save_anything(reference_catalog: None) -> None:
    run("schedule", "--json")
    run("schedule")
    assert Schedule.objects.count() == 0


@pytest.mark.parametrize(
    ("flags", "candidates", "count"),
    [
        (["--candidate", "codex-luna", "--limit", "2"], {"codex-luna"}, 2),
        (["--candidate", "codex-luna,acpx-claude-sonnet"], {"codex-luna", "acpx-claude-sonnet"}, 18),
        (["--candidate", "codex-luna", "--candidate", " acpx-claude-sonnet , codex-luna"], {"codex-luna", "acpx-claude-sonnet"}, 18),
        (["--case", "final-response"], {"codex-luna", "acpx-claude-sonnet"}, 6),
        (["--case", "final-response,trace-lineage", "--candidate", "acpx-claude-sonnet"], {"acpx-claude-sonnet"}, 3),
        (["--limit", " 3 "], {"codex-luna"}, 3),
    ],
)
def test_schedule_selectors_narrow_the_entries(reference_catalog: None, flags: list[str], candidates: set, count: int) -> None:
    document = schedule_json("--rotation-day", "0", "--generated-at", GENERATED_AT, *flags)
    assert {entry["candidateId"] for entry in document["entries"]} == candidates
    assert {candidate["id"] for candidate in document["candidates"]} == candidates
    assert document["expectedExecutions"] == len(document["entries"]) == count


def test_the_golden_limit_selection_picks_the_reference_ids(reference_catalog: None) -> None:
    document = schedule_json("--rotation-day", "0", "--generated-at", GENERATED_AT, "--candidate", "codex-luna", "--limit", "2")
    assert [entry["executionId"] for entry in document["entries"]] == ["rwe-453d278ebeaabe66", "rwe-f90426516d8ad456"]


BAD_FLAGS = [
    (["--rotation-day", "7"], r"^rotation day must be a whole number from 0 to 6, not '7'$"),
    (["--rotation-day", "-1"], r"^rotation day must be a whole number from 0 to 6, not '-1'$"),
    (["--rotation-day", "abc"], r"^rotation day must be a whole number from 0 to 6, not 'abc'$"),
    (["--rotation-day", ""], r"^rotation day must be a whole number from 0 to 6, not ''$"),
    (["--generated-at", "yesterday"], r"^generated-at time 'yesterday' is not an ISO 8601 timestamp such as "),
    (["--generated-at", "2026-08-24T00:00:00"], r"^generated-at time '2026-08-24T00:00:00' needs a UTC offset such as Z or \+02:00$"),
    (["--limit", "0"], r"^--limit must be a positive whole number, not '0'$"),
    (["--limit", "abc"], r"^--limit must be a positive whole number, not 'abc'$"),
    (["--limit", "-2"], r"^--limit must be a positive whole number, not '-2'$"),
    (["--limit", "1.5"], r"^--limit must be a positive whole number, not '1.5'$"),
    (["--candidate", "unknown"], r"^unknown Runner live eval candidate: unknown \(not in rotation day 1's line-up: codex-luna, "),
    (["--candidate", "opencode-kimi"], r"^unknown Runner live eval candidate: opencode-kimi \(not in rotation day 1"),
    (["--candidate", ""], r"^--candidate needs an id, for example --candidate codex-luna$"),
    (["--candidate", " , "], r"^--candidate needs an id, for example --candidate codex-luna$"),
    (["--case", ""], r"^--case needs an id, for example --case codex-luna$"),
    (["--case", "nope"], r"^unknown Runner live eval case: nope$"),
    (["--seed", "  "], r"^--seed must not be blank$"),
]


@pytest.mark.parametrize(("flags", "message"), BAD_FLAGS, ids=[" ".join(flags) or "blank" for flags, _ in BAD_FLAGS])
def test_schedule_bad_flags_are_command_errors(reference_catalog: None, flags: list[str], message: str) -> None:
    timing = [] if "--generated-at" in flags else ["--generated-at", GENERATED_AT]
    with pytest.raises(CommandError, match=message):
        run("schedule", *timing, *flags)


@pytest.mark.parametrize(("flags", "message"), BAD_FLAGS[:4] + BAD_FLAGS[6:], ids=[" ".join(f) for f, _ in BAD_FLAGS[:4] + BAD_FLAGS[6:]])
def test_nightly_bad_flags_are_command_errors(reference_catalog: None, flags: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        run("nightly", "--generated-at", GENERATED_AT, "--no-progress", *flags)
    assert Run.objects.count() == 0


def test_an_empty_catalog_is_a_clear_error() -> None:
    with pytest.raises(CommandError, match=r"^a schedule needs at least one workflow case$"):
        run("schedule")
    with pytest.raises(CommandError, match=r"^a schedule needs at least one workflow case$"):
        run("nightly", "--execute")


# --- nightly -----------------------------------------------------------------------------------------------


def test_nightly_without_execute_saves_the_schedule_and_says_so(reference_catalog: None) -> None:
    output = run("nightly", "--generated-at", GENERATED_AT)
    schedule = Schedule.objects.get()
    assert output == (
        f"schedule {schedule.pk} saved: night 2026-08-24, rotation day 1, seed {SEED}, 40 executions\n"
        "not executed (add --execute to run it)\n"
    )
    assert Run.objects.count() == 0
    again = run("nightly", "--generated-at", GENERATED_AT)
    assert again.startswith(f"schedule {schedule.pk} already saved: night 2026-08-24,")
    assert Schedule.objects.count() == 1


def test_nightly_execute_prints_a_one_line_summary(reference_catalog: None, no_credentials: None) -> None:
    output = run("nightly", "--generated-at", GENERATED_AT, "--execute", "--no-progress")
    run_row = Run.objects.get()
    assert output.splitlines()[1:] == [
        "skipped executions need provider credentials: set ANTHROPIC_API_KEY, OPENAI_API_KEY, OPENROUTER_API_KEY "
        "in the environment (only names are configured; values are never stored)",
        f"run {run_row.pk}: 40 executions — 0 completed, 0 candidate failures, 0 infrastructure failures, "
        "40 skipped (40 qualification_environment_missing); spent $0.00 of $12.00 · "
        "0/0 scoreable passed; 0 infrastructure, 40 skipped, 0 alert(s)",
    ]


def test_nightly_execute_with_credentials_counts_each_outcome(
    reference_catalog: None, replay_executors: Any, credentials: None
) -> None:
    run("nightly", "--generated-at", GENERATED_AT)
    entries = list(Schedule.objects.get().entries.order_by("position"))
    for entry in entries[:30]:
        REPLAY_STORE[entry.execution_id] = completed_observation(entry.to_document(), cost_usd=0.05)
    output = run("nightly", "--generated-at", GENERATED_AT, "--execute", "--no-progress")
    run_row = Run.objects.get()
    assert output.splitlines()[-1] == (
        f"run {run_row.pk}: 40 executions — 30 completed, 0 candidate failures, 10 infrastructure failures, 0 skipped "
        "(10 replay_missing); spent $1.50 of $12.00 · 30/30 scoreable passed; 10 infrastructure, 0 skipped, 0 alert(s)"
    )
    assert len(REPLAY_CALLS) == 40


def test_nightly_execute_twice_reports_the_second_delivery(reference_catalog: None, no_credentials: None) -> None:
    run("nightly", "--generated-at", GENERATED_AT, "--execute", "--no-progress")
    output = run("nightly", "--generated-at", GENERATED_AT, "--execute", "--no-progress")
    run_row = Run.objects.get()
    lines = output.splitlines()
    assert lines[0].startswith("schedule ") and " already saved: " in lines[0]
    assert lines[1] == f"tonight's nightly was already delivered as run {run_row.pk}: nothing executed, nothing spent"
    assert lines[-1].startswith(f"run {run_row.pk}: 40 executions")


def test_nightly_selection_runs_only_the_selected_entries(reference_catalog: None, no_credentials: None) -> None:
    output = run(
        "nightly", "--generated-at", GENERATED_AT, "--execute", "--no-progress", "--candidate", "codex-luna", "--limit", "2"
    )
    run_row = Run.objects.get()
    assert run_row.trigger == "manual"
    assert run_row.selection == {"candidateIds": ["codex-luna"], "caseIds": [], "limit": 2}
    assert output.splitlines()[-1].startswith(f"run {run_row.pk}: 2 executions — ")
    assert Schedule.objects.get().expected_executions == 40  # the whole night is still saved


def test_nightly_shows_progress_on_stderr(reference_catalog: None, no_credentials: None, capsys: Any) -> None:
    out = io.StringIO()
    call_command("nightly", "--generated-at", GENERATED_AT, "--execute", "--limit", "3", stdout=out)
    captured = capsys.readouterr()
    assert "executions: 100%" in captured.err
    assert "3/3" in captured.err
    assert "executions:" not in out.getvalue()


def test_nightly_refuses_a_catalog_whose_coverage_fails(reference_catalog: None) -> None:
    Candidate.objects.update(tier="strong")
    with pytest.raises(
        CommandError,
        match=r"^live schedule coverage failed: strongAndInexpensiveNightly is false\. The catalog's seven rotation days "
        r"must meet all four invariants before a nightly may run",
    ):
        run("nightly", "--generated-at", GENERATED_AT, "--execute", "--no-progress")
    assert Schedule.objects.count() == 0 and Run.objects.count() == 0


def test_the_schedule_preview_still_works_when_coverage_fails(reference_catalog: None) -> None:
    Candidate.objects.update(tier="strong")
    assert schedule_json("--generated-at", GENERATED_AT)["expectedExecutions"] == 40


@pytest.mark.parametrize("value", ["0x10", "0", "-1", "NaN", "", "abc", "Infinity", "1e309", " "])
def test_nightly_refuses_a_bad_cost_ceiling_naming_the_variable(reference_catalog: None, settings: Any, value: str) -> None:
    settings.EVALHUB = {**settings.EVALHUB, "MAX_CAMPAIGN_COST_USD": value}
    message = (
        "EVALHUB_MAX_CAMPAIGN_COST_USD must be a positive decimal number of US dollars such as 12 or 0.25, "
        f"not {value!r}"
    )
    with pytest.raises(CommandError) as caught:
        run("nightly", "--generated-at", GENERATED_AT, "--execute", "--no-progress")
    assert str(caught.value) == message
    assert Schedule.objects.count() == 0


def test_nightly_uses_the_configured_cost_ceiling(reference_catalog: None, settings: Any, no_credentials: None) -> None:
    settings.EVALHUB = {**settings.EVALHUB, "MAX_CAMPAIGN_COST_USD": " 2.5 "}
    output = run("nightly", "--generated-at", GENERATED_AT, "--execute", "--no-progress", "--limit", "1")
    assert output.rstrip().endswith("spent $0.00 of $2.50 · 0/0 scoreable passed; 0 infrastructure, 1 skipped, 0 alert(s)")
    assert Run.objects.get().cost_ceiling_usd == Decimal("2.5")


# --- the real manage.py: exit codes and no traceback ------------------------------------------------------


@pytest.fixture(scope="module")
def catalog_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file SQLite database with the reference catalog, for child ``manage.py`` processes."""
    database = migrated_sqlite_file(tmp_path_factory.mktemp("cli"))
    manage(database, "load_reference", check=True)
    return database


def manage(database: Path, *args: str, check: bool = False, **variables: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(PYTHON), "manage.py", *args],
        cwd=REPO,
        env=child_environment(database, **variables),
        capture_output=True,
        text=True,
        timeout=120,
        check=check,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["schedule", "--rotation-day", "7"], "CommandError: rotation day must be a whole number from 0 to 6, not '7'"),
        (["schedule", "--rotation-day", "-1"], "CommandError: rotation day must be a whole number from 0 to 6, not '-1'"),
        (["schedule", "--generated-at", "yesterday"], "CommandError: generated-at time 'yesterday' is not an ISO 8601"),
        (["nightly", "--limit", "abc"], "CommandError: --limit must be a positive whole number, not 'abc'"),
        (["schedule", "--candidate", "unknown"], "CommandError: unknown Runner live eval candidate: unknown"),
        (["schedule", "--candidate"], "error: argument --candidate: expected one argument"),
    ],
)
def test_a_bad_flag_exits_non_zero_with_a_message_and_no_traceback(catalog_file: Path, args: list[str], message: str) -> None:
    done = manage(catalog_file, *args)
    assert done.returncode != 0
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_a_bad_cost_ceiling_variable_exits_non_zero(catalog_file: Path) -> None:
    done = manage(catalog_file, "nightly", "--execute", EVALHUB_MAX_CAMPAIGN_COST_USD="0x10")
    assert done.returncode != 0
    assert "EVALHUB_MAX_CAMPAIGN_COST_USD must be a positive decimal number of US dollars" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_real_schedule_command_prints_the_reference_json(catalog_file: Path) -> None:
    done = manage(catalog_file, "schedule", "--json", "--rotation-day", "0", "--generated-at", GENERATED_AT, check=True)
    assert json.dumps(json.loads(done.stdout)) == json.dumps(golden_vectors()["schedules"][0]["output"])


# --- demo_admin ----------------------------------------------------------------------------------------------


def test_demo_admin_creates_a_staff_superuser_and_prints_how_to_sign_in() -> None:
    output = run("demo_admin")
    prefix = "demo admin created: sign in as admin with password "
    assert output.startswith(prefix)
    password = output.strip()[len(prefix):]
    assert len(password) >= 12
    user = get_user_model().objects.get(username="admin")
    assert (user.is_staff, user.is_superuser, user.is_active) == (True, True, True)
    assert user.check_password(password)


def test_demo_admin_again_keeps_the_password_so_the_browser_stays_signed_in() -> None:
    first = run("demo_admin").strip().rsplit(" ", 1)[-1]
    output = run("demo_admin")
    assert output.startswith("demo admin exists: sign in as admin with the password printed when it was created")
    assert first not in output
    user = get_user_model().objects.get(username="admin")
    assert user.check_password(first)
    assert get_user_model().objects.count() == 1


def test_demo_admin_reset_gives_a_new_password() -> None:
    first = run("demo_admin").strip().rsplit(" ", 1)[-1]
    output = run("demo_admin", "--reset")
    assert output.startswith("demo admin reset: sign in as admin with password ")
    second = output.strip().rsplit(" ", 1)[-1]
    assert second != first and second.isalnum()
    user = get_user_model().objects.get(username="admin")
    assert user.check_password(second) and not user.check_password(first)


def test_demo_admin_promotes_an_existing_plain_user_and_keeps_their_password() -> None:
    get_user_model().objects.create_user("demo", password="pw-demo-123")
    output = run("demo_admin", "--username", "demo")
    assert output.startswith("demo admin exists: sign in as demo")
    user = get_user_model().objects.get(username="demo")
    assert (user.is_staff, user.is_superuser) == (True, True)
    assert user.check_password("pw-demo-123")


def test_nightly_hint_names_only_the_variables_of_the_candidates_it_ran(
    reference_catalog: None, no_credentials: None
) -> None:
    output = run(
        "nightly", "--generated-at", GENERATED_AT, "--execute", "--no-progress", "--candidate", "codex-luna", "--limit", "2"
    )
    hint = [line for line in output.splitlines() if line.startswith("skipped executions need")]
    assert hint == [
        "skipped executions need provider credentials: set OPENAI_API_KEY in the environment "
        "(only names are configured; values are never stored)"
    ]


def test_nightly_without_execute_reports_the_size_of_a_selection(reference_catalog: None) -> None:
    output = run("nightly", "--generated-at", GENERATED_AT, "--candidate", "codex-luna", "--limit", "2")
    assert "selection: 2 of 40 executions" in output
    assert output.rstrip().endswith("not executed (add --execute to run it)")
