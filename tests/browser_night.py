"""A realistic set of nights for the browser suite, built with the services a nightly uses.

``build_nights()`` loads the reference catalog, declares the periodic tasks, then runs:

* three live nightlies in the past (the last one in the previous rotation week), through the
  replay executor with OpenAI's and Anthropic's keys set and OpenRouter's missing: the opencode
  candidates are skipped (``qualification_environment_missing``), the others complete — some pass,
  some fail (a missing ``finish_task`` call), one model has no price (unknown cost), one execution
  hits a provider outage (an infrastructure failure);
* tonight's nightly the same way;
* a scripted-lane run of tonight's first seven codex-luna and acpx entries;
* a run left pending (the live run view watches it settle).

Nothing here is a stub of a service: every run is created, executed, scored and reported by
``runs.nightly`` and the modules below it, as the nightly does.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.core.management import call_command
from django.utils import timezone

from runs.evaluation.observations import provenance
from runs.executors.base import InfrastructureError
from runs.executors.replay import REPLAY_STORE
from runs.models import Run, RunLane
from schedules.services import Selection
from tests.builders import completed_observation, load_reference_catalog

SEED = "runner-live-seven-week-v1"
#: The keys a first user has: OpenAI's and Anthropic's, not OpenRouter's (opencode is skipped).
ENVIRON = {"OPENAI_API_KEY": "x-browser-openai-1234", "ANTHROPIC_API_KEY": "x-browser-anthropic-1234"}


@dataclass(frozen=True)
class Nights:
    """The runs ``build_nights`` made: past live nights (oldest first), tonight's, the scripted one, the pending one."""

    past: list[Run]
    tonight: Run
    scripted: Run
    pending: Run


def _observation(entry: dict[str, Any], provider: str, index: int, night: int) -> Any:
    """The replayed outcome of entry ``index`` on night ``night``: mostly passes, with failures,
    unpriced executions and one provider outage spread over candidates and nights."""
    if index == 5 and night == 0:
        return InfrastructureError("provider_http_503", False, "the provider answered 503 Service Unavailable")
    # acpx-codex-sol's model has no price: its cost is unknown.
    cost = (
        None
        if entry["candidateId"] == "acpx-codex-sol"
        else round(0.02 + 0.01 * (index % 5) + 0.03 * (entry["slotId"] == "codex-strong"), 2)
    )
    observation = completed_observation(entry, cost_usd=cost, provider=provider)
    observation["metrics"]["settlementMs"] = 30_000 + 1_500 * index + 4_000 * night
    if (index + night) % 3 == 0:
        observation["base"]["observedCalls"] = []  # the model never finished the task: a candidate failure
    return observation


def _fill_replay(schedule: Any, night: int, *, scripted: bool = False) -> None:
    for index, entry in enumerate(schedule.entries.order_by("position")):
        document = entry.to_document()
        outcome = _observation(document, entry.candidate["provider"], index, night)
        if scripted and isinstance(outcome, dict):
            outcome["base"]["provenance"] = provenance(outcome["caseId"], scripted=True)
        REPLAY_STORE[document["executionId"]] = outcome


def _nightly(now: dt.datetime, night: int) -> Run:
    from runs.nightly import start_nightly

    schedule = start_nightly(seed=SEED, cost_ceiling_usd=Decimal("12"), now=now, environ=ENVIRON, execute=False).schedule
    _fill_replay(schedule, night)
    return start_nightly(seed=SEED, cost_ceiling_usd=Decimal("12"), now=now, environ=ENVIRON, execute=True).run


def build_nights(now: dt.datetime | None = None) -> Nights:
    """The catalog, the periodic tasks and the runs described in the module docstring."""
    from runs.creation import create_run
    from runs.dispatch import execute_run

    now = now or timezone.now()
    load_reference_catalog()
    call_command("setup_schedules", stdout=_Null())
    past = [_nightly(now - dt.timedelta(days=days), night) for night, days in enumerate((8, 2, 1), start=1)]
    tonight = _nightly(now, 0)
    schedule = tonight.schedule
    scripted, _ = create_run(
        schedule=schedule,
        cost_ceiling_usd=Decimal("12"),
        selection=Selection(candidate_ids=("codex-luna", "acpx-claude-sonnet"), limit=7),
        lane=RunLane.SCRIPTED,
    )
    _fill_replay(schedule, 0, scripted=True)
    execute_run(scripted, environ=ENVIRON)
    pending, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal("12"), selection=Selection(candidate_ids=("codex-luna",), limit=6))
    return Nights(
        past=[Run.objects.get(pk=run.pk) for run in past],
        tonight=Run.objects.get(pk=tonight.pk),
        scripted=Run.objects.get(pk=scripted.pk),
        pending=Run.objects.get(pk=pending.pk),
    )


class _Null:
    def write(self, *_: Any) -> None:
        pass

    def flush(self) -> None:
        pass
