"""The executor contract: execute one schedule entry and return an observation.

Executors follow Django's backend pattern (docs/STYLE.md §5): a base class with one method to
override and one error type with a ``retryable`` flag. The orchestration around them
(qualification, cost ceiling, retry once, fallback observation, redaction) lives in
``runs.execution`` and is written once.

Besides :meth:`Executor.execute`, an executor class may answer what the app asks of every
registered executor through the registry (``runs.executors``): :meth:`Executor.system_checks`
(``manage.py check``), :meth:`Executor.runtime_problems` (``/health/``) and
:meth:`Executor.remove_abandoned_work` (what a killed process left). The defaults do nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runs.executors.candidate import CandidateSpec
from runs.executors.providers import ProviderConfig
from runs.executors.trace import TraceArtifact

if TYPE_CHECKING:
    from django.core.checks import CheckMessage


class InfrastructureError(Exception):
    """A failure of the machinery around the model, not of the model.

    ``code`` is a short machine-readable reason (``runtime_missing``, ``provider_http_503``...),
    ``retryable`` says whether one more attempt may succeed, ``message`` is for people and is
    redacted before it is stored. ``cost_usd`` is what the failed attempt was billed, if known.
    ``retry_after_s`` is how long the provider asked to wait before a retry (a ``Retry-After``
    header), if it said; the orchestration waits up to a cap and otherwise does not retry.
    """

    def __init__(
        self,
        code: str,
        retryable: bool,
        message: str,
        *,
        cost_usd: float | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.retryable = retryable
        self.message = message
        self.cost_usd = cost_usd
        self.retry_after_s = retry_after_s


class ArtifactSink:
    """Where an executor leaves what one attempt recorded besides its observation.

    The orchestration gives every attempt a fresh sink and, once the attempt is over — whether it
    returned an observation or raised — stores what the sink holds with the attempt's row
    (``runs.models.TraceArtifact``). An executor calls :meth:`store_trace` with the
    :class:`runs.executors.trace.TraceArtifact` of its recorder (already scrubbed of secrets); a
    second call replaces the first.
    """

    def __init__(self) -> None:
        self.trace: TraceArtifact | None = None

    def store_trace(self, artifact: TraceArtifact) -> None:
        """Keep ``artifact`` for the orchestration to store."""
        self.trace = artifact


@dataclass(frozen=True)
class ExecutionRequest:
    """Everything an executor may use for one execution.

    ``entry`` is the reference schedule entry document, ``candidate`` the candidate snapshotted
    in the schedule, parsed (:class:`runs.executors.candidate.CandidateSpec`), ``case`` the workflow case document plus evalhub's ``prompt``
    (the case's task prompt, ``""`` when it has none), ``environment`` only the candidate's
    required variables (name → value) — executors never see the rest of the process
    environment. ``artifacts`` is the attempt's :class:`ArtifactSink` (``None`` when nothing
    will store artifacts, e.g. outside the orchestration). ``provider`` is a model provider
    profile that replaces the candidate's own for this run — the scripted lane's scripted model
    — or ``None``.
    """

    run_id: int
    entry: Mapping[str, Any]
    candidate: CandidateSpec
    case: Mapping[str, Any]
    environment: Mapping[str, str] = field(default_factory=dict)
    attempt: int = 1
    artifacts: ArtifactSink | None = None
    provider: ProviderConfig | None = None


class Executor:
    """Base class: subclasses implement :meth:`execute`."""

    #: Shown in messages and pages, e.g. "codex app-server".
    runtime_name: str = "runtime"

    def execute(self, request: ExecutionRequest) -> dict[str, Any]:
        """Run one entry within its budget and return the observation document.

        Returns a ``paperclip.runner.workflow-observation.v1`` dict. Raises
        :class:`InfrastructureError` when the runtime or provider failed; any other exception is
        treated by the orchestration as an infrastructure failure of the executor itself.
        """
        raise NotImplementedError

    # -- what the app asks of every registered executor (runs.executors calls these) ----------------
    # Classmethods: they describe what the executor needs on this machine, not one execution. The
    # registry calls each distinct implementation once, so executors sharing one (the live ones)
    # report once.

    @classmethod
    def system_checks(cls) -> list[CheckMessage]:
        """What ``manage.py check`` should say about this executor's configuration and what it
        needs installed (Django check messages with stable ids); none by default."""
        return []

    @classmethod
    def runtime_problems(cls) -> list[str]:
        """One sentence per runtime this executor needs that is missing or at another version
        (for ``/health/``); none by default."""
        return []

    @classmethod
    def remove_abandoned_work(cls) -> list[Path]:
        """Remove what executions of this executor left behind when their process was killed
        (folders of a process that is gone) and return what was removed; nothing by default."""
        return []
