"""A generic JSON webhook: the notice's ``evalhub.alert.v1`` document, POSTed as it is."""

from __future__ import annotations

from runs.notifications.base import Channel, Notice


class WebhookChannel(Channel):
    def send(self, notice: Notice) -> None:
        self.post_json(notice.document)
