"""Helpers for the end-to-end tests that drive the real runtimes (``codex app-server``,
``opencode serve``) through the DB-free command line ``python -m runs.executors.live run-case``
(tests/harness/test_live_codex_e2e.py, tests/harness/test_live_opencode_e2e.py).

:func:`run_cli` runs one live execution as a subprocess — inside a loopback-only network
namespace (``unshare -n`` + ``ip link set lo up``) when the machine allows it, else directly with a
warning (never silently) — and returns a :class:`CliRun` with the result JSON, the decoded trace
artifact and the process's stdout/stderr. The model key reaches the CLI only through the
environment (the candidate's required variable: ``OPENAI_API_KEY``, ``OPENROUTER_API_KEY``) and is
always a fake value. :class:`CliRuns` runs many of them at once (a runtime that takes 10-20 s to
start is mostly waiting) and :func:`module_runs` starts every run a module's selected tests read;
the scenarios (:func:`scenario_options`), checks, scripts and tables every runtime's tests share
live here too (tests/harness/test_live_acp_e2e.py is the third).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import gzip
import ipaddress
import json
import os
import re
import secrets
import shutil
import signal
import string
import subprocess
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CODEX = ROOT / "node_modules" / ".bin" / "codex"
OPENCODE = ROOT / "node_modules" / ".bin" / "opencode"
PYTHON = ROOT / ".venv" / "bin" / "python"
SCRIPTS = ROOT / "runs" / "executors" / "live" / "scripts"
MISBEHAVING = SCRIPTS / "misbehaving"
LIVE_SCRIPTS = ROOT / "tests" / "fixtures" / "live-scripts"
REFERENCE_DATA = ROOT / "evalhub" / "reference_data"

#: A fake key (never a real one); tests that look for leaks use their own random fake values.
FAKE_KEY = "sk-test-echo-1234567890abcdefXYZ"
#: Seconds one CLI run may take before the test fails (a run takes ~1-6 s).
CLI_TIMEOUT = 150
CHECK_GROUPS = ("lifecycle", "continuation", "presentation")


def workflow_cases() -> list[dict[str, Any]]:
    """The bundled reference workflow cases (``workflow-cases.json`` ``cases``), in file order."""
    return json.loads((REFERENCE_DATA / "workflow-cases.json").read_text())["cases"]


def case_ids() -> list[str]:
    return [case["id"] for case in workflow_cases()]


def reference_candidate(candidate_id: str = "codex-luna") -> dict[str, Any]:
    manifest = json.loads((REFERENCE_DATA / "candidate-manifest.json").read_text())
    for slot in manifest["slots"]:
        for candidate in slot["candidates"]:
            if candidate["id"] == candidate_id:
                return candidate
    raise KeyError(candidate_id)


@functools.cache
def namespace_available() -> bool:
    """Whether ``unshare -n`` works here (checked once per process) and ``ip`` can raise ``lo``."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    try:
        probe = subprocess.run(["unshare", "-n", "sh", "-c", "ip link set lo up"], capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def namespaced(argv: Sequence[str]) -> tuple[list[str], bool]:
    """``argv`` wrapped to run in a fresh loopback-only network namespace, and whether it is.

    Without namespace support the command runs as is and a warning says so in the test output.
    """
    if namespace_available():
        return ["unshare", "-n", "sh", "-c", 'ip link set lo up; exec "$@"', "sh", *argv], True
    warnings.warn(
        "unshare -n is not available on this machine: the live end-to-end run is NOT isolated in a "
        "loopback-only network namespace (it still talks to a loopback scripted model only)",
        stacklevel=3,
    )
    return list(argv), False


def require_loopback_only_namespace() -> None:
    """Skip the calling test when ``unshare -n`` is not available; otherwise check that a fresh
    namespace holds the loopback link and nothing else."""
    if not namespace_available():
        pytest.skip("unshare -n is not available here: every live run in this file runs WITHOUT a network namespace")
    links = subprocess.run(
        ["unshare", "-n", "sh", "-c", "ip link set lo up; ip -o link"], capture_output=True, text=True, check=True
    ).stdout
    assert {line.split(":")[1].strip() for line in links.splitlines() if line.strip()} == {"lo"}, links


def cli_environment(key_variable: str, key: str, private: Path) -> dict[str, str]:
    """The whole environment of a ``run-case`` process: the locale and ``PATH`` of this one, the
    candidate's key variable set to ``key`` and ``TMPDIR`` pointing at ``private``."""
    environment = {name: os.environ[name] for name in ("PATH", "LANG", "LC_ALL", "TZ") if name in os.environ}
    environment.update({key_variable: key, "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": str(private)})
    return environment


@dataclass
class CliRun:
    """One finished ``run-case`` process: its result document, trace records and output."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    result: dict[str, Any]
    result_text: str
    trace_bytes: bytes | None
    isolated: bool
    records: list[dict[str, Any]] = field(default_factory=list)
    #: seconds the process took
    elapsed_s: float = 0.0

    @property
    def observation(self) -> dict[str, Any] | None:
        return self.result.get("observation")

    @property
    def error(self) -> dict[str, Any] | None:
        return self.result.get("error")

    def frames(self) -> list[dict[str, Any]]:
        """Trace frame records in order, each with ``text`` = its decoded raw bytes (UTF-8,
        undecodable bytes replaced) and ``json`` = the parsed JSON object or ``None``."""
        frames = []
        for record in self.records:
            if record.get("kind") != "frame":
                continue
            text = base64.b64decode(record.get("rawBase64", "")).decode("utf-8", "replace")
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = None
            frames.append({**record, "text": text, "json": parsed if isinstance(parsed, dict) else None})
        return frames

    def describe(self) -> str:
        """A short account of the run for assertion messages (never holds a key: the CLI scrubs)."""
        observation = self.observation or {}
        return json.dumps(
            {
                "isolated": self.isolated,
                "returncode": self.returncode,
                "error": self.error,
                "classification": observation.get("classification"),
                "failure": observation.get("failure"),
                "failing": sorted(failing_checks(observation)) if observation else None,
                "modelRequests": self.result.get("modelRequests"),
                "stderr": self.stderr[-1500:],
            },
            indent=1,
        )


def run_cli(
    case_id: str,
    tmp_path: Path,
    *,
    candidate: str = "codex-luna",
    scripts: Path = SCRIPTS,
    script: str | None = None,
    budget: Mapping[str, Any] | None = None,
    price: Mapping[str, Any] | None = None,
    key: str = FAKE_KEY,
    debug: bool = True,
    prefix: Sequence[str] = (),
    timeout_s: float = CLI_TIMEOUT,
) -> CliRun:
    """Run ``python -m runs.executors.live run-case CASE_ID --candidate CANDIDATE`` against the
    scripted model in ``scripts`` (``script`` names the file stem; default the case id), with the
    candidate's required variable set to ``key`` and ``TMPDIR`` pointing at ``tmp_path/tmp`` (the
    execution's private folders go there: a test can check they are gone), and collect the result
    (``--out``), the trace artifact (``--trace-out``) and the process output. ``prefix`` is put
    before the interpreter inside the namespace (e.g. strace).

    Raises ``AssertionError`` when the process fails or writes no result.
    """
    out = tmp_path / "result.json"
    trace = tmp_path / "trace.ndjson.gz"
    (tmp_path / "tmp").mkdir(parents=True, exist_ok=True)
    command = [str(PYTHON), "-m", "runs.executors.live", "run-case", case_id, "--candidate", candidate, "--scripts", str(scripts)]
    command += ["--out", str(out), "--trace-out", str(trace)]
    if script:
        command += ["--script", script]
    if budget is not None:
        command += ["--budget", json.dumps(dict(budget))]
    if price is not None:
        command += ["--price", json.dumps(dict(price))]
    if debug:
        command.append("--debug")
    argv, isolated = namespaced([*prefix, *command])
    key_variable = reference_candidate(candidate)["qualification"]["requiredEnvironment"][0]
    environment = cli_environment(key_variable, key, tmp_path / "tmp")
    started = time.monotonic()
    completed = subprocess.run(argv, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=timeout_s, check=False)
    elapsed_s = time.monotonic() - started
    assert completed.returncode in (0, 3), f"run-case exited {completed.returncode}:\n{completed.stderr[-3000:]}"
    assert out.exists(), f"run-case wrote no result:\n{completed.stderr[-3000:]}"
    text = out.read_text()
    # 3: the result is an infrastructure failure (a script can exit non-zero on it); 0: an observation.
    assert (completed.returncode == 3) == (json.loads(text).get("error") is not None), completed.returncode
    trace_bytes = trace.read_bytes() if trace.exists() else None
    records: list[dict[str, Any]] = []
    if trace_bytes:
        records = [json.loads(line) for line in gzip.decompress(trace_bytes).decode("utf-8").splitlines() if line]
    return CliRun(
        argv=argv,
        returncode=completed.returncode,
        stdout=completed.stdout,
        stderr=completed.stderr,
        result=json.loads(text),
        result_text=text,
        trace_bytes=trace_bytes,
        isolated=isolated,
        records=records,
        elapsed_s=elapsed_s,
    )


class CliRuns:
    """Live executions through :func:`run_cli`, run concurrently (at most ``workers`` at a time)
    and collected by name: a module submits every run its selected tests read, and each test
    waits for its own. Each run gets its own folder under ``root``."""

    def __init__(self, root: Path, *, workers: int = 3) -> None:
        self.root = root
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="cli-run")
        self._futures: dict[str, Future[CliRun]] = {}

    def submit(self, name: str, case_id: str, **options: Any) -> None:
        """Start run ``name``: ``run_cli(case_id, <its folder>, **options)``."""
        folder = self.root / re.sub(r"[^A-Za-z0-9_.-]", "_", name)
        folder.mkdir(parents=True, exist_ok=True)
        self._futures[name] = self._pool.submit(run_cli, case_id, folder, **options)

    def get(self, name: str) -> CliRun:
        """Run ``name``'s result, once it finished (re-raises its failure)."""
        if name not in self._futures:
            raise LookupError(f"run {name!r} was not submitted: add it to the module's list of runs")
        return self._futures[name].result()

    def done(self) -> dict[str, CliRun]:
        """The runs that finished, by name (failed ones left out)."""
        return {name: f.result() for name, f in self._futures.items() if f.done() and not f.cancelled() and f.exception() is None}

    def settle(self) -> None:
        """Wait until every submitted run has ended (whatever its outcome): a test that times a
        runtime of its own (one held by the model, then signalled) must not share the machine with
        four more starting beside it."""
        wait(self._futures.values())

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def module_runs(
    request: pytest.FixtureRequest,
    root: Path,
    *,
    runs_of: Callable[[pytest.Item], list[str]],
    submit: Callable[[CliRuns, str, Path], None],
    workers: int,
    order: Callable[[str], Any] | None = None,
) -> Iterator[CliRuns]:
    """The body of a module-scoped ``runs`` fixture: every run the selected tests of
    ``request.module`` read (``runs_of(item)``: run names), submitted at once (``submit(pool,
    name, root)``; in ``order`` when given, else by name), then the pool; on teardown the pool is
    closed and, where ``EVALHUB_E2E_TIMINGS`` names a file, how long each run took is written
    there (docs/benchmarks.md)."""
    items = [item for item in request.session.items if item.module is request.module]
    # Each xdist worker collects every test, so each one that runs a test of this module would start
    # all of its runs: the module's tests must share one worker (xdist_group, `--dist loadgroup`).
    # xdist marks a grouped test by suffixing its node id with "@<group>"; without the suffix the
    # grouping silently broke (pyproject.toml's pytest pin says how it once did).
    ungrouped = [item.nodeid for item in items if getattr(request.config.option, "loadgroup", False) and "@" not in item.nodeid]
    if ungrouped:
        pytest.fail(f"--dist loadgroup did not group {len(ungrouped)} tests, e.g. {ungrouped[0]}: every worker would start all the runs")
    wanted = sorted({run for item in items for run in runs_of(item)})
    pool = CliRuns(root, workers=workers)
    for name in sorted(wanted, key=order) if order is not None else wanted:
        submit(pool, name, root)
    yield pool
    pool.close()
    if os.environ.get("EVALHUB_E2E_TIMINGS"):
        timings = {name: {"elapsedS": round(run.elapsed_s, 1), **(run.result.get("timings") or {})} for name, run in pool.done().items()}
        Path(os.environ["EVALHUB_E2E_TIMINGS"]).write_text(json.dumps(timings, indent=1, sort_keys=True))


def failing_checks(observation: Mapping[str, Any]) -> set[str]:
    """``{"group/check-id", ...}`` of every failed check of an observation."""
    return {f"{group}/{check['id']}" for group in CHECK_GROUPS for check in observation[group]["checks"] if not check["passed"]}


def bundle_id(candidate: Mapping[str, Any]) -> str:
    """The live bundle id a nightly run of ``candidate`` alone gets (``runs.evaluation.reports``)."""
    import evalhub
    from runs.evaluation.reports import live_bundle_identity

    return live_bundle_identity(runner_version=evalhub.__version__, seed="e2e-scripted", candidates=[dict(candidate)])


def trace_expectations() -> dict[str, Mapping[str, Any]]:
    """Each bundled case's ``assertions.trace`` — what the scorer gets from the stored cases."""
    return {
        case["id"]: case["assertions"]["trace"] for case in workflow_cases() if isinstance(case.get("assertions", {}).get("trace"), dict)
    }


def is_subsequence(wanted: Sequence[str], seen: Sequence[str]) -> bool:
    remaining = iter(seen)
    return all(any(item == other for other in remaining) for item in wanted)


# ---------------------------------------------------------------- strace

_CONNECT = re.compile(r"connect\(\d+, \{sa_family=(AF_INET6?),(?P<rest>[^}]*)\}")
_INET = re.compile(r'inet_addr\("(?P<addr>[^"]+)"\)')
_INET6 = re.compile(r'inet_pton\(AF_INET6, "(?P<addr>[^"]+)"')


def inet_connects(strace_log: str) -> list[tuple[str, str]]:
    """``[(family, address), ...]`` of every AF_INET/AF_INET6 ``connect`` in an ``strace -f`` log
    (AF_UNIX and others are left out)."""
    found = []
    for match in _CONNECT.finditer(strace_log):
        family, rest = match.group(1), match.group("rest")
        address = (_INET6 if family == "AF_INET6" else _INET).search(rest)
        found.append((family, address.group("addr") if address else "?"))
    return found


def is_loopback(address: str) -> bool:
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return False
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        parsed = parsed.ipv4_mapped
    return parsed.is_loopback


def key_fragments(key: str, length: int = 10) -> list[str]:
    """Every substring of ``key`` of ``length`` characters (a leak of part of the key)."""
    return [key[i : i + length] for i in range(len(key) - length + 1)]


# ---------------------------------------------------------------- shared by both runtimes' tests

#: A price that makes the over-budget script's cost exceed the candidate's maxCostUsd: a scripted
#: model otherwise bills a known $0, so the cost limit could never fail (USD per million tokens).
PRICE = {"input": 2, "cachedInput": 0.2, "output": 8, "reasoning": 8}

#: Provider failure scripts (tests/fixtures/live-scripts/) → the code and retryable flag the
#: execution must fail with, whatever the runtime.
PROVIDER_ERRORS = [
    ("provider-http-503", "provider_http_503", True),
    ("provider-rate-limited", "provider_rate_limited", True),
    ("provider-stream-dropped", "provider_stream_dropped", True),
    ("provider-quota-exhausted", "provider_quota_exhausted", False),
    ("provider-auth-refused", "provider_auth_refused", False),
    ("provider-unknown-model", "provider_unknown_model", False),
]

#: What a usage over a small token budget must fail (budget-over.json with maxTotalTokens 1000).
BUDGET_OVER_CHECKS = {
    "lifecycle/token-budget",
    "lifecycle/candidate-budget-stop",
    "lifecycle/terminal-authority",
    "presentation/terminal-presentation",
}


def score(observation: dict[str, Any], candidate: Mapping[str, Any]) -> dict[str, Any]:
    """The scorecard of an observation, with the stored cases' trace expectations."""
    from runs.evaluation.scoring import score_observation

    return score_observation(observation, {"bundleId": bundle_id(candidate)}, trace_expectations=trace_expectations())


def assert_completed_and_passed(run: CliRun, case_id: str, candidate: Mapping[str, Any]) -> dict[str, Any]:
    """A well-behaved case: completed, no failing check, valid, scored passed, its trace verified."""
    from runs.evaluation.observation_schema import validate_observation

    observation = run.observation
    assert run.error is None, run.describe()
    assert run.result["scripted"] is True and run.result["caseId"] == case_id
    assert observation["classification"] == "completed", run.describe()
    assert failing_checks(observation) == set()
    assert validate_observation(observation) == []
    scorecard = score(observation, candidate)
    reasons = {name: d["reasons"] for name, d in scorecard["dimensions"].items() if not d["passed"]}
    assert scorecard["overall"]["passed"] is True, reasons
    assert scorecard["overall"]["score"] == 1
    assert scorecard["bundleId"].startswith("runner-live-v2-")
    lineage = observation["traceLineage"]
    assert lineage["capture"] == "on" and lineage["digestVerified"] is True and lineage["ordered"] is True
    assert run.result["trace"]["digest"] == lineage["traceRef"]
    assert run.result["trace"]["frameCount"] == len(run.frames()) == lineage["frameCount"]
    assert run.result["trace"]["truncated"] is False
    return scorecard


def assert_candidate_failure(run: CliRun, code: str, expected: set[str], candidate: Mapping[str, Any]) -> dict[str, Any]:
    """A misbehaving agent: a candidate failure with ``code`` failing exactly ``expected``."""
    from runs.evaluation.observation_schema import validate_observation

    observation = run.observation
    assert run.error is None, run.describe()
    assert validate_observation(observation) == []
    assert failing_checks(observation) == expected, run.describe()
    assert observation["classification"] == "candidate_failure"
    failure = observation["failure"]
    assert (failure["code"], failure["category"], failure["retryable"]) == (code, "candidate", False)
    for check in expected:
        assert check in failure["message"]
    scorecard = score(observation, candidate)
    assert scorecard["overall"] == {"score": 0, "gatePassed": False, "passed": False}
    return scorecard


def random_key() -> str:
    """A fresh fake key that looks like a real one."""
    return "sk-test-echo-" + secrets.token_hex(12)


def secret_shaped() -> str:
    """A fresh GitHub-token-shaped string (secret-shape redaction must catch it)."""
    alphabet = string.ascii_letters + string.digits
    return "ghp_" + "".join(secrets.choice(alphabet) for _ in range(36))


def write_echo_script(directory: Path, shaped: str) -> Path:
    """``directory/echo-key.json``: says the received key back (twice) and ``shaped``, then finishes.
    The secret-shaped text sits in the first 200 characters of a >400-character message, so the
    scripted model streams it whole inside one delta."""
    padding = "Here is everything I found while checking the task board, " * 8
    text = f"A token I found: {shaped} — " + padding
    usage = {"input": 800, "cachedInput": 200, "output": 60, "reasoning": 0}
    finish = {"call": "finish_task", "arguments": {"summary": "Answered task-1.", "disposition": "done"}}
    script = {
        "name": "echo-key",
        "description": "Says the received bearer key back, and a secret-shaped token, then finishes.",
        "steps": [
            {"outputs": [{"echoKey": True}, {"call": "get_task_context", "arguments": {}}], "usage": usage},
            {"outputs": [{"say": text}, {"echoKey": True}], "usage": usage},
            {"outputs": [finish], "usage": usage},
            {"outputs": [{"say": "Done."}], "usage": usage},
        ],
    }
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "echo-key.json"
    path.write_text(json.dumps(script))
    return path


def leak_places(run: CliRun) -> dict[str, str]:
    """Every text an execution left: the result, the decompressed trace, stdout, stderr, each decoded frame."""
    places = {
        "result JSON": run.result_text,
        "trace artifact (decompressed)": "\n".join(json.dumps(record) for record in run.records),
        "stdout": run.stdout,
        "stderr": run.stderr,
    }
    places.update({f"trace frame {frame['frameId']} (decoded)": frame["text"] for frame in run.frames()})
    return places


STRACE = ["strace", "-f", "-qq", "-e", "trace=connect", "-e", "signal=none", "-o"]


# ---------------------------------------------------------------- scenarios every runtime plays

#: The token budget the budget scripts (budget-over.json, budget-exact.json) are written against.
SMALL_BUDGET = {"maxTotalTokens": 1000}


def misbehaving_scripts() -> list[str]:
    """The misbehaving scripts' names (file stems), sorted."""
    return sorted(path.stem for path in MISBEHAVING.glob("*.json"))


def scenario_options(kind: str, detail: str) -> dict[str, Any]:
    """The :func:`run_cli` options of a scenario: ``misbehaving`` (``detail``: the script; the
    over-budget one priced with :data:`PRICE`), ``provider`` (a provider failure script of
    tests/fixtures/live-scripts/) or ``budget`` (``over`` or ``exact``: a budget script under
    :data:`SMALL_BUDGET`). Raises ``LookupError`` for another kind."""
    if kind == "misbehaving":
        return {"scripts": MISBEHAVING, "script": detail, "price": PRICE if detail == "final-response--over-budget" else None}
    if kind == "provider":
        return {"scripts": LIVE_SCRIPTS, "script": detail}
    if kind == "budget":
        return {"scripts": LIVE_SCRIPTS, "script": f"budget-{detail}", "budget": SMALL_BUDGET}
    raise LookupError(kind)


def submit_scenario(
    runs: CliRuns,
    name: str,
    what: str,
    root: Path,
    *,
    misbehaving_cases: Mapping[str, Sequence[Any]],
    key: str,
    shaped: str,
    strace_log: Path,
    **options: Any,
) -> None:
    """Submit run ``name`` of the scenario ``what`` with ``options`` (the candidate, a timeout):
    ``case:<id>`` (the case's well-behaved script), ``misbehaving:<script>`` (on its case, the first
    item of its row in ``misbehaving_cases``), ``provider:<script>`` and ``budget:<over|exact>``
    (on final-response), ``echo`` (:func:`write_echo_script` under ``root`` with ``shaped``, the
    model key ``key``) or ``strace`` (every ``connect`` logged to ``strace_log``). Raises
    ``LookupError`` for another scenario."""
    kind, _, detail = what.partition(":")
    if kind == "case":
        runs.submit(name, detail, **options)
    elif kind == "misbehaving":
        runs.submit(name, misbehaving_cases[detail][0], **scenario_options(kind, detail), **options)
    elif kind in ("provider", "budget"):
        runs.submit(name, "final-response", **scenario_options(kind, detail), **options)
    elif what == "echo":
        scripts = root / "echo-scripts"
        write_echo_script(scripts, shaped)
        runs.submit(name, "final-response", scripts=scripts, script="echo-key", key=key, **options)
    elif what == "strace":
        runs.submit(name, "final-response", prefix=[*STRACE, str(strace_log)], **options)
    else:
        raise LookupError(name)


def assert_forbidden_call_fails(run: CliRun, code: str, expected: set[str], candidate: Mapping[str, Any]) -> None:
    """cancellation-permissions--forbidden-call: a candidate failure (:func:`assert_candidate_failure`)
    that fails the hard gate, after the approval was asked and answered and the cancel stopped the turn."""
    scorecard = assert_candidate_failure(run, code, expected, candidate)
    assert scorecard["dimensions"]["hard_invariants"]["passed"] is False
    assert {"runtime_request.resolved", "turn.interrupted"} <= set(run.observation["observedPrpEventTypes"])


def assert_provider_failure(run: CliRun, code: str, retryable: bool, runtime_name: str) -> None:
    """A provider failure script: no observation, an infrastructure error with ``code`` and
    ``retryable`` whose message says the runtime's model provider failed."""
    assert run.observation is None, run.describe()
    assert run.error is not None, run.describe()
    assert (run.error["code"], run.error["retryable"]) == (code, retryable), run.describe()
    assert run.error["message"].startswith(f"{runtime_name}: the model provider failed: ")


def assert_budget_exceeded(run: CliRun, candidate: Mapping[str, Any], total_tokens: int | None = None) -> dict[str, Any]:
    """budget-over under :data:`SMALL_BUDGET`: a ``candidate_budget_exceeded`` failure of exactly
    :data:`BUDGET_OVER_CHECKS`, past the budget (``total_tokens`` exactly, when given), its message
    the budget stop's. Returns the observation."""
    assert_candidate_failure(run, "candidate_budget_exceeded", BUDGET_OVER_CHECKS, candidate)
    observation = run.observation
    assert observation["base"]["budget"]["maxTotalTokens"] == SMALL_BUDGET["maxTotalTokens"]
    if total_tokens is None:
        assert observation["metrics"]["totalTokens"] > SMALL_BUDGET["maxTotalTokens"]
    else:
        assert observation["metrics"]["totalTokens"] == total_tokens
    stop = f"candidate_budget_exceeded: candidate reported usage budget stop: total tokens {total_tokens or ''}"
    assert observation["failure"]["message"].startswith(stop)
    return observation


def assert_budget_reached(run: CliRun) -> dict[str, Any]:
    """budget-exact under :data:`SMALL_BUDGET`: usage exactly at the budget is ``candidate_budget_reached``
    (the budget stop fails, the token budget does not: at the limit, not above it). Returns the observation."""
    from runs.evaluation.observation_schema import validate_observation

    observation = run.observation
    assert run.error is None, run.describe()
    assert validate_observation(observation) == []
    assert observation["metrics"]["totalTokens"] == SMALL_BUDGET["maxTotalTokens"], observation["metrics"]
    assert observation["classification"] == "candidate_failure"
    assert observation["failure"]["code"] == "candidate_budget_reached", run.describe()
    failed = failing_checks(observation)
    assert "lifecycle/candidate-budget-stop" in failed and "lifecycle/token-budget" not in failed
    return observation


def assert_resumed_same_session(observation: Mapping[str, Any]) -> None:
    """restart-recovery: the process restarted and the same session resumed, finished once."""
    assert {"process.restarted", "session.resumed"} <= set(observation["observedPrpEventTypes"])
    assert observation["continuation"]["sessionPolicy"] == "same_session"
    assert observation["base"]["observedCalls"].count("finish_task") == 1


def assert_stopped_after_permission(observation: Mapping[str, Any]) -> None:
    """cancellation-permissions: the cancel stopped the run after the permission was answered."""
    assert observation["lifecycle"]["issueStatus"] == "cancelled"
    assert observation["presentation"]["terminalLabel"] == "Stopped"
    assert {"run.cancel.requested", "turn.interrupted", "runtime_request.resolved"} <= set(observation["observedPrpEventTypes"])
    assert is_subsequence(["permission", "activity", "stopped"], observation["presentation"]["orderedMarkers"])


def assert_secrets_left_nowhere(run: CliRun, key: str, shaped: str) -> None:
    """Neither the echoed ``key`` nor the secret-shaped text ``shaped`` is in any text the run left
    (:func:`leak_places`), nor the key in the compressed trace artifact."""
    places = leak_places(run)
    for secret, label in ((key, "the fake key"), (shaped, "a secret-shaped token")):
        leaks = [place for place, text in places.items() if secret in text]
        assert leaks == [], f"{label} left in: {leaks}"
    assert run.trace_bytes and key.encode() not in run.trace_bytes


def assert_no_key_fragment(run: CliRun, key: str) -> None:
    """No trace frame holds 10 or more characters of ``key`` in a row."""
    fragments = key_fragments(key, 10)
    leaks = sorted({frame["frameId"] for frame in run.frames() if any(fragment in frame["text"] for fragment in fragments)})
    assert leaks == [], f"frames holding 10+ characters of the key: {leaks}"


def assert_connects_only_to_loopback(strace_log: str) -> None:
    """Every AF_INET/AF_INET6 ``connect`` in an ``strace -f`` log went to loopback, and there was
    at least one (the runtime's to the scripted model and the MCP server: strace works)."""
    connects = inet_connects(strace_log)
    assert any(family == "AF_INET" and is_loopback(address) for family, address in connects), connects
    outside = sorted({(family, address) for family, address in connects if not is_loopback(address)})
    assert outside == [], f"non-loopback connect() attempts: {outside}"


def describe(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return "(gone)"


def alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie waiting to be reaped has stopped running)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def processes_under(folder: Path) -> set[int]:
    """Pids of the processes whose environment names a path inside ``folder`` (a runtime's private
    HOME and TMPDIR are there; root reads any process's environment)."""
    found = set()
    prefix = f"={folder}".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if any(prefix in variable for variable in (entry / "environ").read_bytes().split(b"\0")):
                    found.add(int(entry.name))
            except OSError:  # gone, or not ours to read
                continue
    return found


@contextlib.contextmanager
def run_case_held_by_the_model(tmp_path: Path, candidate: str = "codex-luna") -> Iterator[tuple[subprocess.Popen[str], set[int], Path]]:
    """``run-case`` of ``candidate`` with its runtime waiting on a model that answers in a minute:
    yields the command, the processes it started (the runtime and its helpers, found by their
    private TMPDIR) and the result file. Whatever the test did, neither the command nor its
    runtime is left behind."""
    script = json.loads((SCRIPTS / "final-response.json").read_text())
    script["steps"][0]["delayMs"] = 60_000
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "final-response.json").write_text(json.dumps(script))
    private = tmp_path / "tmp"
    private.mkdir()
    out = tmp_path / "result.json"
    command = [
        str(PYTHON),
        "-m",
        "runs.executors.live",
        "run-case",
        "final-response",
        "--candidate",
        candidate,
        "--scripts",
        str(scripts),
        "--out",
        str(out),
    ]
    argv, _ = namespaced(command)
    environment = cli_environment(reference_candidate(candidate)["qualification"]["requiredEnvironment"][0], random_key(), private)
    process = subprocess.Popen(argv, cwd=ROOT, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started: set[int] = set()
    try:
        deadline = time.monotonic() + 120
        # Wait until the runtime itself runs (a process beside the CLI's with its home in the run's
        # TMPDIR), then give it time to send its first model request, which the script holds.
        while time.monotonic() < deadline and not (started := processes_under(private) - {process.pid}):
            time.sleep(0.2)
        assert started, f"{candidate}'s runtime never started"
        time.sleep(3)
        started |= processes_under(private) - {process.pid}
        yield process, started, out
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pid in processes_under(private):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def assert_none_outlives(started: set[int], *, seconds: float = 10.0) -> None:
    """Within ``seconds``, none of ``started`` (pids) still runs; else fail naming each survivor."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(pid) for pid in started):
        time.sleep(0.1)
    survivors = {pid: describe(pid) for pid in started if alive(pid)}
    assert not survivors, f"processes outlived run-case: {survivors}"
