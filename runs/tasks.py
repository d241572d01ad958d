"""django-q2 tasks of the runs app: look things up, call one service (STYLE.md §4)."""

from __future__ import annotations

from django.utils import timezone

from evalhub.conf import evalhub_setting
from runs import reporting


def prune_history() -> str:
    """Delete runs older than ``EVALHUB["RETENTION_DAYS"]`` days (never the last seven reports of
    a bundle); returns ``"pruned N run(s) older than D days"`` (stored as the task result)."""
    days = int(evalhub_setting("RETENTION_DAYS"))
    pruned = reporting.prune_history(now=timezone.now(), retention_days=days)
    return f"pruned {pruned} run(s) older than {days} days"
