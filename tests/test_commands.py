"""The command line: ``schedule``, ``nightly`` and ``demo_admin``.

Most cases go through ``call_command`` and ``CommandError``; a few run the real
``manage.py`` in a child process (file SQLite with the reference catalog) to show that a bad flag
exits non-zero with a message and no traceback.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import os
import re
import signal
import subprocess
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from candidates.models import Candidate
from runs.creation import RunSummary
from runs.executors.replay import REPLAY_CALLS, REPLAY_STORE
from runs.models import Run
from runs.nightly import EXIT_ALERTS, EXIT_UNFINISHED, EXIT_UNMEASURED, exit_status
from schedules.building import build_schedule
from schedules.models import Schedule
from schedules.services import iso_timestamp
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
        "schedule",
        "--json",
        "--seed",
        given["seed"],
        "--rotation-day",
        str(given["rotationDay"]),
        "--generated-at",
        given["generatedAt"],
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


def test_schedule_table_shows_budgets_with_their_units_as_tonights_page_does(reference_catalog: None) -> None:
    # The JSON's 0.2 printed as "$0.2" and 150000 as "150000 ms", where Tonight shows $0.20 and 2 min 30 s.
    rows = [line for line in run("schedule", "--generated-at", GENERATED_AT).splitlines() if " rwe-" in line]
    budgets = {line.split("  ")[-1] for line in rows}
    assert budgets == {
        "3 min 00 s a turn, $1.50, 100,000 tokens",
        "3 min 00 s a turn, $0.80, 100,000 tokens",
        "2 min 30 s a turn, $0.20, 64,000 tokens",
    }


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
    (
        ["--candidate", "opencode-kimi"],
        r"^candidate opencode-kimi does not play on rotation day 1: its slot plays another .* it plays on rotation days 0, 2, 4, 6: "
        r"select one of this week's, or preview or run one of those days \(add --rotation-day 0\)$",
    ),
    (["--candidate", ""], r"^--candidate needs an id, for example --candidate codex-luna$"),
    (["--candidate", " , "], r"^--candidate needs an id, for example --candidate codex-luna$"),
    (["--case", ""], r"^--case needs an id, for example --case codex-luna$"),
    (["--case", "nope"], r"^unknown Runner live eval case: nope$"),
    (["--seed", "  "], r"^--seed must not be blank$"),
    (["--seed", "a\udcffb"], r"^--seed must be UTF-8 text \(it holds bytes that are not\)"),
    (["--seed", "s" * 300], r"^--seed must be at most 200 characters, not 300$"),
]


@pytest.mark.parametrize(("flags", "message"), BAD_FLAGS, ids=[" ".join(flags) or "blank" for flags, _ in BAD_FLAGS])
def test_schedule_bad_flags_are_command_errors(reference_catalog: None, flags: list[str], message: str) -> None:
    timing = [] if "--generated-at" in flags else ["--generated-at", GENERATED_AT]
    with pytest.raises(CommandError, match=message):
        run("schedule", *timing, *flags)


@pytest.mark.parametrize(("flags", "message"), BAD_FLAGS, ids=[" ".join(f) or "blank" for f, _ in BAD_FLAGS])
def test_nightly_bad_flags_are_command_errors_with_exit_status_1(reference_catalog: None, flags: list[str], message: str) -> None:
    """README "Exit statuses": 1 for bad flags; 3 (refused) is the catalog's, never a flag's."""
    timing = [] if "--generated-at" in flags else ["--generated-at", GENERATED_AT]
    with pytest.raises(CommandError, match=message) as raised:
        run("nightly", *timing, "--no-progress", "--execute", *flags)
    assert raised.value.returncode == 1


DEMO_LIVE_BAD_CANDIDATES = [case for case in BAD_FLAGS if case[0][0] == "--candidate" and case[0][1].strip(" ,")]


@pytest.mark.parametrize(("flags", "message"), DEMO_LIVE_BAD_CANDIDATES, ids=[" ".join(f) for f, _ in DEMO_LIVE_BAD_CANDIDATES])
def test_demo_live_names_an_unknown_or_resting_candidate_as_nightly_does(reference_catalog: None, flags: list[str], message: str) -> None:
    """Not "no live runtime drives X": opencode-kimi's runtime is driven, it just rests this week."""
    with pytest.raises(CommandError, match=message):
        run("demo_live", "--generated-at", GENERATED_AT, "--no-progress", *flags)
    assert Run.objects.count() == 0


@pytest.mark.parametrize("mode", ["--execute", "--queue"])
def test_a_night_that_has_not_begun_is_not_executed(reference_catalog: None, mode: str) -> None:
    """Executed, a future night would enter the history and the leaderboard before tonight's."""
    later = iso_timestamp(timezone.now() + dt.timedelta(days=3))
    with pytest.raises(CommandError, match=rf"^--generated-at {re.escape(later)} is in the future: only a night that has begun") as raised:
        run("nightly", "--generated-at", later, "--no-progress", mode)
    assert raised.value.returncode == 1
    assert (Run.objects.count(), Schedule.objects.count()) == (0, 0)
    run("nightly", "--generated-at", later, "--no-progress")  # building and saving it ahead is fine
    assert (Run.objects.count(), Schedule.objects.count()) == (0, 1)


@pytest.mark.parametrize("mode", ["--execute", "--queue"])
def test_a_night_more_than_a_year_old_is_not_executed(reference_catalog: None, mode: str) -> None:
    with pytest.raises(
        CommandError, match=r"^--generated-at 1900-01-01 is more than 366 days ago: a night that old is not executed"
    ) as raised:
        run("nightly", "--generated-at", "1900-01-01", "--no-progress", mode)
    assert raised.value.returncode == 1
    assert (Run.objects.count(), Schedule.objects.count()) == (0, 0)
    run("nightly", "--generated-at", "1900-01-01", "--no-progress")  # previewing it is fine
    assert (Run.objects.count(), Schedule.objects.count()) == (0, 1)


def test_a_blank_fail_on_is_a_bad_flag(reference_catalog: None) -> None:
    with pytest.raises(
        CommandError, match=r"^--fail-on takes infrastructure, candidate, alerts, unmeasured or any \(a comma list\), not ''$"
    ) as raised:
        run("nightly", "--generated-at", GENERATED_AT, "--no-progress", "--execute", "--fail-on", "")
    assert raised.value.returncode == 1
    assert Run.objects.count() == 0


def test_an_empty_catalog_is_a_clear_error() -> None:
    with pytest.raises(CommandError, match=r"^a schedule needs at least one workflow case$"):
        run("schedule")
    with pytest.raises(CommandError, match=r"^a schedule needs at least one workflow case$") as raised:
        run("nightly", "--execute")
    assert raised.value.returncode == 3  # the night is refused


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


def test_nightly_execute_with_credentials_counts_each_outcome(reference_catalog: None, replay_executors: Any, credentials: None) -> None:
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
    output = run("nightly", "--generated-at", GENERATED_AT, "--execute", "--no-progress", "--candidate", "codex-luna", "--limit", "2")
    run_row = Run.objects.get()
    assert run_row.trigger == "manual"
    assert run_row.selection == {"candidateIds": ["codex-luna"], "caseIds": [], "limit": 2}
    assert output.splitlines()[-1].startswith(f"run {run_row.pk}: 2 executions — ")
    assert Schedule.objects.get().expected_executions == 40  # the whole night is still saved


class Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_nightly_shows_progress_on_a_terminals_stderr(reference_catalog: None, no_credentials: None, monkeypatch: Any) -> None:
    out, terminal = io.StringIO(), Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    call_command("nightly", "--generated-at", GENERATED_AT, "--execute", "--limit", "3", stdout=out)
    assert "executions: 100%" in terminal.getvalue()
    assert "3/3" in terminal.getvalue()
    assert "executions:" not in out.getvalue()


def test_nightly_draws_no_progress_bar_when_stderr_is_not_a_terminal(reference_catalog: None, no_credentials: None, capsys: Any) -> None:
    run("nightly", "--generated-at", GENERATED_AT, "--execute", "--limit", "3")
    assert capsys.readouterr().err == ""


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
    message = f"EVALHUB_MAX_CAMPAIGN_COST_USD must be a positive decimal number of US dollars such as 12 or 0.25, not {value!r}"
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


PASTED_KEY = "sk-" + "proj-" + "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcd"


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"EVALHUB_Q_TIMEOUT": "abc"}, "EVALHUB_Q_TIMEOUT must be a whole number, not 'abc'"),
        ({"EVALHUB_Q_TIMEOUT": PASTED_KEY}, "EVALHUB_Q_TIMEOUT must be a whole number, not a value that looks like a secret (not shown)"),
        ({"EVALHUB_BASELINE_READY": PASTED_KEY}, "EVALHUB_BASELINE_READY must be true or false, not a value that looks like a secret"),
        (
            {"EVALHUB_LEASE_SECONDS": "5", "EVALHUB_HEARTBEAT_SECONDS": "30"},
            "EVALHUB_HEARTBEAT_SECONDS (30) must be at most half of EVALHUB_LEASE_SECONDS (5): a lease would expire between two heartbeats",
        ),
        ({"REDIS_URL": "garbage"}, "REDIS_URL must be a Redis URL such as redis://127.0.0.1:6379/0"),
        ({"EVALHUB_RUNNER_BUILD": PASTED_KEY}, "EVALHUB_RUNNER_BUILD looks like a secret; it is stored in every report"),
        ({"EVALHUB_SCHEDULE_SEED": "a\udcffb"}, "EVALHUB_SCHEDULE_SEED must be UTF-8 text; it holds bytes that are not"),
        # Numbers past what a duration can hold stopped the first command with an OverflowError.
        ({"EVALHUB_TOKEN_TTL_DAYS": "99999999999"}, "EVALHUB_TOKEN_TTL_DAYS must be at most 36500, not 99999999999"),
        ({"EVALHUB_SIGNIN_COOLOFF_MINUTES": "10" * 10}, "EVALHUB_SIGNIN_COOLOFF_MINUTES must be at most 527040, not 1010101010"),
        ({"EVALHUB_LEASE_SECONDS": "9" * 26}, f"EVALHUB_LEASE_SECONDS must be at most 31622400, not {'9' * 26}"),
        ({"EVALHUB_RETENTION_DAYS": "9999999999999"}, "EVALHUB_RETENTION_DAYS must be at most 36500, not 9999999999999"),
        ({"EVALHUB_EMAIL_PORT": "999999"}, "EVALHUB_EMAIL_PORT must be at most 65535, not 999999"),
        ({"EVALHUB_LOG_LEVEL": "LOUD"}, "EVALHUB_LOG_LEVEL must be one of debug, info, warning, error, critical, not 'loud'"),
        (
            {"EVALHUB_SQLITE_PATH": "/proc/none/evalhub.sqlite3"},
            "EVALHUB_SQLITE_PATH '/proc/none/evalhub.sqlite3': its folder cannot be created",
        ),
        # The driver's traceback before, from the first command a new user runs (migrate).
        ({"EVALHUB_SQLITE_PATH": "/tmp"}, "EVALHUB_SQLITE_PATH '/tmp' is a folder: name a database file, such as '/tmp/evalhub.sqlite3'"),
        (
            {"EVALHUB_SQLITE_PATH": "/etc/passwd"},
            "EVALHUB_SQLITE_PATH '/etc/passwd' is not a SQLite database: name a new file, or the evalhub database file",
        ),
        ({"EVALHUB_Q_WORKERS": "100000"}, "EVALHUB_Q_WORKERS must be at most 256, not 100000"),
        # A LIMIT beyond 64 bits failed every signal page with a 500.
        (
            {"EVALHUB_SIGNAL_RECENT_NIGHTS": "9223372036854775808"},
            "EVALHUB_SIGNAL_RECENT_NIGHTS must be at most 36500, not 9223372036854775808",
        ),
        ({"EVALHUB_SIGNAL_BASELINE_NIGHTS": "40000"}, "EVALHUB_SIGNAL_BASELINE_NIGHTS must be at most 36500, not 40000"),
    ],
    ids=[
        "not-a-number",
        "a-pasted-key",
        "a-pasted-key-bool",
        "heartbeat-over-half-the-lease",
        "redis-url",
        "runner-build-secret",
        "seed-bytes",
        "token-ttl-overflow",
        "cooloff-overflow",
        "lease-overflow",
        "retention-overflow",
        "email-port",
        "log-level",
        "sqlite-folder",
        "sqlite-path-a-folder",
        "sqlite-path-not-a-database",
        "too-many-workers",
        "signal-recent-overflow",
        "signal-baseline-overflow",
    ],
)
def test_a_bad_environment_variable_is_one_line_naming_it_never_its_secret(
    catalog_file: Path, variables: dict[str, str], message: str
) -> None:
    done = manage(catalog_file, "nightly", **variables)
    assert done.returncode == 1
    assert done.stderr == f"evalhub is not configured correctly: {message}" + done.stderr.split(message, 1)[1]


@pytest.mark.parametrize("path", ["/tmp", "/etc/passwd"])
def test_migrate_on_a_path_that_cannot_hold_the_database_is_one_line(catalog_file: Path, path: str) -> None:
    done = manage(catalog_file, "migrate", EVALHUB_SQLITE_PATH=path)
    assert done.returncode == 1
    assert done.stderr.startswith(f"evalhub is not configured correctly: EVALHUB_SQLITE_PATH {path!r} ")
    assert "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "ABCDEFGHIJKLMNOP" not in done.stderr


def test_a_malformed_provider_url_stops_the_nightly_with_its_check_not_a_traceback(catalog_file: Path) -> None:
    providers = '{"openai": {"base_url": "http://[::1", "wire_api": "responses", "env_key": "OPENAI_API_KEY"}}'
    done = manage(
        catalog_file,
        "nightly",
        "--execute",
        "--candidate",
        "codex-luna",
        "--limit",
        "1",
        EVALHUB_MODEL_PROVIDERS=providers,
        OPENAI_API_KEY="x-key-1",
    )
    # The system checks refuse the command before anything runs (evalhub.E006), naming what to fix.
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert "evalhub.E006" in done.stderr and "base_url must be an http(s) URL" in done.stderr
    assert done.stdout == ""


def test_queueing_with_redis_down_is_one_clear_error(catalog_file: Path) -> None:
    done = manage(
        catalog_file, "nightly", "--execute", "--queue", "--candidate", "codex-luna", "--limit", "1", REDIS_URL="redis://127.0.0.1:1/9"
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "the task broker (REDIS_URL) cannot be reached (ConnectionError" in done.stderr
    assert "a worker's reaper queues them again" in done.stderr


def test_a_locked_database_is_one_line_not_a_traceback(reference_catalog: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from django.db import OperationalError

    def locked(*args: Any, **kwargs: Any) -> Any:
        raise OperationalError("database is locked")

    monkeypatch.setattr("schedules.services.save_schedule", locked)
    with pytest.raises(
        CommandError, match=r"^the database \((sqlite|postgresql) .*\) did not answer: database is locked\. If another process holds it"
    ):
        run("nightly", "--generated-at", GENERATED_AT)


def test_the_real_schedule_command_prints_the_reference_json(catalog_file: Path) -> None:
    done = manage(catalog_file, "schedule", "--json", "--rotation-day", "0", "--generated-at", GENERATED_AT, check=True)
    assert json.dumps(json.loads(done.stdout)) == json.dumps(golden_vectors()["schedules"][0]["output"])


# --- demo_admin ----------------------------------------------------------------------------------------------


def test_demo_admin_creates_a_staff_superuser_and_prints_how_to_sign_in() -> None:
    output = run("demo_admin")
    prefix = "demo admin created: sign in as admin with password "
    assert output.startswith(prefix)
    password = output.strip()[len(prefix) :]
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


def test_nightly_hint_names_only_the_variables_of_the_candidates_it_ran(reference_catalog: None, no_credentials: None) -> None:
    output = run("nightly", "--generated-at", GENERATED_AT, "--execute", "--no-progress", "--candidate", "codex-luna", "--limit", "2")
    hint = [line for line in output.splitlines() if line.startswith("skipped executions need")]
    assert hint == [
        "skipped executions need provider credentials: set OPENAI_API_KEY in the environment "
        "(only names are configured; values are never stored)"
    ]


def test_nightly_without_execute_reports_the_size_of_a_selection(reference_catalog: None) -> None:
    output = run("nightly", "--generated-at", GENERATED_AT, "--candidate", "codex-luna", "--limit", "2")
    assert "selection: 2 of 40 executions" in output
    assert output.rstrip().endswith("not executed (add --execute to run it)")


@pytest.mark.parametrize("command", [["schedule"], ["nightly", "--execute"], ["load_reference"], ["export_manifest"], ["worker"]])
def test_a_command_on_a_database_that_was_never_migrated_says_to_migrate(command: list[str], tmp_path: Path) -> None:
    """A new user who skips ``migrate`` gets one line saying what to run, not a traceback."""
    done = subprocess.run(
        [str(PYTHON), "manage.py", *command],
        cwd=REPO,
        env=child_environment(tmp_path / "empty.sqlite3"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "the database is not migrated" in done.stderr
    assert "run `python manage.py migrate` first" in done.stderr


def test_sigterm_to_a_running_nightly_stops_its_runtimes_and_records_the_run(catalog_file: Path, tmp_path: Path) -> None:
    """``kill <pid>`` of ``nightly --execute`` mid-execution: the runtime the executor started
    (a child in its own session, as live runtimes are) is stopped, the run says why it ended,
    and the command exits 130 with one line, no traceback."""
    calls, pids = tmp_path / "calls.log", tmp_path / "children.txt"
    calls.touch()
    process = subprocess.Popen(
        [str(PYTHON), "manage.py", "nightly", "--execute", "--no-progress", "--limit", "2"],
        cwd=REPO,
        env=child_environment(
            catalog_file,
            DJANGO_SETTINGS_MODULE="tests.cluster_settings",
            EVALHUB_SQLITE_PATH=str(catalog_file),
            EVALHUB_TEST_CALLS=str(calls),
            EVALHUB_TEST_CHILD_PIDS=str(pids),
            EVALHUB_TEST_DELAY_S="60",
            OPENAI_API_KEY="x-cli-1",
            OPENROUTER_API_KEY="x-cli-2",
            ANTHROPIC_API_KEY="x-cli-3",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not calls.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert calls.read_text(), "the executor was never called"
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
        assert process.returncode == 130, stderr
        assert "Traceback" not in stderr
        assert "CommandError: interrupted (SIGTERM)" in stderr
        (child,) = [int(line) for line in pids.read_text().split()]
        assert not Path(f"/proc/{child}").exists(), "the runtime's process outlived the command"
    finally:  # never leave the command or its child behind, whatever failed
        if process.poll() is None:
            process.kill()
            process.wait()
        for pid in pids.read_text().split() if pids.exists() else ():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
    shown = manage(catalog_file, "shell", "-c", "from runs.models import Run; r = Run.objects.latest('pk'); print(r.status, r.error)")
    assert shown.stdout.splitlines()[-1] == "failed Terminated: SIGTERM"


# --- nightly for CI: --json and exit statuses --------------------------------------------------------------


def candidate_failure(entry: Any) -> dict[str, Any]:
    """A ``candidate_failure`` observation for ``entry``: scoreable, and it does not pass."""
    observation = completed_observation(entry.to_document(), cost_usd=0.05)
    observation["classification"] = "candidate_failure"
    observation["failure"] = {"code": "wrong_answer", "category": "candidate", "retryable": False, "message": "wrong answer"}
    observation["lifecycle"]["checks"] = [{"id": "finished", "passed": False}]
    return observation


def night_with(outcomes: dict[int, str]) -> None:
    """Save tonight's schedule and store a replay for each entry: ``completed`` unless
    ``outcomes`` maps its position to ``candidate`` (a candidate failure) or ``missing`` (no
    replay: an infrastructure failure)."""
    run("nightly", "--generated-at", GENERATED_AT)
    for entry in Schedule.objects.get().entries.order_by("position"):
        kind = outcomes.get(entry.position, "completed")
        if kind == "completed":
            REPLAY_STORE[entry.execution_id] = completed_observation(entry.to_document(), cost_usd=0.05)
        elif kind == "candidate":
            REPLAY_STORE[entry.execution_id] = candidate_failure(entry)


def nightly_status(*args: str) -> tuple[int, str]:
    """``nightly --execute`` with ``args``: its exit status (0, or the CommandError's) and stdout."""
    out = io.StringIO()
    try:
        call_command("nightly", "--generated-at", GENERATED_AT, "--execute", "--no-progress", *args, stdout=out, stderr=io.StringIO())
    except CommandError as exc:
        return exc.returncode, out.getvalue()
    return 0, out.getvalue()


@pytest.mark.parametrize(
    ("outcomes", "fail_on", "status"),
    [
        ({}, "any", 0),
        ({3: "candidate", 5: "missing"}, "", 0),  # without --fail-on, a finished run exits 0
        ({3: "candidate"}, "candidate", 5),
        ({3: "candidate"}, "infrastructure", 0),
        ({5: "missing"}, "infrastructure", 4),
        ({5: "missing"}, "candidate", 0),
        ({3: "candidate", 5: "missing"}, "any", 4),  # infrastructure is checked first
        ({3: "candidate", 5: "missing"}, "candidate,alerts", 5),
        ({}, "unmeasured", 0),  # scoreable executions: measured
    ],
)
def test_nightly_exit_status_follows_fail_on(
    reference_catalog: None, replay_executors: Any, credentials: None, outcomes: dict[int, str], fail_on: str, status: int
) -> None:
    night_with(outcomes)
    got, _ = nightly_status(*(["--fail-on", fail_on] if fail_on else []))
    assert got == status


def test_a_nightly_another_process_is_executing_exits_9_not_as_a_failure(
    reference_catalog: None, replay_executors: Any, credentials: None
) -> None:
    night_with({})
    schedule = Schedule.objects.get()
    run_row = Run.objects.create(schedule=schedule, trigger="nightly", status="running", cost_ceiling_usd=Decimal("12"))
    # The other process holds an execution under a live lease (a running run with nothing left
    # to run is finished by the recovery that `nightly --execute` does first).
    entry = schedule.entries.order_by("position").first()
    run_row.executions.create(
        entry=entry, position=0, execution_id=entry.execution_id, case_key=entry.case_key, candidate_key=entry.candidate_key,
        slot_key=entry.slot_key, repetition=entry.repetition, status="running", owner="other-host:1",
        lease_expires_at=timezone.now() + dt.timedelta(seconds=60),
    )  # fmt: skip
    status, out = nightly_status("--json")
    document = json.loads(out)
    assert status == 9 and document["exitStatus"] == 9 and document["executed"] is False
    assert document["run"]["id"] == run_row.pk and document["run"]["status"] == "running"


def test_nightly_fails_on_alerts_only_when_asked() -> None:
    summary = RunSummary(run_id=1, executions=1, scoreable=1, passed=1, alerts=2, status="finished")
    assert exit_status(summary, {"alerts"}) == EXIT_ALERTS
    assert exit_status(summary, {"candidate", "infrastructure"}) == 0
    assert exit_status(RunSummary(run_id=1, executions=1, alerts=2, status="cancelled"), set()) == EXIT_UNFINISHED


def test_nightly_fails_on_a_night_that_measured_nothing_only_when_asked() -> None:
    skipped = RunSummary(run_id=1, executions=40, scoreable=0, passed=0, status="finished", by_classification={"skipped": 40})
    assert exit_status(skipped, {"unmeasured"}) == EXIT_UNMEASURED
    assert exit_status(skipped, {"candidate", "infrastructure", "alerts"}) == 0


def test_nightly_json_is_one_document_with_the_counts_and_the_status(
    reference_catalog: None, replay_executors: Any, credentials: None
) -> None:
    night_with({3: "candidate", 5: "missing"})
    status, out = nightly_status("--json", "--fail-on", "candidate")
    document = json.loads(out)
    run_row = Run.objects.get()
    assert status == 5 and document["exitStatus"] == 5
    assert document["executed"] is True and document["queued"] is False
    assert document["schedule"]["expectedExecutions"] == 40 and document["schedule"]["created"] is False
    assert document["run"] == {
        "id": run_row.pk,
        "status": "finished",
        "executions": 40,
        "byClassification": {"candidate_failure": 1, "completed": 38, "infrastructure_failure": 1},
        "byFailureCode": {"replay_missing": 1, "wrong_answer": 1},
        "spentUsd": 1.95,
        "costCeilingUsd": 12,
        "hasUnpriced": False,
        "stoppedAtCeiling": False,
        "scoreable": 39,
        "passed": 38,
        "alerts": 0,
    }


def test_nightly_refused_by_coverage_exits_3_and_says_why_in_json(reference_catalog: None) -> None:
    Candidate.objects.update(tier="strong")
    status, out = nightly_status("--json")
    assert status == 3
    document = json.loads(out)
    assert document["exitStatus"] == 3
    assert document["refused"].startswith("live schedule coverage failed: strongAndInexpensiveNightly is false.")


def test_nightly_rejects_an_unknown_fail_on_value(reference_catalog: None) -> None:
    with pytest.raises(
        CommandError, match=r"--fail-on takes infrastructure, candidate, alerts, unmeasured or any \(a comma list\), not 'flaky'"
    ):
        run("nightly", "--fail-on", "flaky")
    with pytest.raises(CommandError, match=r"not 'any,zzz'"):
        run("nightly", "--fail-on", "any,zzz")


def test_nightly_exit_statuses_reach_the_shell(catalog_file: Path) -> None:
    """The real process: no credentials, every execution skipped — a finished run that measured
    nothing: 8 under --fail-on any (a 0/0 night is not green), 0 when unmeasured is not asked
    for; a refused flag value is 1."""
    no_keys = dict.fromkeys(CREDENTIALS, "")
    done = manage(catalog_file, "nightly", "--execute", "--fail-on", "any", "--json", "--generated-at", GENERATED_AT, **no_keys)
    assert done.returncode == 8, done.stderr
    assert json.loads(done.stdout)["run"]["byClassification"] == {"skipped": 40}
    assert json.loads(done.stdout)["exitStatus"] == 8 and "no execution was scoreable" in done.stderr
    again = manage(
        catalog_file, "nightly", "--execute", "--fail-on", "infrastructure,candidate,alerts", "--generated-at", GENERATED_AT, **no_keys
    )
    assert again.returncode == 0, again.stderr
    assert manage(catalog_file, "nightly", "--fail-on", "nope").returncode == 1
