"""What a live execution's tokens cost: prices per million tokens, and the arithmetic.

The price table is data editable in the admin (``candidates.models.ModelPrice``); evalhub ships
no prices: the reference manifest's models have no published price evalhub could cite, and an
invented price would be worse than none. A model without a price has an **unknown** cost
(``None``), which the orchestration counts at the candidate's ``maxCostUsd`` and shows as
unknown — never as $0 (known-failure-modes B5).

:func:`cost_usd` is pure (no ORM, no clock); :func:`price_for` reads the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from runs.harness.contracts import Usage

MILLION = Decimal(1_000_000)


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens of one model: uncached ``input``, ``cached_input``,
    ``output`` (reasoning excluded) and ``reasoning``."""

    model: str
    input: Decimal
    cached_input: Decimal
    output: Decimal
    reasoning: Decimal


def cost_usd(usage: Usage, price: Price | None) -> float | None:
    """The cost of ``usage`` at ``price`` in US dollars, or ``None`` when the price is unknown.

    ``usage.input`` includes ``usage.cached_input`` (``contracts.Usage``): uncached input is
    ``input - cached_input`` (never below 0) at the input price, cached input at the cached
    price, output at the output price and reasoning at the reasoning price. Negative counts are
    read as 0. Computed in ``Decimal`` and returned as ``float``.
    """
    if price is None:
        return None
    cached = max(0, usage.cached_input)
    uncached = max(0, usage.input - cached)
    total = (
        Decimal(uncached) * price.input
        + Decimal(cached) * price.cached_input
        + Decimal(max(0, usage.output)) * price.output
        + Decimal(max(0, usage.reasoning)) * price.reasoning
    )
    return float(total / MILLION)


def price_for(model: str) -> Price | None:
    """The price of ``model`` from the price table (names compared ignoring case and surrounding
    blanks), or ``None`` when it has none. One query."""
    from candidates.models import ModelPrice  # the harness itself stays free of the ORM

    name = (model or "").strip()
    if not name:
        return None
    row = ModelPrice.objects.filter(model__iexact=name).first()
    if row is None:
        return None
    return Price(
        model=row.model,
        input=row.input_usd,
        cached_input=row.cached_input_usd,
        output=row.output_usd,
        reasoning=row.reasoning_usd,
    )
