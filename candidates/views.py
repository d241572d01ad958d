"""The candidates page: slots in order, their candidates, budgets and qualification. Sign-in required."""

from __future__ import annotations

import os

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from candidates.queries import catalog_overview
from schedules.building import rotation_day
from schedules.services import iso_timestamp


@login_required
def candidates_view(request: HttpRequest) -> HttpResponse:
    """Whether each required variable is set in *this* process's environment: set or missing, never a value."""
    day = rotation_day(iso_timestamp(timezone.now()))
    slots = catalog_overview(environ=os.environ, rotation_day=day)
    return render(request, "pages/candidates.html", {"slots": slots, "rotation_day": day})
