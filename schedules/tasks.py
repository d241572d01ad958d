"""django-q2 tasks. They take no configuration in their arguments (task rows are stored and shown
in the admin), only look things up and call one service."""

from __future__ import annotations

import os

from django.utils import timezone

from candidates.secrets import redact
from evalhub.conf import evalhub_setting
from runs.services import secret_values, start_nightly
from schedules.building import parse_campaign_cost_limit


class NightlyFailed(Exception):
    """The nightly task failed; the message is the redacted cause (django-q2 stores it in the task row)."""


def run_nightly() -> str:
    """Build, save and execute tonight's schedule; a second delivery the same night does nothing.

    Returns the one-line summary (stored by django-q2 as the task result, so it holds counts
    only, never configuration or secrets). Any failure is re-raised as :class:`NightlyFailed`
    with a redacted message and without its cause attached, because django-q2 stores the
    exception text and traceback of a failed task in its row (known-failure-modes B12).
    """
    try:
        outcome = start_nightly(
            seed=evalhub_setting("SCHEDULE_SEED"),
            cost_ceiling_usd=parse_campaign_cost_limit(evalhub_setting("MAX_CAMPAIGN_COST_USD")),
            now=timezone.now(),
            environ=os.environ,
            execute=True,
        )
    except Exception as exc:
        message = redact(f"{type(exc).__name__}: {exc}", extra_values=secret_values(os.environ, []))
        raise NightlyFailed(message) from None
    if not outcome.executed:
        return f"nightly for {outcome.schedule.night} already delivered as run {outcome.run.pk}; nothing done"
    return outcome.summary.line()
