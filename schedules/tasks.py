"""django-q2 tasks. They take no configuration in their arguments (task rows are stored and shown
in the admin), only look things up and call one service."""

from __future__ import annotations

import os

from django.utils import timezone

from evalhub.conf import evalhub_setting
from runs.services import start_nightly
from schedules.building import parse_campaign_cost_limit


def run_nightly() -> str:
    """Build, save and execute tonight's schedule; a second delivery the same night does nothing.

    Returns the one-line summary (stored by django-q2 as the task result, so it holds counts
    only, never configuration or secrets).
    """
    outcome = start_nightly(
        seed=evalhub_setting("SCHEDULE_SEED"),
        cost_ceiling_usd=parse_campaign_cost_limit(evalhub_setting("MAX_CAMPAIGN_COST_USD")),
        now=timezone.now(),
        environ=os.environ,
        execute=True,
    )
    if not outcome.run_created:
        return f"nightly for {outcome.schedule.night} already delivered as run {outcome.run.pk}; nothing done"
    return outcome.summary.line()
