"""Slack incoming webhooks: ``{"text": ...}`` with the subject in bold above the body."""

from __future__ import annotations

from runs.notifications.base import Channel, Notice


def _escape(text: str) -> str:
    # Slack's mrkdwn treats these three as control characters.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class SlackChannel(Channel):
    def send(self, notice: Notice) -> None:
        self.post_json({"text": f"*{_escape(notice.subject)}*\n{_escape(notice.text)}"})
