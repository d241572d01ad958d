"""The candidate spec: a schedule's candidate snapshot, parsed once, frozen and typed.

A schedule stores each candidate as the reference's candidate document (``candidates.models.
Candidate.to_document``), and that JSON is the schema: stored schedules are read as they are.
What an execution needs of it — who the candidate is, its qualification, its budget — is parsed
from it once, where the execution reads its snapshot (``runs.execution.qualify``), and handed on typed:
in :class:`runs.executors.base.ExecutionRequest`, to the live harness, to the orchestration's
attempt and cost rules. The four budget limits sit side by side in :class:`Budget`, with the one
set of defaults every reader shares.

Pure (no settings, no ORM): the live harness imports it too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

#: The calls an execution may make when its budget has no usable ``maxAttempts``: the reference's one retry.
DEFAULT_MAX_ATTEMPTS = 2
#: A turn's timeout when the budget has no usable ``maxLatencyMs``: three minutes.
DEFAULT_MAX_LATENCY_MS = 180_000


class CandidateSpecError(ValueError):
    """A candidate snapshot whose shape cannot be read; the message names the field and what it must be."""


def _whole(value: Any) -> int | None:
    """``value`` as a whole number ≥ 1, or ``None`` (absent, text, a boolean, zero, negative, not finite)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    number = int(value)
    return number if number >= 1 else None


def _amount(value: Any) -> float | int | None:
    """``value`` as a finite number ≥ 0 (kept as the JSON number it was), or ``None``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value if value >= 0 else None


@dataclass(frozen=True)
class Budget:
    """A candidate's four limits: ``max_latency_ms`` per turn (ms), ``max_attempts`` executor
    calls per execution, ``max_cost_usd`` per attempt (USD, the JSON number as stored),
    ``max_total_tokens`` per attempt (input + output + reasoning, cached input excluded).

    The defaults are the one set every reader uses: a turn of :data:`DEFAULT_MAX_LATENCY_MS`,
    :data:`DEFAULT_MAX_ATTEMPTS` calls, and no cost or token limit (``None``: never reached, and
    an attempt reserves $0 against the run's ceiling).
    """

    max_latency_ms: int = DEFAULT_MAX_LATENCY_MS
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    max_cost_usd: float | None = None
    max_total_tokens: float | None = None

    @classmethod
    def from_document(cls, document: Mapping[str, Any] | None) -> Budget:
        """The budget of a reference budget document (``{maxLatencyMs, maxAttempts, maxCostUsd,
        maxTotalTokens}``; ``None`` or ``{}``: every default).

        A limit that is absent, ``null`` or not a usable number (text, a boolean, NaN, out of
        range) takes its default, as every reader of the snapshot always did: the catalog refuses
        such values when they are written (``candidates.services``), and a schedule stored before
        must still run. Raises :class:`CandidateSpecError` when ``document`` is not an object.
        """
        if document is None:
            return cls()
        if not isinstance(document, Mapping):
            raise CandidateSpecError(f"budget must be an object of limits, not {type(document).__name__}")
        tokens = _amount(document.get("maxTotalTokens"))
        return cls(
            max_latency_ms=_whole(document.get("maxLatencyMs")) or DEFAULT_MAX_LATENCY_MS,
            max_attempts=_whole(document.get("maxAttempts")) or DEFAULT_MAX_ATTEMPTS,
            max_cost_usd=_amount(document.get("maxCostUsd")),
            max_total_tokens=tokens,
        )


@dataclass(frozen=True)
class CandidateSpec:
    """One candidate of a schedule, as an execution uses it.

    ``id`` (``codex-luna``), ``slot_id``, ``adapter`` (the executor registry key), ``provider``
    (``codex``, ``opencode``, ``acpx``), ``model``, ``tier`` and ``reasoning_effort`` as stored
    (``""``/``None`` when absent); the qualification's ``required_environment`` (variable names,
    never values) and ``profile`` (a model provider profile, or the ACP agent of an ``acpx``
    candidate; ``None`` when the candidate uses its provider's default); its :class:`Budget`.
    ``document`` is the snapshot itself, read-only, for what echoes it into an observation (the
    reference observation repeats the candidate's id, provider and budget as stored).
    """

    id: str
    adapter: str = ""
    provider: str = ""
    model: str = ""
    slot_id: str = ""
    tier: str = ""
    reasoning_effort: str | None = None
    required_environment: tuple[str, ...] = ()
    profile: str | None = None
    budget: Budget = field(default_factory=Budget)
    document: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_snapshot(cls, document: Any) -> CandidateSpec:
        """The spec of a candidate document (``{id, slotId, adapter, provider, model, tier,
        reasoningEffort, qualification: {requiredEnvironment, profile}, budget}``).

        Only ``id`` is required; an absent field takes its default (see :class:`Budget` for the
        limits). Raises :class:`CandidateSpecError`, naming the field, when the document is not an
        object, ``id`` is not non-empty text, a text field is not text, ``qualification`` or
        ``budget`` is not an object, ``requiredEnvironment`` is not a list of names, or
        ``profile`` is not text.
        """
        if not isinstance(document, Mapping):
            raise CandidateSpecError(f"a candidate snapshot must be an object, not {type(document).__name__}")
        candidate_id = document.get("id")
        if not isinstance(candidate_id, str) or not candidate_id:
            raise CandidateSpecError("a candidate snapshot needs an id (non-empty text)")

        def problem(what: str) -> CandidateSpecError:
            return CandidateSpecError(f"candidate {candidate_id}: {what}")

        def text(key: str) -> str:
            value = document.get(key)
            if value is None:
                return ""
            if not isinstance(value, str):
                raise problem(f"{key} must be text, not {type(value).__name__}")
            return value

        qualification = document.get("qualification")
        if qualification is None:
            qualification = {}
        if not isinstance(qualification, Mapping):
            raise problem("qualification must be an object with requiredEnvironment")
        names = qualification.get("requiredEnvironment")
        if names is None:
            names = []
        if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
            raise problem("qualification.requiredEnvironment must be a list of environment variable names")
        profile = qualification.get("profile")
        if profile is not None and not isinstance(profile, str):
            raise problem(f"qualification.profile must be text, not {type(profile).__name__}")
        effort = document.get("reasoningEffort")
        if effort is not None and not isinstance(effort, str):
            raise problem(f"reasoningEffort must be text, not {type(effort).__name__}")
        try:
            budget = Budget.from_document(document.get("budget"))
        except CandidateSpecError as exc:
            raise problem(str(exc)) from None
        return cls(
            id=candidate_id,
            adapter=text("adapter"),
            provider=text("provider"),
            model=text("model"),
            slot_id=text("slotId"),
            tier=text("tier"),
            reasoning_effort=effort,
            required_environment=tuple(names),
            profile=profile or None,
            budget=budget,
            document=MappingProxyType(dict(document)),
        )


def environment_names(document: Any) -> list[str]:
    """The required variable names of a candidate snapshot, whatever else is wrong with it.

    For redaction only: the values of every candidate's variables are scrubbed from what a run
    writes, and a snapshot the spec refuses (:meth:`CandidateSpec.from_snapshot`) must be no
    exception. Names that are not text are left out; never raises.
    """
    qualification = document.get("qualification") if isinstance(document, Mapping) else None
    names = qualification.get("requiredEnvironment") if isinstance(qualification, Mapping) else None
    return [name for name in names if isinstance(name, str)] if isinstance(names, list) else []
