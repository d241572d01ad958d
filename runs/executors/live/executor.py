"""Live executors: one entry through a real agent runtime.

:class:`LiveExecutor` is the shell around the harness: it reads what the harness must not (the
provider profiles and runtime paths in the settings, the candidate's price: the price table, then
the prices the genai-prices package ships — ``candidates.prices``),
then hands everything to :func:`runs.executors.live.session.run_live_execution` as arguments. A
subclass names its driver (``runs.executors.live.drivers.*``) and nothing else — the harness core
has no runtime-specific code.

It also answers for the live executors what the registry asks of every executor: the system
checks of the provider profiles and runtimes (evalhub.E006, E007, W001), the runtimes missing for
``/health/``, and the removal of the folders a killed process left.

This module and ``__main__`` are the two parts of the package that read settings (and import
Django and ``candidates``); the import-linter contract on the harness names them.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from django.core.checks import CheckMessage, Error, Warning
from django.utils.module_loading import import_string

from candidates.prices import quoted_price
from evalhub.conf import evalhub_setting
from runs.executors.base import ExecutionRequest, Executor, InfrastructureError
from runs.executors.candidate import CandidateSpec
from runs.executors.live.contracts import Driver
from runs.executors.live.pricing import Price
from runs.executors.live.runtimes import RUNTIMES
from runs.executors.providers import ProviderConfig, ProviderSettingsError, provider_for, provider_profiles, scripted_provider


def configured_profiles() -> dict[str, ProviderConfig]:
    """The model provider profiles in the settings (``MODEL_PROVIDERS`` overlaid with
    ``EVALHUB_MODEL_PROVIDERS``), validated. Raises ``ProviderSettingsError``."""
    return provider_profiles(evalhub_setting("MODEL_PROVIDERS") or {}, evalhub_setting("MODEL_PROVIDERS_JSON") or "")


def configured_provider(candidate: CandidateSpec) -> ProviderConfig:
    """The profile the settings give ``candidate``. Raises ``ProviderSettingsError``."""
    return provider_for(candidate, profiles=configured_profiles(), default_profiles=evalhub_setting("DEFAULT_PROVIDER_PROFILES") or {})


#: The value every required variable takes against evalhub's scripted model, which reads none.
#: Random, and new in each process: evalhub scrubs a credential in use wherever it appears, eight
#: characters at a time (evalhub/secrets.py, FRAGMENT_LENGTH), so a key spelt in words would scrub
#: those words out of the evidence ("scripted-model:", "evalhub-" in a workspace path).
SCRIPTED_MODEL_KEY = secrets.token_urlsafe(24)


def scripted_provider_for(candidate: CandidateSpec, driver_class: type[Driver], base_url: str) -> ProviderConfig:
    """The scripted model at ``base_url`` as ``candidate``'s provider (see
    ``runs.executors.providers.scripted_provider``), speaking the wire API its runtime needs: the one of the
    candidate's configured profile when ``driver_class`` speaks it (opencode candidates keep
    OpenRouter's Chat Completions), else the driver's first ``wire_apis``. The key variable is
    the profile's when the candidate requires it, else the candidate's first required variable."""
    names = list(candidate.required_environment)
    wire_apis = tuple(getattr(driver_class, "wire_apis", None) or ("responses",))
    try:
        profile: ProviderConfig | None = configured_provider(candidate)
    except ProviderSettingsError:
        profile = None
    wire_api = profile.wire_api if profile is not None and profile.wire_api in wire_apis else wire_apis[0]
    env_key = profile.env_key if profile is not None and profile.env_key in names else (names[0] if names else None)
    return scripted_provider(base_url, wire_api=wire_api, env_key=env_key)


def driver_options(driver_class: type[Driver]) -> dict[str, Any]:
    """The driver's extra keyword arguments: ``binaries`` (``{runtime key: configured path}``) for
    a driver that runs other executables besides its own (``extra_runtimes``: codex-acp runs codex)."""
    extra = tuple(getattr(driver_class, "extra_runtimes", ()) or ())
    return {"binaries": {key: configured_binary(key) for key in extra}} if extra else {}


def configured_binary(runtime_key: str) -> str | None:
    """The executable path the settings give a runtime (``RUNTIME_BINARIES``), or ``None``."""
    value = (evalhub_setting("RUNTIME_BINARIES") or {}).get(runtime_key)
    return str(value) if value else None


def price_for(model: str) -> Price | None:
    """The price of ``model`` (``candidates.prices.quoted_price``: the price table, then the
    prices genai-prices ships), or ``None`` when neither has one (an unknown cost, never $0)."""
    quoted = quoted_price(model)
    if quoted is None:
        return None
    return Price(
        model=quoted.model,
        input=quoted.input_usd,
        cached_input=quoted.cached_input_usd,
        output=quoted.output_usd,
        reasoning=quoted.reasoning_usd,
        source=quoted.source,
    )


def provider_checks() -> list[CheckMessage]:
    """evalhub.E006: the configured model provider profiles are malformed; evalhub.E007: the
    profile Codex candidates use speaks another wire API than the Responses API."""
    problems: list[CheckMessage] = []
    try:
        profiles = configured_profiles()
    except ProviderSettingsError as exc:
        profiles = {}
        problems.append(
            Error(
                str(exc), hint="Fix EVALHUB_MODEL_PROVIDERS (a JSON object: {profile: {base_url, wire_api, env_key}}).", id="evalhub.E006"
            )
        )
    codex_profile = profiles.get((evalhub_setting("DEFAULT_PROVIDER_PROFILES") or {}).get("codex", ""))
    if codex_profile is not None and codex_profile.wire_api != "responses":
        problems.append(
            Error(
                f"model provider profile {codex_profile.profile!r}, which Codex candidates use, has wire_api "
                f"{codex_profile.wire_api!r}; codex app-server speaks only the Responses API.",
                hint='Set its "wire_api" to "responses" in EVALHUB_MODEL_PROVIDERS.',
                id="evalhub.E007",
            )
        )
    return problems


def runtime_statuses(keys: Iterable[str] | None = None) -> list[tuple[str, bool, str]]:
    """``(label, installed at its pinned version?, message)`` of the runtimes ``keys`` (keys of
    ``RUNTIMES``; every runtime by default), each at its configured path."""
    chosen = RUNTIMES.values() if keys is None else [RUNTIMES[key] for key in keys]
    return [(runtime.label, *runtime.status(configured_binary(runtime.key))) for runtime in chosen]


class LiveExecutor(Executor):
    """Runs one schedule entry through the runtime named by :attr:`driver_path`."""

    #: Dotted path of the :class:`runs.executors.live.contracts.Driver` subclass.
    driver_path: str = ""

    def driver_factory(self, candidate: CandidateSpec) -> type[Driver]:
        """The driver class for ``candidate`` (imported lazily, so a broken driver fails one
        execution, not the app). Raises ``InfrastructureError`` when the candidate names a
        runtime profile the driver does not have."""
        return import_string(self.driver_path)

    # -- what the registry asks of every executor (one implementation for the three live ones) ----

    @classmethod
    def system_checks(cls) -> list[CheckMessage]:
        """The provider profiles (:func:`provider_checks`), then evalhub.W001 for each runtime not
        installed at its pinned version. A missing runtime is a warning, not an error: a machine
        that only plans, scores and reports never starts one, and an execution that needs it
        reports ``runtime_missing`` itself."""
        problems = provider_checks()
        for label, ok, message in runtime_statuses():
            if not ok:
                problems.append(
                    Warning(f"{label} live executions cannot run: {message}", hint="Run `make install` (npm ci).", id="evalhub.W001")
                )
        return problems

    @classmethod
    def runtime_problems(cls) -> list[str]:
        """``<label>: <why>`` for each runtime not installed at its pinned version."""
        return [f"{label}: {message}" for label, ok, message in runtime_statuses() if not ok]

    @classmethod
    def remove_abandoned_work(cls) -> list[Path]:
        """The execution folders of processes that are gone (``session.remove_abandoned_workdirs``)."""
        from runs.executors.live.session import remove_abandoned_workdirs

        return remove_abandoned_workdirs()

    def execute(self, request: ExecutionRequest) -> dict[str, Any]:
        """Run the entry and return its observation (see :class:`Executor`).

        The model provider is ``request.provider`` when the run gives one (the scripted lane),
        else the candidate's configured profile. Raises :class:`InfrastructureError`:
        ``provider_not_configured`` (not retryable) when the candidate's profile is missing or
        malformed, ``provider_key_missing`` (not retryable) when the profile's key variable is not
        among the candidate's required variables, ``runtime_missing`` (not retryable) when the
        runtime is not installed, and whatever the runtime or provider raised (see
        ``run_live_execution``).
        """
        from runs.executors.live.session import run_live_execution

        candidate, case = request.candidate, request.case
        provider = request.provider
        if provider is None:
            try:
                provider = configured_provider(candidate)
            except ProviderSettingsError as exc:
                raise InfrastructureError("provider_not_configured", False, str(exc)) from None
        if provider.env_key and provider.env_key not in request.environment:
            raise InfrastructureError(
                "provider_key_missing",
                False,
                f"model provider profile {provider.profile!r} reads its key from {provider.env_key}, which is not "
                f"among candidate {candidate.id}'s required environment; add it to the candidate's qualification",
            )
        environment = dict(request.environment)
        if provider.scripted:
            # evalhub's scripted model reads no key: a real one must never travel to it (a scripted
            # run repeated or taken over on another worker would send that worker's key to an
            # address that may by then be anyone's).
            environment = dict.fromkeys(environment, SCRIPTED_MODEL_KEY)
        driver_class = self.driver_factory(candidate)
        runtime = RUNTIMES[driver_class.runtime_key]
        binary = configured_binary(runtime.key)
        for key in (runtime.key, *getattr(driver_class, "extra_runtimes", ())):
            if RUNTIMES[key].resolve(configured_binary(key)) is None:
                raise InfrastructureError("runtime_missing", False, RUNTIMES[key].missing_message(configured_binary(key)))
        sink = request.artifacts
        result = run_live_execution(
            execution_id=str(request.entry.get("executionId", "")),
            case=case,
            candidate=candidate,
            prompt=str(case.get("prompt") or ""),
            provider=provider,
            driver_factory=driver_class,
            binary=binary,
            required_environment=environment,
            allowlist=tuple(evalhub_setting("RUNTIME_ENV_ALLOWLIST") or ()),
            # A scripted model bills nothing (the session prices it at a known $0), whatever the real model costs.
            price=None if provider.scripted else price_for(candidate.model),
            trace_cap_bytes=int(evalhub_setting("TRACE_CAP_BYTES")),
            attempt=request.attempt,
            artifact_sink=sink.store_trace if sink is not None else None,
            driver_options=driver_options(driver_class),
        )
        return result.observation


class CodexAppServerExecutor(LiveExecutor):
    """A schedule entry through the real ``codex app-server`` (JSON-RPC over stdio)."""

    runtime_name = "codex app-server"
    driver_path = "runs.executors.live.drivers.codex.CodexAppServerDriver"


class OpencodeServerExecutor(LiveExecutor):
    """A schedule entry through the real ``opencode serve`` (HTTP and server-sent events)."""

    runtime_name = "opencode serve"
    driver_path = "runs.executors.live.drivers.opencode.OpencodeServerDriver"


class AcpxRuntimeExecutor(LiveExecutor):
    """A schedule entry through an ACP agent (Agent Client Protocol over stdio), by the candidate's
    ``qualification.profile``: ``claude`` (claude-agent-acp) or ``codex`` (codex-acp)."""

    runtime_name = "ACP agent"
    driver_path = "runs.executors.live.drivers.acp.AcpDriver"

    def driver_factory(self, candidate: CandidateSpec) -> type[Driver]:
        """The ACP driver bound to the candidate's agent profile. Raises ``InfrastructureError``
        (``runtime_start_failed``, not retryable) for a candidate without a known profile."""
        try:
            return import_string(self.driver_path).for_profile(candidate.profile)
        except ValueError as exc:
            raise InfrastructureError("runtime_start_failed", False, f"candidate {candidate.id}: {exc}") from None
