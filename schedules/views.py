"""The schedule pages: tonight's schedule and the weekly coverage. Sign-in required."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from evalhub.conf import evalhub_setting
from schedules.queries import DAYS, coverage_overview, tonight_schedule


@login_required
def tonight_view(request: HttpRequest) -> HttpResponse:
    """Today's UTC night: the saved schedule, or the one the nightly would build now ("not saved yet")."""
    tonight = tonight_schedule(seed=evalhub_setting("SCHEDULE_SEED"), now=timezone.now())
    return render(request, "pages/tonight.html", {"tonight": tonight})


@login_required
def coverage_view(request: HttpRequest) -> HttpResponse:
    """The four coverage invariants and which slots each case meets on each rotation day."""
    overview = coverage_overview(seed=evalhub_setting("SCHEDULE_SEED"), now=timezone.now())
    return render(request, "pages/coverage.html", {"overview": overview, "days": DAYS})
