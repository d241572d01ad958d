"""System checks (``manage.py check``), registered from ``EvalhubConfig.ready``.

Stable ids: evalhub.E001 cost ceiling, evalhub.E002 django-q2 retry/timeout, evalhub.E003 nightly
time, evalhub.E004 schedule seed.
"""

from __future__ import annotations

import re

from django.conf import settings
from django.core.checks import Error, register

from evalhub.conf import evalhub_setting

NIGHTLY_TIME = re.compile(r"^([01]\d|2[0-3]):[0-5]\d$")


@register()
def check_evalhub_settings(app_configs=None, **kwargs) -> list[Error]:
    from schedules.building import ScheduleError, parse_campaign_cost_limit

    errors: list[Error] = []
    try:
        parse_campaign_cost_limit(evalhub_setting("MAX_CAMPAIGN_COST_USD"))
    except ScheduleError as exc:
        errors.append(Error(str(exc), hint="Set it to a positive decimal such as 12, or unset it.", id="evalhub.E001"))
    q_cluster = getattr(settings, "Q_CLUSTER", {})
    timeout, retry = q_cluster.get("timeout"), q_cluster.get("retry")
    if timeout is not None and retry is not None and retry <= timeout:
        errors.append(
            Error(
                f"Q_CLUSTER retry ({retry} s) must be longer than timeout ({timeout} s), or a long nightly is "
                "delivered to a second worker while the first is still running.",
                hint="Raise EVALHUB_Q_RETRY above EVALHUB_Q_TIMEOUT.",
                id="evalhub.E002",
            )
        )
    if not NIGHTLY_TIME.match(str(evalhub_setting("NIGHTLY_TIME_UTC"))):
        errors.append(
            Error(
                "EVALHUB_NIGHTLY_TIME_UTC must be a UTC time of day as HH:MM, such as 04:00.",
                id="evalhub.E003",
            )
        )
    seed = evalhub_setting("SCHEDULE_SEED")
    if not isinstance(seed, str) or not seed.strip():
        errors.append(Error("EVALHUB_SCHEDULE_SEED must not be blank.", id="evalhub.E004"))
    return errors
