"""The channel contract: a notice in, nothing out, :class:`DeliveryError` when it did not arrive."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from evalhub.secrets import redact

#: Seconds a channel waits to connect to and hear back from a webhook.
HTTP_TIMEOUT_SECONDS = 10.0


@dataclasses.dataclass(frozen=True)
class Notice:
    """What one alert says, in every form a channel needs.

    ``subject`` is one line (an email subject, a Slack message's first line); ``text`` the plain
    text body; ``document`` the JSON object a webhook receives (schema ``evalhub.alert.v1``).
    """

    subject: str
    text: str
    document: Mapping[str, Any]


class DeliveryError(Exception):
    """A notice that did not arrive. ``permanent`` means trying again cannot help (a missing
    variable, a URL the receiver rejects with 4xx); otherwise the delivery is retried later.
    The message is safe to store and show: callers redact it with the channel's URL."""

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.permanent = permanent


class Channel:
    """One configured channel. Subclasses implement :meth:`send`.

    ``url_env`` names the environment variable holding a webhook URL (read from ``environ`` when
    sending, never stored); ``recipients`` are an email channel's addresses.
    """

    def __init__(self, *, name: str, url_env: str = "", recipients: Sequence[str] = (), environ: Mapping[str, str]) -> None:
        self.name = name
        self.url_env = url_env
        self.recipients = list(recipients)
        self.environ = environ

    def send(self, notice: Notice) -> None:
        """Deliver ``notice``; raise :class:`DeliveryError` when it did not arrive."""
        raise NotImplementedError

    # --- helpers for webhook kinds ---------------------------------------------------------------

    def secret_url(self) -> str:
        """The URL in ``url_env``; :class:`DeliveryError` (permanent) when it is unset or not http(s)."""
        url = (self.environ.get(self.url_env) or "").strip()
        if not url:
            raise DeliveryError(f"{self.url_env} is not set in the environment of the process sending notifications", permanent=True)
        if not url.startswith(("https://", "http://")):
            raise DeliveryError(f"{self.url_env} must hold an http(s) URL", permanent=True)
        return url

    def post_json(self, body: Mapping[str, Any]) -> None:
        """POST ``body`` as JSON to :meth:`secret_url`. A 2xx response is success; 408, 429 and 5xx
        responses and transport errors are retryable; any other status is permanent. Error
        messages never contain the URL (it holds the token)."""
        url = self.secret_url()
        try:
            response = httpx.post(url, json=dict(body), timeout=HTTP_TIMEOUT_SECONDS, follow_redirects=False)
        except httpx.HTTPError as exc:
            # httpx puts the URL in some messages: redact it as an exact value.
            raise DeliveryError(redact(f"could not reach {self.url_env}: {type(exc).__name__}: {exc}", extra_values=[url])) from None
        if 200 <= response.status_code < 300:
            return
        detail = redact(response.text[:200].strip(), extra_values=[url])
        retryable = response.status_code in (408, 429) or response.status_code >= 500
        raise DeliveryError(f"{self.url_env} answered HTTP {response.status_code}: {detail}".rstrip(": "), permanent=not retryable)
