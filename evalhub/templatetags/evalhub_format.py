"""Small display filters for evalhub's pages: money that never shows an unknown price as $0.00."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

register = template.Library()


def format_usd(value: Any, known: Any = True) -> str:
    """``$1.50``; ``$0.0123`` below a dollar when cents are not exact; ``unknown`` when ``known`` is false; ``—`` for no value.

    An execution whose price is unknown (``cost_known`` false) stores its budget reservation in
    ``cost_usd``; showing that, or $0.00, would misstate what it cost (known-failure-modes B5).
    """
    if known is False:
        return "unknown"
    if value is None or value == "":
        return "—"
    try:
        amount = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return "—"
    if not amount.is_finite():
        return "unknown"
    cents = Decimal("0.01")
    # Below a dollar, fractions of a cent matter (a cheap model's turn costs $0.0031).
    places = Decimal("0.0001") if abs(amount) < 1 and amount != amount.quantize(cents) else cents
    return f"${amount.quantize(places, rounding=ROUND_HALF_UP):,}"


@register.filter
def usd(value: Any, known: Any = True) -> str:
    """``{{ execution.cost_usd|usd:execution.cost_known }}`` — see :func:`format_usd`."""
    return format_usd(value, known)


@register.filter
def duration(milliseconds: Any) -> str:
    """``850 ms``, ``12.3 s``, ``4 min 05 s``; ``—`` when unknown."""
    if milliseconds is None or milliseconds == "":
        return "—"
    ms = int(milliseconds)
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    minutes, seconds = divmod(ms // 1000, 60)
    return f"{minutes} min {seconds:02d} s"


@register.filter
def breakable(value: Any) -> str:
    """Escape ``value`` and allow line breaks after underscores (long snake_case codes in narrow cells)."""
    return mark_safe(escape(str(value)).replace("_", "_<wbr>"))


def _decimal(value: Any) -> Decimal | None:
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        amount = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None
    return amount if amount.is_finite() else None


@register.filter
def score3(value: Any) -> str:
    """A score to 3 places, half up (``0.653``); ``—`` when there is none (unscored)."""
    amount = _decimal(value)
    return "—" if amount is None else str(amount.quantize(Decimal("0.001"), rounding=ROUND_HALF_UP))


@register.filter
def signed(value: Any) -> str:
    """A delta with its sign: ``+0.083``, ``−0.266`` (a real minus sign), ``±0``; ``—`` for none."""
    amount = _decimal(value)
    if amount is None:
        return "—"
    if amount == 0:
        return "±0"
    text = f"{abs(amount).normalize():f}"
    return f"+{text}" if amount > 0 else f"\u2212{text}"


@register.filter
def percent(value: Any, places: int = 0) -> str:
    """A rate in [0, 1] as a percentage (``83%``); ``—`` for none."""
    amount = _decimal(value)
    if amount is None:
        return "—"
    quantum = Decimal(1).scaleb(-int(places))
    return f"{(amount * 100).quantize(quantum, rounding=ROUND_HALF_UP)}%"


@register.filter
def gate(value: Any) -> str:
    """A scorecard's gate: ``true``, ``false`` or ``—`` (unscored), as the reference prints booleans."""
    return "true" if value is True else "false" if value is False else "—"


@register.filter
def verdict(value: Any) -> str:
    """A scorecard's ``passed``: ``PASS``, ``FAIL`` or ``not scored``."""
    return "PASS" if value is True else "FAIL" if value is False else "not scored"


@register.filter
def scorecard(execution: Any) -> Any:
    """The execution's scorecard or None (no query once ``select_related("scorecard")``)."""
    from runs.queries import scorecard_of

    return scorecard_of(execution)
