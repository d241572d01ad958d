"""Live executors: one entry through a real agent runtime (issue 4, upstream-spec §6).

:class:`LiveExecutor` is runtime-neutral: it resolves the candidate's model provider profile and
price, then hands everything to :func:`runs.harness.session.run_live_execution`. A subclass names
its driver (``runs.harness.drivers.*``) and nothing else — the harness core has no
runtime-specific code.
"""

from __future__ import annotations

from typing import Any

from django.utils.module_loading import import_string

from evalhub.conf import evalhub_setting
from runs.executors.base import ExecutionRequest, Executor, InfrastructureError
from runs.harness.providers import ProviderSettingsError, provider_for


class LiveExecutor(Executor):
    """Runs one schedule entry through the runtime named by :attr:`driver_path`."""

    #: Dotted path of the :class:`runs.harness.contracts.Driver` subclass.
    driver_path: str = ""

    def driver_factory(self) -> Any:
        """The driver class (imported lazily, so a broken driver fails one execution, not the app)."""
        return import_string(self.driver_path)

    def execute(self, request: ExecutionRequest) -> dict[str, Any]:
        """Run the entry and return its observation (see :class:`Executor`).

        Raises :class:`InfrastructureError`: ``provider_not_configured`` (not retryable) when the
        candidate's profile is missing or malformed, ``provider_key_missing`` (not retryable) when
        the profile's key variable is not among the candidate's required variables, and whatever
        the runtime or provider raised (see ``run_live_execution``).
        """
        from runs.harness.pricing import price_for
        from runs.harness.session import run_live_execution

        candidate, case = request.candidate, request.case
        try:
            provider = provider_for(candidate)
        except ProviderSettingsError as exc:
            raise InfrastructureError("provider_not_configured", False, str(exc)) from None
        if provider.env_key and provider.env_key not in request.environment:
            raise InfrastructureError(
                "provider_key_missing",
                False,
                f"model provider profile {provider.profile!r} reads its key from {provider.env_key}, which is not "
                f"among candidate {candidate.get('id')}'s required environment; add it to the candidate's qualification",
            )
        sink = getattr(request, "artifacts", None)
        result = run_live_execution(
            execution_id=str(request.entry.get("executionId", "")),
            case=case,
            candidate=candidate,
            prompt=str(case.get("prompt") or ""),
            provider=provider,
            driver_factory=self.driver_factory(),
            required_environment=dict(request.environment),
            allowlist=tuple(evalhub_setting("RUNTIME_ENV_ALLOWLIST") or ()),
            price=price_for(str(candidate.get("model", ""))),
            trace_cap_bytes=int(evalhub_setting("TRACE_CAP_BYTES")),
            attempt=request.attempt,
            artifact_sink=sink.store_trace if sink is not None else None,
        )
        return result.observation


class CodexAppServerExecutor(LiveExecutor):
    """A schedule entry through the real ``codex app-server`` (JSON-RPC over stdio)."""

    runtime_name = "codex app-server"
    driver_path = "runs.harness.drivers.codex.CodexAppServerDriver"
