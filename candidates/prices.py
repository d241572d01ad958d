"""What a candidate's model costs: the admin's price table, then the prices ``genai-prices`` ships.

The price table (``candidates.models.ModelPrice``) always wins: it is what the team checked. A
model without a row is looked up in the data the ``genai-prices`` package ships (its bundled
snapshot; evalhub never asks it to fetch newer data, so no network is used). A model neither
knows has an **unknown** cost (``None``) — never $0 (docs/failure-modes.md B5).

``genai-prices`` gives some models tiered prices that change above a number of tokens *per
request* (for example 272,000). evalhub totals usage over all the requests of an execution, so a
tier cannot be told from the total: the base price (below the first tier) is used, and the
source says so.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any

from candidates.models import ModelPrice

#: The source of a price the team entered in the admin.
PRICE_TABLE = "price table"


@dataclass(frozen=True)
class QuotedPrice:
    """US dollars per million tokens of one model — uncached ``input_usd``, ``cached_input_usd``,
    ``output_usd`` (reasoning excluded) and ``reasoning_usd`` — and where they come from
    (``source``: :data:`PRICE_TABLE`, or ``genai-prices <version> (<provider> <model name>…)``)."""

    model: str
    input_usd: Decimal
    cached_input_usd: Decimal
    output_usd: Decimal
    reasoning_usd: Decimal
    source: str

    def line(self) -> str:
        """``$0.20 input · $0.02 cached · $1.20 output · $1.20 reasoning per million tokens (source)``."""
        return (
            f"${_plain(self.input_usd)} input · ${_plain(self.cached_input_usd)} cached · ${_plain(self.output_usd)} output · "
            f"${_plain(self.reasoning_usd)} reasoning per million tokens ({self.source})"
        )


def quoted_price(model: str, *, at: dt.datetime | None = None) -> QuotedPrice | None:
    """The price of ``model`` (a candidate's model name): its price table row (names compared
    ignoring case and surrounding blanks; one query), else :func:`shipped_price`, else ``None``."""
    name = (model or "").strip()
    if not name:
        return None
    row = ModelPrice.objects.filter(model__iexact=name).first()
    if row is not None:
        return QuotedPrice(
            model=row.model,
            input_usd=row.input_usd,
            cached_input_usd=row.cached_input_usd,
            output_usd=row.output_usd,
            reasoning_usd=row.reasoning_usd,
            source=PRICE_TABLE,
        )
    return shipped_price(name, at=at)


def shipped_price(model: str, *, at: dt.datetime | None = None) -> QuotedPrice | None:
    """The price ``genai-prices`` ships for ``model`` at ``at`` (default: now), or ``None``.

    ``openrouter/moonshotai/kimi-k2.5`` is looked up as OpenRouter's ``moonshotai/kimi-k2.5``; a
    name without a provider prefix (``gpt-5.6-luna``) is matched against every provider the
    package knows. Reasoning tokens are priced as output (how providers bill them); cached input
    at the cache-read price, or the input price when the package has none."""
    found = _shipped_model(model.strip().lower())
    if found is None:
        return None
    provider, info = found
    prices = info.get_prices(at or dt.datetime.now(dt.UTC))
    input_usd, input_tiered = _base(prices.input_mtok)
    output_usd, output_tiered = _base(prices.output_mtok)
    if input_usd is None or output_usd is None:
        return None
    cached_usd, cached_tiered = _base(prices.cache_read_mtok)
    tiered = input_tiered or output_tiered or cached_tiered
    return QuotedPrice(
        model=model,
        input_usd=input_usd,
        cached_input_usd=input_usd if cached_usd is None else cached_usd,
        output_usd=output_usd,
        reasoning_usd=output_usd,
        source=f"genai-prices {_version()} ({provider.id} {info.name or info.id}{'; base tier' if tiered else ''})",
    )


@lru_cache(maxsize=512)
def _shipped_model(name: str) -> tuple[Any, Any] | None:
    """``(provider, model info)`` from the bundled snapshot, or ``None`` (cached: the snapshot
    does not change while the process runs)."""
    from genai_prices import data_snapshot

    snapshot = data_snapshot.get_snapshot()
    attempts: list[tuple[str, str | None]] = []
    if "/" in name:
        prefix, rest = name.split("/", 1)
        attempts.append((rest, prefix))
    attempts.append((name, None))
    for reference, provider_id in attempts:
        try:
            return snapshot.find_provider_model(reference, None, provider_id, None)
        except LookupError:
            continue
    return None


def _base(value: Any) -> tuple[Decimal | None, bool]:
    """A per-million price from the package: ``(price, tiered)``; a tiered price gives its base."""
    if value is None:
        return None, False
    base = getattr(value, "base", None)
    if base is not None:
        return Decimal(base), True
    return Decimal(value), False


def _plain(value: Decimal) -> str:
    """``Decimal("1.250000")`` → ``1.25``, ``Decimal("10.000000")`` → ``10`` (no exponent)."""
    return f"{value.normalize():f}"


def _version() -> str:
    import genai_prices

    return genai_prices.__version__
