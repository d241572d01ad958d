"""The run pages: the history of runs and one run with every execution. Sign-in required."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from runs.queries import CEILING_REACHED, missing_environment, run_executions, run_history, run_page
from runs.services import summarize

RUNS_PER_PAGE = 25


@login_required
def run_history_view(request: HttpRequest) -> HttpResponse:
    """Runs newest first, 25 a page. A page that is not a number shows the first page, one past
    the end the last page (known-failure-modes B11: never a 500)."""
    paginator = Paginator(run_history(), RUNS_PER_PAGE)
    page = paginator.get_page(request.GET.get("page"))
    return render(request, "pages/runs.html", {"page": page, "runs": page.object_list})


@login_required
def run_detail_view(request: HttpRequest, pk: int) -> HttpResponse:
    """One run: its schedule, counts, cost, and every execution with its outcome."""
    run = get_object_or_404(run_page(), pk=pk)
    executions = run_executions(run)
    context = {
        "run": run,
        "summary": summarize(run),
        "executions": executions,
        "missing": missing_environment(executions),
        "ceiling_skips": sum(1 for execution in executions if execution.failure_code == CEILING_REACHED),
    }
    return render(request, "pages/run.html", context)
