"""One live execution, assembled: control plane + MCP server + driver + case driver + observer.

Runtime-neutral and free of the ORM, so the executor (inside Django) and the DB-free command line
(``python -m runs.executors.live``, used by the end-to-end tests inside a loopback-only network
namespace) run exactly the same code. The driver is the only runtime-specific part; it is passed
in as a factory.

The runtime's environment is a small allow-list of host variables (``RUNTIME_ENV_ALLOWLIST``) plus
the candidate's required variables — nothing else of the host reaches it. The exact values of
those variables are scrubbed, together with secret-shaped strings, from every trace frame, every
message and the observation before anything leaves this module.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalhub.credentials import reserved_name_reason
from evalhub.secrets import redact, redact_data
from runs.executors.base import InfrastructureError
from runs.executors.candidate import CandidateSpec
from runs.executors.live.contracts import Driver, EventLog
from runs.executors.providers import ProviderConfig
from runs.executors.trace import TraceArtifact

#: Provider failure codes a live driver reports → retryable? Only the infrastructure's transient
#: failures (server errors, rate limits, dropped streams, timeouts, an unreachable endpoint) may pass
#: on a second attempt. A request the provider refused — 400, 413, 422, a context window exceeded,
#: quota, authentication, an unknown model — is the candidate's or the request's fault: sending it
#: again spends money and fails the same way.
PROVIDER_FAILURES: dict[str, bool] = {
    "provider_rate_limited": True,
    "provider_stream_dropped": True,
    "provider_timeout": True,
    "provider_unreachable": True,
    # The reference's catch-all for a failed turn without a recognised code (its own retry rule).
    "live_provider_execution_failed": True,
    "provider_quota_exhausted": False,
    "provider_auth_refused": False,
    "provider_unknown_model": False,
    "provider_bad_request": False,
    "provider_request_too_large": False,
    "provider_context_window_exceeded": False,
}
#: ``provider_http_<status>`` codes that are transient: request timeout, too early, rate limited.
_RETRYABLE_PROVIDER_4XX = {408, 425, 429}
_PROVIDER_HTTP = re.compile(r"provider_http_(?P<status>[0-9]{3})")


def provider_failure_retryable(code: str) -> bool:
    """Whether a driver's provider failure ``code`` may succeed on another attempt.

    ``provider_http_<status>``: 5xx, 408, 425 and 429 yes; every other status (400, 413, 422 ...)
    no. Named codes as in :data:`PROVIDER_FAILURES`. A code this table does not know is not
    retried: a retry must be earned by a known transient failure, never given by default.
    """
    match = _PROVIDER_HTTP.fullmatch(str(code))
    if match is not None:
        status = int(match["status"])
        return status >= 500 or status in _RETRYABLE_PROVIDER_4XX
    return PROVIDER_FAILURES.get(str(code), False)


DriverFactory = Callable[..., Driver]

#: The well-behaved scripted-model scripts, one per workflow case (``make demo-live``, tests).
SCRIPTS_DIR = Path(__file__).resolve().parent / "scripts"

#: evalhub's standing instructions to every agent under test (the reference's common preamble:
#: typed tools only, no REST, end with brief prose). The per-case task prompt is data.
INSTRUCTIONS = (
    "You are working on a task board through evalhub's typed tools (the `evalhub` MCP server). "
    "Use only those tools to read and change the board; there is no REST API and no other way to "
    "reach it. Follow the task's steps exactly, call each tool only as often as the task says, fix "
    "a call the board refuses in the same turn using the problems it lists, and end every turn with "
    "a brief plain-prose message."
)


#: An execution's own folder is ``<tmp>/evalhub-live-<pid>-<random>``: the pid of the process
#: running it, so a folder left by a killed process (``kill -9``: no ``finally``) can be told apart.
WORKDIR_PREFIX = "evalhub-live-"
_OWNED_WORKDIR = re.compile(rf"^{re.escape(WORKDIR_PREFIX)}(\d+)-")


def remove_abandoned_workdirs(tmp: Path | None = None) -> list[Path]:
    """Remove the execution folders under ``tmp`` (the system's temporary folder by default) whose
    owner process is gone, and return them. A folder whose pid still runs (this process's own, a
    live worker's, or a reused pid) is left alone, and so is a folder without a pid (an older
    evalhub's, whose owner cannot be known)."""
    removed = []
    base = Path(tempfile.gettempdir()) if tmp is None else tmp
    for folder in base.glob(f"{WORKDIR_PREFIX}*"):
        match = _OWNED_WORKDIR.match(folder.name)
        if match is None or not folder.is_dir() or _alive(int(match.group(1))):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def runtime_environment(host: Mapping[str, str], required: Mapping[str, str], allowlist: Sequence[str], *, home: Path) -> dict[str, str]:
    """The runtime's whole environment: allow-listed host variables, the candidate's required
    variables, and a private ``HOME``/``TMPDIR`` under the execution's directory.

    A required variable evalhub reserves (:func:`evalhub.credentials.reserved_name_reason`:
    ``DJANGO_SECRET_KEY``, ``DATABASE_URL``, ``LD_PRELOAD``, ``PATH``, ...) is never copied, even
    when a row saved around validation (``loaddata``, ``objects.update``) names it: the model
    refuses such names, and this is the second line."""
    environment = {name: host[name] for name in allowlist if name in host}
    environment.update({name: value for name, value in required.items() if value and reserved_name_reason(name) is None})
    environment["HOME"] = str(home)
    environment["TMPDIR"] = str(home)
    return environment


@dataclass
class LiveResult:
    """What one live execution produced: the observation (already scrubbed), the trace artifact
    (``runs.executors.trace.TraceArtifact`` or ``None``), whether the model endpoint was
    scripted, and ``timings`` in ms: ``startMs`` (the runtime's start-up until it is ready for the
    first turn), ``firstTurnMs`` (the first turn, prompt to end), ``wallMs`` (the whole case)."""

    observation: dict[str, Any]
    artifact: TraceArtifact | None
    scripted: bool
    timings: dict[str, int | None] = field(default_factory=dict)


def run_live_execution(
    *,
    execution_id: str,
    case: Mapping[str, Any],
    candidate: CandidateSpec,
    prompt: str,
    provider: ProviderConfig,
    driver_factory: DriverFactory,
    required_environment: Mapping[str, str],
    binary: str | None = None,
    host_environment: Mapping[str, str] | None = None,
    allowlist: Sequence[str] = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ"),
    price: Any = None,
    trace_cap_bytes: int = 8 * 1024 * 1024,
    attempt: int = 1,
    artifact_sink: Callable[[TraceArtifact], None] | None = None,
    workdir: Path | None = None,
    driver_options: Mapping[str, Any] | None = None,
) -> LiveResult:
    """Run one case for one candidate through a real runtime and return its observation.

    ``case`` is the workflow case document (``id``, ``title``, ``steps``, ``assertions``),
    ``candidate`` the candidate (its ``budget`` in ms / USD / tokens), ``prompt`` the case's
    task prompt, ``required_environment`` the candidate's variables (name → value; values are
    scrubbed everywhere), ``price`` a ``runs.executors.live.pricing.Price`` or ``None`` (unknown cost).
    ``binary`` is the runtime's configured executable (``None``: the one ``make install`` put in
    ``node_modules/.bin``). ``artifact_sink`` receives the trace artifact even when the execution
    then fails. ``driver_options`` are extra keyword arguments for the driver (the executor's
    ``driver_options``: the paths of other executables it runs).

    Raises :class:`InfrastructureError` for failures of the runtime or the provider (codes
    ``runtime_missing``, ``runtime_start_failed``, ``runtime_crashed``, ``mcp_unavailable``,
    ``provider_*``, ``turn_timeout``); any other exception is the orchestration's
    ``executor_crashed``. Candidate failures are observations, not exceptions.
    """
    from runs.executors.live.budgets import BudgetGuard
    from runs.executors.live.case_driver import case_callbacks, run_case
    from runs.executors.live.controlplane import ControlPlane
    from runs.executors.live.mcp_server import serve
    from runs.executors.live.observe import observe
    from runs.executors.live.pricing import cost_usd
    from runs.executors.trace import TraceRecorder, gunzip, summarize_ndjson

    secrets = [value for value in required_environment.values() if value]

    def scrub(text: str) -> str:
        return redact(text, extra_values=secrets)

    host = os.environ if host_environment is None else host_environment
    own_dir = workdir is None
    root = Path(tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-")) if own_dir else Path(workdir)
    events = EventLog()
    recorder = TraceRecorder(scrub=scrub, cap_bytes=trace_cap_bytes)
    control_plane = ControlPlane(execution_id=execution_id, case=case, prompt=prompt, events=events)
    if price is None and provider.scripted:
        # A scripted endpoint bills nothing: its cost is a known 0, not an unknown price.
        from decimal import Decimal

        from runs.executors.live.pricing import Price

        zero = Decimal(0)
        price = Price(model=candidate.model, input=zero, cached_input=zero, output=zero, reasoning=zero, source="scripted model")
    guard = BudgetGuard(candidate.budget, price=price, cost_of=cost_usd)
    endpoint = None
    driver = None
    artifact = None
    try:
        home = root / "home"
        home.mkdir(parents=True, exist_ok=True)
        (root / "work").mkdir(exist_ok=True)
        endpoint = serve(control_plane)
        callbacks = case_callbacks(case, events=events, budget_guard=guard)
        driver = driver_factory(
            binary=binary,
            callbacks=callbacks,
            instructions=INSTRUCTIONS,
            workdir=root,
            provider=provider,
            model=candidate.model,
            reasoning_effort=candidate.reasoning_effort,
            mcp_url=endpoint.url,
            environment=runtime_environment(host, required_environment, allowlist, home=home),
            events=events,
            trace=recorder,
            case_id=case.get("id"),
            execution_id=execution_id,
            # Approval requests reach the case driver only when a step decides one.
            approvals="prompt" if any(step.get("kind") == "permission_decision" for step in case.get("steps", [])) else "auto",
            **dict(driver_options or {}),
        )
        evidence = run_case(
            execution_id=execution_id,
            case=case,
            candidate=candidate,
            prompt=prompt,
            driver=driver,
            control_plane=control_plane,
            events=events,
            budget_guard=guard,
            trace=recorder,
            attempt=attempt,
            callbacks=callbacks,
        )
        # The runtime keeps talking after the last turn (opencode's events, log lines): stop it,
        # then take the trace once, so the observation's traceRef is the stored artifact's digest.
        driver.close()
        artifact = _artifact(recorder, artifact_sink)
        evidence.trace = summarize_ndjson(gunzip(artifact.data))
        _raise_for_infrastructure(evidence, driver, guard)
        observation = redact_data(observe(evidence, scripted=provider.scripted), extra_values=secrets)
        first = evidence.turns[0] if evidence.turns else None
        timings = {
            "startMs": evidence.start_ms,
            "firstTurnMs": first.ended_ms - first.started_ms if first is not None else None,
            "wallMs": evidence.wall_ms,
            # the driver's own start-up phases, when it measures them (opencode: readyMs, mcpMs, sessionMs)
            **{f"{phase}Ms": int(seconds * 1000) for phase, seconds in (getattr(driver, "timings", None) or {}).items()},
        }
        return LiveResult(observation=observation, artifact=artifact, scripted=provider.scripted, timings=timings)
    except InfrastructureError as error:
        if artifact is None:
            _artifact(recorder, artifact_sink)
        error.message = scrub(error.message)[:1000]
        error.args = (error.message,)
        raise
    except BaseException:
        if artifact is None:
            _artifact(recorder, artifact_sink)
        raise
    finally:
        if driver is not None:
            driver.close()
        if endpoint is not None:
            endpoint.close()
        if own_dir:
            shutil.rmtree(root, ignore_errors=True)


def _raise_for_infrastructure(evidence: Any, driver: Driver, guard: Any) -> None:
    """A turn that failed on the provider's side, or ran out of time, is not the candidate's
    failure: raise it as an infrastructure failure with its own code, as the reference's live executor does."""
    spent = getattr(guard, "cost_usd", None)
    for turn in evidence.turns:
        if turn.status == "failed":
            # A failed turn without a recognised provider code is the reference's catch-all.
            code = turn.error_code or "live_provider_execution_failed"
            raise InfrastructureError(
                code,
                provider_failure_retryable(code),
                f"{driver.runtime_name}: the model provider failed: {turn.error or turn.error_code}",
                cost_usd=spent,
            )
        if turn.status == "timed_out":
            raise InfrastructureError(
                "turn_timeout",
                True,
                f"{driver.runtime_name}: a turn ran past the candidate's maxLatencyMs "
                f"({turn.ended_ms - turn.started_ms} ms) and was interrupted",
                cost_usd=spent,
            )


def _artifact(recorder: Any, sink: Callable[[TraceArtifact], None] | None) -> TraceArtifact:
    artifact = recorder.artifact()
    if sink is not None and artifact is not None:
        sink(artifact)
    return artifact
