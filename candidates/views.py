"""The candidates pages: slots in order with their candidates, budgets and qualification, and one
candidate's trends over its recent runs. Sign-in required."""

from __future__ import annotations

import os

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from candidates.queries import HISTORY_RUNS, candidate_history, catalog_overview
from schedules.building import rotation_day
from schedules.services import iso_timestamp


@login_required
def candidates_view(request: HttpRequest) -> HttpResponse:
    """Whether each required variable is set in *this* process's environment: set or missing, never a value."""
    day = rotation_day(iso_timestamp(timezone.now()))
    slots = catalog_overview(environ=os.environ, rotation_day=day)
    return render(request, "pages/candidates.html", {"slots": slots, "rotation_day": day})


@login_required
def candidate_view(request: HttpRequest, key: str) -> HttpResponse:
    """One candidate: pass rate, mean score, p95 latency and cost per run as charts, and each
    case's pass rate across repetitions with its 95% Wilson interval. 404 for a key that is
    neither in the catalog nor in any run."""
    history = candidate_history(key)
    if history is None:
        raise Http404("No such candidate.")
    return render(request, "pages/candidate.html", {"history": history, "history_runs": HISTORY_RUNS})
