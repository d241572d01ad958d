"""What a live execution's tokens cost: prices per million tokens, and the arithmetic.

The live executor looks the price up (``candidates.prices``: the price table editable in the
admin, then the prices the genai-prices package ships) and passes the :class:`Price` in. A model
without a price has an **unknown** cost (``None``), which the orchestration counts at the
candidate's ``maxCostUsd`` and shows as unknown — never as $0 (docs/failure-modes.md B5).

:func:`cost_usd` is pure (no ORM, no clock).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from runs.executors.live.contracts import Usage

MILLION = Decimal(1_000_000)


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens of one model: uncached ``input``, ``cached_input``,
    ``output`` (reasoning excluded) and ``reasoning``; ``source`` says where they come from
    (``price table``, ``genai-prices 0.2.3 (openai GPT-5.6 Luna; base tier)``, ``scripted model``)."""

    model: str
    input: Decimal
    cached_input: Decimal
    output: Decimal
    reasoning: Decimal
    source: str = "price table"


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
