"""Helpers for the end-to-end tests that drive the real ``codex app-server`` through the DB-free
command line ``python -m runs.harness run-case`` (tests/test_live_codex_e2e.py).

:func:`run_cli` runs one live execution as a subprocess — inside a loopback-only network
namespace (``unshare -n`` + ``ip link set lo up``) when the machine allows it, else directly with a
warning (never silently) — and returns a :class:`CliRun` with the result JSON, the decoded trace
artifact and the process's stdout/stderr. The model key reaches the CLI only through the
environment (``OPENAI_API_KEY``) and is always a fake value.
"""

from __future__ import annotations

import base64
import functools
import gzip
import ipaddress
import json
import os
import re
import shutil
import subprocess
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CODEX = ROOT / "node_modules" / ".bin" / "codex"
PYTHON = ROOT / ".venv" / "bin" / "python"
SCRIPTS = ROOT / "runs" / "harness" / "scripts"
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
        probe = subprocess.run(
            ["unshare", "-n", "sh", "-c", "ip link set lo up"], capture_output=True, timeout=20, check=False
        )
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
    scripts: Path = SCRIPTS,
    script: str | None = None,
    budget: Mapping[str, Any] | None = None,
    price: Mapping[str, Any] | None = None,
    key: str = FAKE_KEY,
    debug: bool = True,
    prefix: Sequence[str] = (),
) -> CliRun:
    """Run ``python -m runs.harness run-case CASE_ID`` against the scripted model in ``scripts``
    (``script`` names the file stem; default the case id), with ``OPENAI_API_KEY=key`` in its
    environment, and collect the result (``--out``), the trace artifact (``--trace-out``) and the
    process output. ``prefix`` is put before the interpreter inside the namespace (e.g. strace).

    Raises ``AssertionError`` when the process fails or writes no result.
    """
    out = tmp_path / "result.json"
    trace = tmp_path / "trace.ndjson.gz"
    command = [str(PYTHON), "-m", "runs.harness", "run-case", case_id, "--scripts", str(scripts)]
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
    environment = {name: os.environ[name] for name in ("PATH", "LANG", "LC_ALL", "TZ") if name in os.environ}
    environment.update({"OPENAI_API_KEY": key, "PYTHONDONTWRITEBYTECODE": "1"})
    completed = subprocess.run(
        argv, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=CLI_TIMEOUT, check=False
    )
    assert completed.returncode == 0, f"run-case exited {completed.returncode}:\n{completed.stderr[-3000:]}"
    assert out.exists(), f"run-case wrote no result:\n{completed.stderr[-3000:]}"
    text = out.read_text()
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
    )


def failing_checks(observation: Mapping[str, Any]) -> set[str]:
    """``{"group/check-id", ...}`` of every failed check of an observation."""
    return {
        f"{group}/{check['id']}"
        for group in CHECK_GROUPS
        for check in observation[group]["checks"]
        if not check["passed"]
    }


def bundle_id() -> str:
    """The live bundle id a nightly run of the codex candidate alone gets (``runs.reports``)."""
    import evalhub
    from runs.reports import live_bundle_identity

    return live_bundle_identity(
        runner_version=evalhub.__version__, seed="e2e-scripted", candidates=[reference_candidate()]
    )


def trace_expectations() -> dict[str, Mapping[str, Any]]:
    """Each bundled case's ``assertions.trace`` — what the scorer gets from the stored cases."""
    return {
        case["id"]: case["assertions"]["trace"]
        for case in workflow_cases()
        if isinstance(case.get("assertions", {}).get("trace"), dict)
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
    return [key[i : i + length] for i in range(0, len(key) - length + 1)]
