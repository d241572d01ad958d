"""Notification channels: one module per channel kind, each a :class:`~runs.notifications.base.Channel`
subclass with one method, ``send(notice)``. The registry maps a kind to a dotted path and imports it
lazily, so a kind's dependencies load only when a channel of that kind sends.

This package knows no rows: the delivery service (``runs.alerting``) turns an alert into a
:class:`~runs.notifications.base.Notice` and records each delivery's outcome.
"""

from __future__ import annotations

from collections.abc import Mapping

from django.utils.module_loading import import_string

from runs.notifications.base import Channel, DeliveryError, Notice

__all__ = ["CHANNELS", "Channel", "DeliveryError", "Notice", "channel_class"]

#: Channel kind (``runs.models.ChannelKind``) → the dotted path of its class.
CHANNELS: Mapping[str, str] = {
    "email": "runs.notifications.email.EmailChannel",
    "webhook": "runs.notifications.webhook.WebhookChannel",
    "slack": "runs.notifications.slack.SlackChannel",
}


def channel_class(kind: str) -> type[Channel]:
    """The class sending notices for ``kind``; :class:`DeliveryError` (permanent) for an unknown kind."""
    try:
        return import_string(CHANNELS[kind])
    except KeyError:
        raise DeliveryError(f"unknown channel kind {kind!r}; known: {', '.join(sorted(CHANNELS))}", permanent=True) from None
