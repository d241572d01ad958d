"""The schedule pages: tonight's schedule, the weekly coverage and the candidates with this week's
line-up. Sign-in required."""

from __future__ import annotations

import os

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from evalhub.conf import evalhub_setting
from schedules.building import rotation_day
from schedules.queries import DAYS, catalog_overview, coverage_overview, tonight_schedule
from schedules.services import campaign_ceiling, iso_timestamp


@login_required
def tonight_view(request: HttpRequest) -> HttpResponse:
    """Today's UTC night: the saved schedule, or the one the nightly would build now ("not saved yet")."""
    tonight = tonight_schedule(seed=evalhub_setting("SCHEDULE_SEED"), now=timezone.now(), ceiling_usd=campaign_ceiling())
    return render(request, "pages/tonight.html", {"tonight": tonight})


@login_required
def coverage_view(request: HttpRequest) -> HttpResponse:
    """The four coverage invariants and which slots each case meets on each rotation day."""
    overview = coverage_overview(seed=evalhub_setting("SCHEDULE_SEED"), now=timezone.now())
    return render(request, "pages/coverage.html", {"overview": overview, "days": DAYS})


@login_required
def candidates_view(request: HttpRequest) -> HttpResponse:
    """Whether each required variable is set in *this* process's environment: set or missing, never a value."""
    day = rotation_day(iso_timestamp(timezone.now()))
    slots = catalog_overview(environ=os.environ, rotation_day=day)
    return render(request, "pages/candidates.html", {"slots": slots, "rotation_day": day})
