"""Turning provider failures into :class:`InfrastructureError` with the right retry decision (B4).

HTTP 429 means two different things: a short rate limit (wait and retry once) and an exhausted
quota or billing limit (retrying only resends the prompt and spends money). Servers that are
down or overloaded and dropped connections are worth one more attempt; a request the provider
rejects (400, 401, 403, 404, 422) is not. Live executors call these helpers so every runtime
decides the same way. The ``code`` of the error is its kind: ``rate_limited``,
``quota_exhausted``, ``server_error``, ``network`` or ``client_error``; the observation's
``failure.code`` stores it.

Pure functions: no ORM, no environment; the clock only when a Retry-After date is given without
``now``.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import math
from collections.abc import Mapping
from typing import Any

from runs.executors.base import InfrastructureError

RATE_LIMITED = "rate_limited"
QUOTA_EXHAUSTED = "quota_exhausted"
SERVER_ERROR = "server_error"
NETWORK = "network"
CLIENT_ERROR = "client_error"

#: Words in a 429 body that mean the account cannot spend more, not "slow down".
_QUOTA_WORDS = ("insufficient_quota", "quota_exceeded", "billing", "credit balance", "out of credits", "exceeded your current quota")
_RETRYABLE_STATUSES = {408, 500, 502, 503, 504, 520, 521, 522, 523, 524, 529}
_NETWORK_WORDS = (
    "connection reset",
    "connection refused",
    "connection aborted",
    "server disconnected",
    "remote end closed",
    "read timed out",
    "read timeout",
    "timed out",
    "broken pipe",
    "eof occurred",
)


def parse_retry_after(value: Any, *, now: dt.datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header value: delta-seconds or an HTTP date.

    Returns ``None`` when the header is absent or unreadable, and 0 for a date in the past.
    """
    if value is None:
        return None
    text = str(value).strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        try:
            moment = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt.UTC)
        seconds = (moment - (now or dt.datetime.now(dt.UTC))).total_seconds()
    if not math.isfinite(seconds):
        return None
    return max(seconds, 0.0)


def _body_text(body: Any) -> str:
    if body is None:
        return ""
    if isinstance(body, (bytes, bytearray)):
        return bytes(body).decode("utf-8", "replace")
    return str(body)


def _header(headers: Mapping[str, Any] | None, name: str) -> Any:
    for key, value in (headers or {}).items():
        if str(key).lower() == name.lower():
            return value
    return None


def provider_http_error(
    status: int,
    *,
    body: Any = None,
    headers: Mapping[str, Any] | None = None,
    message: str = "",
    cost_usd: float | None = None,
    now: dt.datetime | None = None,
) -> InfrastructureError:
    """The infrastructure error for an HTTP response with ``status`` from a provider or runtime.

    ``body`` is the response body (text, bytes or parsed JSON), ``headers`` its headers (any
    case). The message says the status and the kind; pass ``message`` to add context (it is
    redacted before it is stored, like every message). ``cost_usd`` is what the provider billed
    for the failed attempt, if it says.
    """
    text = _body_text(body).lower()
    detail = f": {message}" if message else ""
    if status == 429 and any(word in text for word in _QUOTA_WORDS):
        return InfrastructureError(
            QUOTA_EXHAUSTED, False, f"HTTP 429: the provider's quota or billing limit is used up{detail}", cost_usd=cost_usd
        )
    if status == 429:
        error = InfrastructureError(RATE_LIMITED, True, f"HTTP 429: rate limited by the provider{detail}", cost_usd=cost_usd)
        error.retry_after_s = parse_retry_after(_header(headers, "Retry-After"), now=now)
        return error
    if status in _RETRYABLE_STATUSES or status >= 500:
        error = InfrastructureError(SERVER_ERROR, True, f"HTTP {status}: the provider failed or is overloaded{detail}", cost_usd=cost_usd)
        error.retry_after_s = parse_retry_after(_header(headers, "Retry-After"), now=now)
        return error
    return InfrastructureError(CLIENT_ERROR, False, f"HTTP {status}: the provider refused the request{detail}", cost_usd=cost_usd)


def network_error(exc: BaseException, *, cost_usd: float | None = None) -> InfrastructureError:
    """The infrastructure error for an exception raised while talking to a provider or runtime.

    Connection resets, refused or dropped connections, "Server disconnected without sending a
    response" and read timeouts are ``network`` and retryable; anything else is a non-retryable
    ``client_error`` (a bug or a bad request will not fix itself on a second try).
    """
    text = f"{type(exc).__name__}: {exc}"
    lowered = text.lower()
    if isinstance(exc, (ConnectionError, TimeoutError)) or any(word in lowered for word in _NETWORK_WORDS):
        return InfrastructureError(NETWORK, True, f"network failure talking to the provider: {text}", cost_usd=cost_usd)
    return InfrastructureError(CLIENT_ERROR, False, f"the provider call failed: {text}", cost_usd=cost_usd)
