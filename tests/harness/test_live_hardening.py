"""Bad input around live executions: what a breaker tried and evalhub must refuse clearly.

Stored traces altered after the fact, ids past any row, a settings profile claiming to be
scripted, the DB-free command line's arguments, an over-long case prompt, a scripted run in a
comparison, and an unreachable model endpoint (which must fail fast, not wait out the budget).
"""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command

from runs.executors.live.executor import configured_profiles
from runs.executors.live.runtimes import RUNTIMES
from runs.executors.providers import ProviderSettingsError, scripted_provider
from runs.executors.trace import TraceIntegrityError, gunzip, read_artifact, sha256_ref
from schedules.models import MAX_PROMPT_LENGTH, WorkflowCase

ROOT = Path(__file__).resolve().parents[2]


# --- stored traces -------------------------------------------------------------------------------


def _artifact() -> tuple[bytes, str]:
    document = b'{"kind":"frame","frameId":1}\n'
    return gzip.compress(document), sha256_ref(document)


def test_a_trace_with_bytes_appended_is_refused() -> None:
    data, digest = _artifact()
    assert read_artifact(data, digest)
    with pytest.raises(TraceIntegrityError, match="bytes after its gzip stream"):
        read_artifact(data + b"GARBAGE", digest)


def test_a_trace_with_a_second_gzip_member_is_refused() -> None:
    data, digest = _artifact()
    forged = data + gzip.compress(b'{"kind":"frame","forged":true}\n')
    with pytest.raises(TraceIntegrityError, match="altered"):
        read_artifact(forged, digest)


def test_a_gzip_bomb_stops_at_the_limit() -> None:
    bomb = gzip.compress(b"\0" * (4 * 1024 * 1024))
    with pytest.raises(TraceIntegrityError, match="decompresses past"):
        gunzip(bomb, limit=1024 * 1024)


def test_a_truncated_trace_is_refused() -> None:
    data, digest = _artifact()
    with pytest.raises(TraceIntegrityError):
        read_artifact(data[:-6], digest)


@pytest.mark.django_db
def test_a_trace_id_past_any_row_is_a_404(staff_client) -> None:
    assert staff_client.get("/executions/99999999999999999999/trace/1/").status_code == 404
    assert staff_client.get("/executions/1/trace/99999999999999999999/").status_code == 404


# --- provider settings ---------------------------------------------------------------------------


def test_a_settings_profile_cannot_declare_itself_scripted(settings) -> None:
    profile = {"openai": {"base_url": "http://127.0.0.1:1/v1", "env_key": "OPENAI_API_KEY", "scripted": True}}
    settings.EVALHUB = {**settings.EVALHUB, "MODEL_PROVIDERS_JSON": json.dumps(profile)}
    with pytest.raises(ProviderSettingsError, match="unknown keys scripted"):
        configured_profiles()


def test_only_demo_live_makes_a_scripted_profile(settings) -> None:
    user = {"scripted": {"base_url": "https://paid.example/v1", "env_key": "OPENAI_API_KEY"}}
    settings.EVALHUB = {**settings.EVALHUB, "MODEL_PROVIDERS_JSON": json.dumps(user)}
    profile = scripted_provider("http://127.0.0.1:1/scripts/{case_id}/v1")
    assert profile.scripted is True
    assert profile.base_url == "http://127.0.0.1:1/scripts/{case_id}/v1"
    # A configured profile of the same name is an ordinary, measured endpoint.
    assert configured_profiles()["scripted"].scripted is False


# --- the command line ----------------------------------------------------------------------------


def _cli(*args: str, key: str | None = "fake-key-for-local-test") -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "evalhub.settings"}
    if key is not None:
        env["OPENAI_API_KEY"] = key
    return subprocess.run(
        [sys.executable, "-m", "runs.executors.live", "run-case", *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=60
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("nope",), "unknown workflow case 'nope'"),
        (("final-response", "--candidate", "zz"), "unknown candidate 'zz'"),
        (("final-response", "--budget", "{bad"), "--budget is not valid JSON"),
        (("final-response", "--budget", "[1]"), "--budget must be a JSON object"),
        (("final-response", "--budget", '{"maxTotalTokens": "50"}'), "maxTotalTokens must be a whole number"),
        (("final-response", "--budget", '{"maxTotalTokens": -5}'), "must be above 0"),
        (("final-response", "--budget", '{"maxCostUsd": NaN}'), "--budget is not valid JSON"),
        (("final-response", "--budget", '{"maxFoo": 1}'), "unknown field(s) maxFoo"),
        (("final-response", "--price", "abc"), "--price is not valid JSON"),
        (("final-response", "--price", '{"input": -1000}'), "from 0 to 10000"),
        (("final-response", "--attempt", "0"), "must be between 1 and 1000"),
        (("final-response", "--scripts", "/nonexistent"), "not a directory"),
        (("final-response", "--scripts", "runs/executors/live/scripts", "--script", "nope"), "no script 'nope'"),
        (("final-response", "--out", "/nonexistent/dir/x.json"), "the directory /nonexistent/dir does not exist"),
    ],
)
def test_bad_arguments_exit_2_with_what_to_fix(args: tuple[str, ...], message: str) -> None:
    completed = _cli(*args)
    assert completed.returncode == 2, completed.stderr
    assert message in completed.stderr and "Traceback" not in completed.stderr


def test_a_missing_required_variable_is_named() -> None:
    completed = _cli("final-response", "--scripts", "runs/executors/live/scripts", key=None)
    assert completed.returncode == 2
    assert "set OPENAI_API_KEY in the environment" in completed.stderr
    # an opencode candidate reads OpenRouter's key
    completed = _cli("final-response", "--candidate", "opencode-kimi", "--scripts", "runs/executors/live/scripts")
    assert completed.returncode == 2
    assert "set OPENROUTER_API_KEY in the environment: candidate opencode-kimi requires it" in completed.stderr


# --- case prompts --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_over_long_prompt_is_refused_when_saved(reference_catalog, staff_client) -> None:
    case = WorkflowCase.objects.get(key="rich-activity")
    case.prompt = "x" * (MAX_PROMPT_LENGTH + 1)
    with pytest.raises(ValidationError, match="at most 100000 characters"):
        case.full_clean()
    response = staff_client.patch(
        "/api/cases/rich-activity/", data={"prompt": "x" * (MAX_PROMPT_LENGTH + 1)}, content_type="application/json"
    )
    assert response.status_code == 400 and "prompt" in response.json()


# --- an unreachable endpoint ---------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.skipif(RUNTIMES["codex"].resolve() is None, reason="codex is not installed: run `make install` (npm ci)")
def test_an_unreachable_endpoint_fails_fast_as_provider_unreachable(reference_catalog, settings, monkeypatch, refused_port) -> None:
    from runs.models import Attempt, Execution

    profile = {"openai": {"base_url": f"http://127.0.0.1:{refused_port}/v1", "wire_api": "responses", "env_key": "OPENAI_API_KEY"}}
    settings.EVALHUB = {**settings.EVALHUB, "MODEL_PROVIDERS_JSON": json.dumps(profile)}
    monkeypatch.setenv("OPENAI_API_KEY", "fake-key-for-local-test")
    call_command(
        "nightly",
        "--execute",
        "--no-progress",
        "--generated-at",
        "2026-08-24T00:00:00.000Z",
        "--candidate",
        "codex-luna",
        "--limit",
        "1",
        stdout=io.StringIO(),
    )
    (execution,) = Execution.objects.all()
    assert (execution.classification, execution.failure_code, execution.failure_retryable) == (
        "infrastructure_failure",
        "provider_unreachable",
        True,
    )
    assert "could not be reached" in execution.failure_message
    assert Attempt.objects.filter(execution=execution).count() == 2  # retried once
    assert execution.duration_ms < 60_000  # not the candidate's 180 s turn budget, twice
