"""System checks: ``manage.py check`` refuses configuration that would misbehave at night."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from evalhub.checks import check_evalhub_settings
from tests.test_sqlite_concurrency import PYTHON, REPO, child_environment

COST_MESSAGE = "EVALHUB_MAX_CAMPAIGN_COST_USD must be a positive decimal number of US dollars such as 12 or 0.25, not {!r}"


def ids(errors: list[Any]) -> list[str]:
    return [error.id for error in errors]


def test_the_shipped_settings_pass() -> None:
    assert check_evalhub_settings() == []


@pytest.mark.parametrize("value", ["0x10", "0", "-1", "NaN", "", "abc", "Infinity", "1e309", " ", "1,5"])
def test_a_bad_cost_ceiling_is_e001_naming_the_variable(settings: Any, value: str) -> None:
    settings.EVALHUB = {**settings.EVALHUB, "MAX_CAMPAIGN_COST_USD": value}
    (error,) = check_evalhub_settings()
    assert error.id == "evalhub.E001"
    assert error.msg == COST_MESSAGE.format(value)
    assert error.hint == "Set it to a positive decimal such as 12, or unset it."


@pytest.mark.parametrize("value", [None, "12", " 5 ", "0.25"])
def test_a_good_or_unset_cost_ceiling_passes(settings: Any, value: Any) -> None:
    settings.EVALHUB = {**settings.EVALHUB, "MAX_CAMPAIGN_COST_USD": value}
    assert check_evalhub_settings() == []


@pytest.mark.parametrize(("timeout", "retry"), [(600, 120), (600, 600), (21600, 60)])
def test_retry_not_longer_than_timeout_is_e002(settings: Any, timeout: int, retry: int) -> None:
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "timeout": timeout, "retry": retry}
    (error,) = check_evalhub_settings()
    assert error.id == "evalhub.E002"
    assert error.msg == (
        f"Q_CLUSTER retry ({retry} s) must be longer than timeout ({timeout} s), or a long nightly is delivered "
        "to a second worker while the first is still running."
    )


def test_retry_longer_than_timeout_passes(settings: Any) -> None:
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "timeout": 600, "retry": 601}
    assert check_evalhub_settings() == []


@pytest.mark.parametrize("value", ["4:00", "24:00", "+4:00", "noon", ""])
def test_a_bad_nightly_time_is_e003(settings: Any, value: str) -> None:
    settings.EVALHUB = {**settings.EVALHUB, "NIGHTLY_TIME_UTC": value}
    assert ids(check_evalhub_settings()) == ["evalhub.E003"]


def test_a_padded_nightly_time_passes_as_setup_schedules_accepts_it(settings: Any) -> None:
    settings.EVALHUB = {**settings.EVALHUB, "NIGHTLY_TIME_UTC": " 04:00 "}
    assert check_evalhub_settings() == []


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("javascript:alert(1)", "must be an http(s) address of a host"),
        ("evalhub.example.com", "must be an http(s) address of a host"),
        ("https://", "must be an http(s) address of a host"),
        ("https://u:pw@evalhub.example.com", "must not hold a user or a password"),
        ("https://u@evalhub.example.com", "must not hold a user or a password"),
        ("https://evalhub.example.com:port", "is not a URL"),
    ],
)
def test_a_public_url_alerts_could_not_link_to_safely_is_e011(settings: Any, url: str, problem: str) -> None:
    settings.EVALHUB = {**settings.EVALHUB, "PUBLIC_URL": url}
    errors = [error for error in check_evalhub_settings() if error.id == "evalhub.E011"]
    assert [error.msg for error in errors] == [f"EVALHUB_PUBLIC_URL {problem}; it is the base of the run links every alert carries."]
    # The value, a password in it included, is never repeated.
    assert url not in errors[0].msg


@pytest.mark.parametrize("url", ["", "https://evalhub.example.com", "http://127.0.0.1:8000/evalhub/"])
def test_an_http_public_url_or_none_passes(settings: Any, url: str) -> None:
    settings.EVALHUB = {**settings.EVALHUB, "PUBLIC_URL": url}
    assert not [error for error in check_evalhub_settings() if error.id == "evalhub.E011"]


@pytest.mark.parametrize("seed", ["", "   ", None])
def test_a_blank_seed_is_e004(settings: Any, seed: Any) -> None:
    settings.EVALHUB = {**settings.EVALHUB, "SCHEDULE_SEED": seed}
    assert ids(check_evalhub_settings()) == ["evalhub.E004"]


def test_a_local_django_q_time_zone_is_e005(settings: Any) -> None:
    settings.TIME_ZONE = "Europe/Berlin"
    settings.Q_CLUSTER = {key: value for key, value in settings.Q_CLUSTER.items() if key != "time_zone"}
    (error,) = check_evalhub_settings()
    assert error.id == "evalhub.E005"
    assert error.msg.startswith("django-q2 schedules daily tasks in Europe/Berlin, so the nightly set by")


def test_a_local_display_time_zone_with_django_q_in_utc_passes(settings: Any) -> None:
    settings.TIME_ZONE = "Europe/Berlin"
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "time_zone": "UTC"}
    assert check_evalhub_settings() == []


def test_manage_py_check_reports_e001(settings: Any) -> None:
    settings.EVALHUB = {**settings.EVALHUB, "MAX_CAMPAIGN_COST_USD": "0x10"}
    with pytest.raises(SystemCheckError, match=r"\(evalhub\.E001\) EVALHUB_MAX_CAMPAIGN_COST_USD must be a positive"):
        call_command("check")


def test_manage_py_check_reports_e002(settings: Any) -> None:
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "timeout": 600, "retry": 120}
    with pytest.raises(SystemCheckError, match=r"\(evalhub\.E002\) Q_CLUSTER retry \(120 s\) must be longer"):
        call_command("check")


@pytest.mark.parametrize(
    ("variables", "error_id"),
    [
        ({"EVALHUB_MAX_CAMPAIGN_COST_USD": "0x10"}, "evalhub.E001"),
        ({"EVALHUB_Q_TIMEOUT": "600", "EVALHUB_Q_RETRY": "120"}, "evalhub.E002"),
    ],
)
def test_a_real_manage_py_check_exits_non_zero(tmp_path: Any, variables: dict[str, str], error_id: str) -> None:
    done = subprocess.run(
        [str(PYTHON), "manage.py", "check"],
        cwd=REPO,
        env=child_environment(tmp_path / "check.sqlite3", **variables),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert f"({error_id})" in done.stderr
    assert "Traceback" not in done.stderr


# --- live runtimes ---------------------------------------------------------------------------------


def _live(settings: Any, **evalhub: Any) -> list[Any]:
    from evalhub.checks import check_live_runtimes

    settings.EVALHUB = {**settings.EVALHUB, **evalhub}
    return check_live_runtimes()


@pytest.mark.parametrize(
    ("providers", "message"),
    [
        ("not json", "EVALHUB_MODEL_PROVIDERS is not valid JSON"),
        ('["x"]', "must be a JSON object"),
        ('{"x": {"base_url": "ftp://a"}}', "base_url must be an http(s) URL"),
        ('{"x": {"base_url": "http://[::1"}}', "base_url must be an http(s) URL"),  # urlsplit raises
        ('{"x": {"base_url": "http://a:99999/v1"}}', "base_url must be an http(s) URL"),
        ('{"x": {"base_url": "http:///v1"}}', "base_url must be an http(s) URL"),
        ('{"x": {"base_url": "http://a/v1", "env_key": "sk-abcdefghijklmnop1234"}}', "must be the NAME"),
        ('{"x": {"base_url": "http://a/v1", "scripted": true}}', "unknown keys scripted"),
    ],
)
def test_malformed_provider_profiles_are_e006(settings: Any, providers: str, message: str) -> None:
    problems = [p for p in _live(settings, MODEL_PROVIDERS_JSON=providers) if p.id == "evalhub.E006"]
    assert len(problems) == 1 and message in problems[0].msg


def test_a_codex_profile_on_chat_completions_is_e007(settings: Any) -> None:
    providers = '{"openai": {"base_url": "http://127.0.0.1:1/v1", "wire_api": "chat", "env_key": "OPENAI_API_KEY"}}'
    problems = [p for p in _live(settings, MODEL_PROVIDERS_JSON=providers) if p.id == "evalhub.E007"]
    assert len(problems) == 1 and "speaks only the Responses API" in problems[0].msg


def test_a_missing_codex_binary_is_a_warning_naming_the_fix(settings: Any, tmp_path: Any) -> None:
    problems = _live(settings, RUNTIME_BINARIES={"codex": str(tmp_path / "codex")})
    (warning,) = [p for p in problems if p.id == "evalhub.W001" and "codex" in p.msg]
    assert warning.level < 40 and "fix EVALHUB_CODEX_BIN" in warning.msg  # a Warning, not an Error


def test_a_missing_opencode_binary_is_a_warning_naming_the_fix(settings: Any, tmp_path: Any) -> None:
    problems = _live(settings, RUNTIME_BINARIES={"opencode": str(tmp_path / "opencode")})
    (warning,) = [p for p in problems if p.id == "evalhub.W001" and "opencode" in p.msg]
    assert warning.level < 40 and "opencode live executions cannot run" in warning.msg
    assert "fix EVALHUB_OPENCODE_BIN" in warning.msg


def test_opencode_at_another_version_is_a_warning(settings: Any, tmp_path: Any) -> None:
    fake = tmp_path / "opencode"
    fake.write_text("#!/bin/sh\necho 1.0.0\n")
    fake.chmod(0o755)
    problems = _live(settings, RUNTIME_BINARIES={"opencode": str(fake)})
    (warning,) = [p for p in problems if p.id == "evalhub.W001" and "opencode" in p.msg]
    assert "reports '1.0.0', evalhub needs opencode 1.18.33" in warning.msg


def test_the_installed_package_manifest_gives_the_version_of_make_install_s_runtime(monkeypatch: Any) -> None:
    from runs.executors.live.runtimes import RUNTIMES, Runtime

    runtime = RUNTIMES["opencode"]
    if runtime.resolve() is None:
        pytest.skip("opencode is not installed (make install)")
    assert runtime.status(str(runtime.default_path)) == (True, f"opencode 1.18.33 at {runtime.default_path}")
    monkeypatch.setattr(Runtime, "installed_version", lambda self: "1.17.0")
    ok, message = runtime.status()
    assert not ok and "is opencode-ai 1.17.0, evalhub needs opencode 1.18.33; run `make install`" in message


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("12.1234567", "EVALHUB_MAX_CAMPAIGN_COST_USD has at most 6 decimal places (a millionth of a dollar), not '12.1234567'"),
        ("0.0000001", "EVALHUB_MAX_CAMPAIGN_COST_USD has at most 6 decimal places (a millionth of a dollar), not '0.0000001'"),
        ("1000000", "EVALHUB_MAX_CAMPAIGN_COST_USD must be at most 999999.999999 US dollars, not '1000000'"),
    ],
)
def test_a_cost_ceiling_the_run_column_cannot_hold_fails_the_check(settings: Any, value: str, message: str) -> None:
    settings.EVALHUB = {**settings.EVALHUB, "MAX_CAMPAIGN_COST_USD": value}
    (error,) = check_evalhub_settings()
    assert (error.id, error.msg) == ("evalhub.E001", message)


@pytest.mark.parametrize("value", ["999999.999999", "0.000001", "12.123456", "12.5000000000"])
def test_every_cost_ceiling_the_check_passes_fits_the_run_column(settings: Any, value: str) -> None:
    from runs.models import Run
    from schedules.building import parse_campaign_cost_limit

    settings.EVALHUB = {**settings.EVALHUB, "MAX_CAMPAIGN_COST_USD": value}
    assert check_evalhub_settings() == []
    column = Run._meta.get_field("cost_ceiling_usd")
    assert column.clean(parse_campaign_cost_limit(value), None) == parse_campaign_cost_limit(value)


@pytest.mark.parametrize("key", ["codex", "opencode"])
def test_check_warns_when_either_runtime_reports_another_version(settings: Any, tmp_path: Any, key: str) -> None:
    from runs.executors.live.runtimes import RUNTIMES

    runtime = RUNTIMES[key]
    fake = tmp_path / runtime.executable
    fake.write_text(f"#!/bin/sh\necho {runtime.label} 0.0.1\n")
    fake.chmod(0o755)
    problems = _live(settings, RUNTIME_BINARIES={key: str(fake)})
    (warning,) = [p for p in problems if p.id == "evalhub.W001" and runtime.label in p.msg]
    assert f"reports '{runtime.label} 0.0.1', evalhub needs {runtime.label} {runtime.version}" in warning.msg
    fake.write_text(f"#!/bin/sh\necho {runtime.label} {runtime.version}\n")
    assert not [p for p in _live(settings, RUNTIME_BINARIES={key: str(fake)}) if p.id == "evalhub.W001" and runtime.label in p.msg]


@pytest.mark.parametrize("key", ["codex", "opencode"])
def test_check_compares_the_installed_package_version_of_either_runtime(monkeypatch: Any, tmp_path: Any, key: str) -> None:
    from runs.executors.live.runtimes import RUNTIMES, Runtime

    runtime = RUNTIMES[key]
    fake = tmp_path / runtime.executable
    fake.write_text("#!/bin/sh\nexit 1\n")  # never run: the package manifest gives the version
    fake.chmod(0o755)
    monkeypatch.setattr(Runtime, "default_path", property(lambda self: fake))
    monkeypatch.setattr(Runtime, "installed_version", lambda self: "0.0.1")
    ok, message = runtime.status()
    assert not ok and f"is {runtime.package} 0.0.1, evalhub needs {runtime.label} {runtime.version}" in message
    monkeypatch.setattr(Runtime, "installed_version", lambda self: runtime.version)
    assert runtime.status() == (True, f"{runtime.label} {runtime.version} at {fake}")


@pytest.mark.parametrize(("runtime", "setting"), [("claude-acp", "EVALHUB_CLAUDE_ACP_BIN"), ("codex-acp", "EVALHUB_CODEX_ACP_BIN")])
def test_a_missing_acp_agent_is_a_warning_naming_the_fix(settings: Any, tmp_path: Any, runtime: str, setting: str) -> None:
    from runs.executors.live.runtimes import RUNTIMES

    label = RUNTIMES[runtime].label
    problems = _live(settings, RUNTIME_BINARIES={runtime: str(tmp_path / runtime)})
    (warning,) = [p for p in problems if p.id == "evalhub.W001" and p.msg.startswith(label)]
    assert warning.level < 40 and f"{label} live executions cannot run" in warning.msg
    assert f"fix {setting}" in warning.msg


@pytest.mark.parametrize(
    ("runtime", "package", "other"),
    [("claude-acp", "@agentclientprotocol/claude-agent-acp", "0.99.0"), ("codex-acp", "@agentclientprotocol/codex-acp", "2.7.1")],
)
def test_an_acp_agent_at_another_version_is_a_warning_read_from_its_package(
    settings: Any, tmp_path: Any, runtime: str, package: str, other: str
) -> None:
    # An npm install elsewhere: the .bin entry links into the package, whose manifest says the
    # version (the agents have no --version: they would wait for an ACP client on stdin).
    folder = tmp_path / "node_modules" / package
    (folder / "dist").mkdir(parents=True)
    (folder / "package.json").write_text(json.dumps({"name": package, "version": other}))
    entry = folder / "dist" / "index.js"
    entry.write_text("#!/bin/sh\nsleep 60\n")
    entry.chmod(0o755)
    link = tmp_path / "agent"
    link.symlink_to(entry)
    from runs.executors.live.runtimes import RUNTIMES

    label = RUNTIMES[runtime].label
    problems = _live(settings, RUNTIME_BINARIES={runtime: str(link)})
    (warning,) = [p for p in problems if p.id == "evalhub.W001" and p.msg.startswith(label)]
    assert f"is {package} {other}, evalhub needs {label} {RUNTIMES[runtime].version}" in warning.msg
    (folder / "package.json").write_text(json.dumps({"name": package, "version": RUNTIMES[runtime].version}))
    again = _live(settings, RUNTIME_BINARIES={runtime: str(link)})
    assert [p for p in again if p.id == "evalhub.W001" and p.msg.startswith(label)] == []
