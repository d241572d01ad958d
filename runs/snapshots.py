"""What a run reads from the candidate snapshots it executes: the calls an execution may make,
what an attempt reserves against the ceiling, the provider profile it talks to, the values every
text it writes is scrubbed of, and the provider overrides stored on the run.

Money enters here too: :func:`finite_cost` turns a reported USD amount into the micro-dollars
the columns hold, or None when it is unknown (docs/failure-modes.md B5).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Any

from evalhub.conf import evalhub_setting
from evalhub.credentials import credential_values
from runs.executors.candidate import CandidateSpec, environment_names
from runs.executors.providers import ProviderConfig
from runs.models import Run

#: One execution costing more than this is a unit mix-up, not a price: it is recorded as unknown.
MAX_BELIEVABLE_COST_USD = Decimal("1000000")
MICRO_DOLLAR = Decimal("0.000001")


def provider_overrides_document(providers: Mapping[str, ProviderConfig]) -> dict[str, dict[str, Any]]:
    """``{candidate id: ProviderConfig}`` as the JSON stored on the run (names and URLs only)."""
    return {str(key): value.to_document() for key, value in providers.items()}


def run_providers(run: Run) -> dict[str, ProviderConfig]:
    """The run's stored provider overrides as ``{candidate id: ProviderConfig}`` (the scripted
    lane's scripted model), so its executions use them on whichever worker runs them."""
    stored = run.provider_overrides or {}
    return {key: ProviderConfig.from_document(value) for key, value in stored.items() if isinstance(value, dict)}


def secret_values(environ: Mapping[str, str], candidates: list[Mapping[str, Any]]) -> list[str]:
    """The values to redact wherever a run writes text: every candidate's required variables and
    every credential of ``environ`` (``evalhub.credentials.credential_values``: credential-named
    variables such as ``PGPASSWORD``, ``*_KEY``, ``*PASSPHRASE*``, and passwords inside URL values
    such as ``DATABASE_URL`` and ``REDIS_URL``).

    Providers echo keys in error text and an executor may dump its whole environment, so a run
    redacts the values of all of them, not just the current candidate's (docs/failure-modes.md B12).
    """
    names: set[str] = set()
    for candidate in candidates:
        # Read leniently (environment_names): a snapshot the spec refuses still has its values redacted.
        names.update(environment_names(candidate))
    return credential_values(environ, names=names)


def max_attempts(candidate: CandidateSpec) -> int:
    """The calls one execution of ``candidate`` may make: its budget's ``max_attempts``
    (``runs.executors.candidate.DEFAULT_MAX_ATTEMPTS``, the reference's one retry, without one)."""
    return candidate.budget.max_attempts


def reservation_usd(candidate: CandidateSpec) -> Decimal:
    """What one attempt of ``candidate`` may cost at worst, reserved against the ceiling before it
    runs: its budget's ``max_cost_usd`` (the live harness stops an attempt there), 0 without one."""
    return finite_cost(candidate.budget.max_cost_usd) or Decimal(0)


def provider_key(candidate: CandidateSpec) -> str:
    """The model provider profile an execution of ``candidate`` talks to (what
    ``PROVIDER_CONCURRENCY`` limits): its qualification's profile, else its runtime's default."""
    if candidate.profile:
        return candidate.profile
    defaults = evalhub_setting("DEFAULT_PROVIDER_PROFILES") or {}
    return str(defaults.get(candidate.provider, candidate.provider))


def finite_cost(value: Any) -> Decimal | None:
    """A USD amount as Decimal rounded up to the micro-dollar the columns hold, or None when
    unknown: absent, not a number (text, a boolean), NaN, infinite, negative, or above
    ``MAX_BELIEVABLE_COST_USD`` (a unit mix-up such as nanodollars reported as dollars)."""
    if not isinstance(value, (int, float, Decimal)) or isinstance(value, bool):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    try:
        amount = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None
    if not amount.is_finite() or amount < 0 or amount > MAX_BELIEVABLE_COST_USD:
        return None
    return amount.quantize(MICRO_DOLLAR, rounding=ROUND_CEILING)
