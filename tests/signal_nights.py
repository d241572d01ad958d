"""Seven live nightlies of one rotation week — one bundle — with a regression and a bimodal case,
built with the services a nightly uses (the replay executor plays each execution's outcome).

``build_signal_nights()`` loads the reference catalog and runs the seven nights of the week
before last (so every night is in the past and all share one line-up, hence one bundle), oldest
first. Among the core cases (three repetitions a night) of the non-opencode candidates:

* the **regression** pair passes every repetition on the first four nights, then 1, 0 and 1 of 3;
* the **bimodal** pair alternates whole nights: 3/3, 0/3, 3/3, ...;
* the **flaky** pair fails one repetition on the third night only;
* everything else passes. opencode's key is missing, so its executions are skipped (no data).

With ``EVALHUB["SIGNAL_RECENT_NIGHTS"] = 3`` and ``["SIGNAL_BASELINE_NIGHTS"] = 4`` (the week's
seven nights; :data:`WEEK_WINDOWS`) the last night's history finds the regression significant,
the bimodal and flaky pairs flaky, and the rest stable.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.utils import timezone

from runs.executors.replay import REPLAY_STORE
from runs.models import Run
from tests.browser_night import ENVIRON, SEED
from tests.builders import completed_observation, load_reference_catalog

#: The windows that fit one rotation week (seven nights).
WEEK_WINDOWS = {"SIGNAL_RECENT_NIGHTS": 3, "SIGNAL_BASELINE_NIGHTS": 4}
NIGHTS = 7
#: Passes out of three per night, oldest first.
REGRESSION_PASSES = (3, 3, 3, 3, 1, 0, 1)
BIMODAL_PASSES = (3, 0, 3, 0, 3, 0, 3)
FLAKY_PASSES = (3, 3, 2, 3, 3, 3, 3)


@dataclass(frozen=True)
class SignalNights:
    runs: list[Run]  # oldest first
    regression: tuple[str, str]  # (case, candidate)
    bimodal: tuple[str, str]
    flaky: tuple[str, str]


def week_nights(now: dt.datetime) -> list[dt.datetime]:
    """04:00 UTC on the seven nights of the rotation week before the one holding ``now - 7 days``
    (weeks roll on Thursday 00:00 UTC: the epoch began on a Thursday)."""
    earlier = now - dt.timedelta(days=14)
    days = (earlier - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)).days
    start = dt.datetime(1970, 1, 1, 4, 0, tzinfo=dt.UTC) + dt.timedelta(days=days - days % 7)
    return [start + dt.timedelta(days=index) for index in range(NIGHTS)]


def _pairs(schedule: Any) -> list[tuple[str, str]]:
    """The (case, candidate) pairs with three repetitions a night, opencode left out (skipped)."""
    counts: dict[tuple[str, str], int] = {}
    for entry in schedule.entries.order_by("position"):
        if entry.candidate["adapter"] == "opencode_server":
            continue
        key = (entry.case_key, entry.candidate_key)
        counts[key] = counts.get(key, 0) + 1
    return sorted(key for key, count in counts.items() if count == 3)


def build_signal_nights(now: dt.datetime | None = None) -> SignalNights:
    """The catalog and the seven nights described in the module docstring."""
    from runs.nightly import start_nightly

    load_reference_catalog()
    runs: list[Run] = []
    chosen: list[tuple[str, str]] = []
    for index, night in enumerate(week_nights(now or timezone.now())):
        schedule = start_nightly(seed=SEED, cost_ceiling_usd=Decimal("12"), now=night, environ=ENVIRON, execute=False).schedule
        if not chosen:
            chosen = _pairs(schedule)[:3]
            assert len(chosen) == 3, f"the week has too few core pairs: {chosen}"
        plan = dict(zip(chosen, (REGRESSION_PASSES, BIMODAL_PASSES, FLAKY_PASSES), strict=True))
        for entry in schedule.entries.order_by("position"):
            document = entry.to_document()
            observation = completed_observation(document, cost_usd=0.02, provider=entry.candidate["provider"])
            passes = plan.get((entry.case_key, entry.candidate_key))
            if passes is not None and entry.repetition > passes[index]:
                observation["base"]["observedCalls"] = []  # the model never finished the task: a candidate failure
            REPLAY_STORE[document["executionId"]] = observation
        run = start_nightly(seed=SEED, cost_ceiling_usd=Decimal("12"), now=night, environ=ENVIRON, execute=True).run
        runs.append(Run.objects.get(pk=run.pk))
    return SignalNights(runs, *chosen)
