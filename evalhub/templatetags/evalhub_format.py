"""Small display filters for evalhub's pages: money that never shows an unknown price as $0.00."""

from __future__ import annotations

import functools
import json
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from django import template
from django.conf import settings
from django.template.loader import render_to_string
from django.urls import get_script_prefix, get_urlconf, reverse
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

register = template.Library()


def format_usd(value: Any, known: Any = True) -> str:
    """``$1.50``; ``$0.0123`` below a dollar when cents are not exact; ``unknown`` when ``known`` is false; ``—`` for no value.

    An execution whose price is unknown (``cost_known`` false) stores its budget reservation in
    ``cost_usd``; showing that, or $0.00, would misstate what it cost (docs/failure-modes.md B5).
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
def as_json(value: Any) -> str:
    """A stored JSON value as JSON reads (``["finished", "completed"]``, ``true``, ``null``), not
    as Python prints it (``['finished', 'completed']``, ``True``, ``None``); a string as it is.
    What a chaos check expected and found is JSON in its run's document (runs/chaos.py)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


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
    """A scorecard's gate for people: ``passed``, ``failed`` or ``—`` (unscored). The exports keep
    the reference's ``true``/``false``; pages say what it means."""
    return "passed" if value is True else "failed" if value is False else "—"


@register.filter
def verdict(value: Any) -> str:
    """A scorecard's ``passed``: ``PASS``, ``FAIL`` or ``not scored``."""
    return "PASS" if value is True else "FAIL" if value is False else "not scored"


@register.filter
def index(sequence: Any, position: Any) -> Any:
    """``{{ entries|index:3 }}``: the item at ``position``, or None when there is none."""
    try:
        return sequence[int(position)]
    except (IndexError, KeyError, TypeError, ValueError):
        return None


@register.filter
def points(value: Any) -> str:
    """A difference of two rates in percentage points with its sign: ``−50 pts``, ``+12 pts``,
    ``±0 pts``; ``—`` for none."""
    amount = _decimal(value)
    if amount is None:
        return "—"
    whole = (amount * 100).quantize(Decimal(1), rounding=ROUND_HALF_UP)
    if whole == 0:
        return "±0 pts"
    return f"+{whole} pts" if whole > 0 else f"\u2212{abs(whole)} pts"


@register.filter
def pvalue(value: Any) -> str:
    """A p-value for people: ``p = 0.012``, ``p < 0.001``; ``—`` for none."""
    amount = _decimal(value)
    if amount is None:
        return "—"
    if amount < Decimal("0.001"):
        return "p < 0.001"
    return f"p = {amount.quantize(Decimal('0.001'), rounding=ROUND_HALF_UP)}"


@register.simple_tag
def page_url(name: str) -> str:
    """``{% page_url "pages:runs" %}``: ``{% url %}`` of a URL name without arguments, reversed once
    per URL configuration and script prefix (the site header links ten pages on every page, and
    each ``reverse`` walks the resolver)."""
    return _reversed(name, get_urlconf() or settings.ROOT_URLCONF, get_script_prefix())


@functools.lru_cache(maxsize=256)
def _reversed(name: str, urlconf: str, prefix: str) -> str:
    # ``prefix`` is part of the key only: reverse() reads the current script prefix itself.
    return reverse(name, urlconf=urlconf)


@register.simple_tag(takes_context=True)
def site_nav(context: template.Context) -> SafeString:
    """``{% site_nav %}``: the site header's links (``templates/includes/site_nav.html``), the
    current page's marked ``aria-current``, the admin's for staff only. They depend on nothing
    else, so each combination is rendered once per URL configuration and script prefix; every
    page saves the template work of ten links and their comparisons. (Once per process: an
    edit of the include shows after a restart.)"""
    request = context.get("request")
    match = getattr(request, "resolver_match", None)
    user = context.get("user")
    return _site_nav(
        match.url_name if match else "", bool(getattr(user, "is_staff", False)), get_urlconf() or settings.ROOT_URLCONF, get_script_prefix()
    )


@functools.lru_cache(maxsize=256)
def _site_nav(current: str, is_staff: bool, urlconf: str, prefix: str) -> SafeString:
    # ``urlconf`` and ``prefix`` are part of the key only: {% page_url %} reads them itself.
    return mark_safe(render_to_string("includes/site_nav.html", {"current": current, "is_staff": is_staff}).strip())  # a template's output
