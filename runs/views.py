"""The run pages: the history of runs, one run with its report, exports of that report, one
execution with its raw trace downloads, the comparison of two runs and the open alerts. Sign-in
required."""

from __future__ import annotations

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.http import content_disposition_header

from evalhub.validation import MAX_INTEGER
from runs.harness.trace import TraceIntegrityError, read_artifact
from runs.models import Report, TraceArtifact
from runs.queries import (
    CEILING_REACHED,
    compare_page_runs,
    compare_runs,
    execution_page,
    missing_environment,
    open_alerts,
    recent_runs,
    run_executions,
    run_history,
    run_page,
    run_report,
)
from runs.services import summarize

RUNS_PER_PAGE = 25
#: The export formats of a report, in the order the run page links them, with their link text.
EXPORT_FORMATS = {"json": "JSON", "markdown": "Markdown", "junit": "JUnit XML", "github": "CI summary"}


@login_required
def run_history_view(request: HttpRequest) -> HttpResponse:
    """Runs newest first, 25 a page. A page that is not a number shows the first page, one past
    the end the last page (known-failure-modes B11: never a 500)."""
    paginator = Paginator(run_history(), RUNS_PER_PAGE)
    page = paginator.get_page(request.GET.get("page"))
    return render(request, "pages/runs.html", {"page": page, "runs": page.object_list})


@login_required
def run_detail_view(request: HttpRequest, pk: int) -> HttpResponse:
    """One run: its schedule, counts, cost, its report (aggregate, dimension means, alerts,
    comparison, exports) and every execution with its outcome and scorecard."""
    run = get_object_or_404(run_page(), pk=pk)
    executions = run_executions(run)
    context = {
        "run": run,
        "summary": summarize(run),
        "executions": executions,
        "missing": missing_environment(executions),
        "ceiling_skips": sum(1 for execution in executions if execution.failure_code == CEILING_REACHED),
        "report": run_report(run),
        "export_formats": EXPORT_FORMATS.items(),
    }
    return render(request, "pages/run.html", context)


@login_required
def run_export_view(request: HttpRequest, pk: int, fmt: str) -> HttpResponse:
    """The run's report as a download in ``fmt`` (json, markdown, junit, github); 404 for another
    format or a run without a report."""
    if fmt not in EXPORT_FORMATS:
        raise Http404("No such export format.")
    report = get_object_or_404(Report.objects.select_related("run"), run_id=pk)
    from runs.exports import export_report  # the exports import the renderers only when asked

    content, content_type, filename = export_report(report, fmt)
    response = HttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = content_disposition_header(as_attachment=True, filename=filename)
    return response


@login_required
def execution_detail_view(request: HttpRequest, pk: int) -> HttpResponse:
    """One execution: outcome and failure, the observation's checks, the scorecard's dimensions,
    every attempt and, where one was recorded, its raw trace to download (size, truncation)."""
    page = execution_page(pk)
    if page is None:
        raise Http404("No such execution.")
    return render(request, "pages/execution.html", {"page": page, "execution": page.execution})


def trace_filename(execution_id: str, attempt: int) -> str:
    """``<execution id>-attempt-<n>.trace.ndjson.gz``."""
    return f"{execution_id}-attempt-{attempt}.trace.ndjson.gz"


@login_required
def execution_trace_view(request: HttpRequest, pk: int, attempt: int) -> HttpResponse:
    """The attempt's raw trace as a gzip-compressed NDJSON download, after verifying its digest.

    404 when the attempt has no trace; when the stored bytes no longer match the recorded
    digest (or are not gzip), an error page with status 409 says so — never a 500 and never the
    damaged bytes."""
    if pk > MAX_INTEGER or attempt > MAX_INTEGER:  # past any id: the database would overflow
        raise Http404("This attempt has no recorded trace.")
    trace = (
        TraceArtifact.objects.select_related("execution")
        .filter(execution_id=pk, attempt=attempt)
        .first()
    )
    if trace is None:
        raise Http404("This attempt has no recorded trace.")
    try:
        read_artifact(bytes(trace.data), trace.digest)
    except TraceIntegrityError as exc:
        context = {"trace": trace, "execution": trace.execution, "problem": str(exc)}
        return render(request, "pages/trace_error.html", context, status=409)
    response = HttpResponse(bytes(trace.data), content_type="application/gzip")
    response["Content-Disposition"] = content_disposition_header(
        as_attachment=True, filename=trace_filename(trace.execution.execution_id, trace.attempt)
    )
    return response


class CompareForm(forms.Form):
    a = forms.IntegerField(label="Run A (before)", min_value=1, max_value=2**63 - 1)
    b = forms.IntegerField(label="Run B (after)", min_value=1, max_value=2**63 - 1)


@login_required
def compare_view(request: HttpRequest) -> HttpResponse:
    """Two runs side by side per case, candidate and repetition, regressions and improvements
    marked. No parameters: only the form. A parameter that is not a run number: the form with
    its errors, status 400. A run that does not exist: 404."""
    choices = recent_runs()
    context: dict[str, object] = {"choices": choices, "comparison": None}
    if "a" not in request.GET and "b" not in request.GET:
        context["form"] = CompareForm()
        return render(request, "pages/compare.html", context)
    form = CompareForm(request.GET)
    context["form"] = form
    if not form.is_valid():
        return render(request, "pages/compare.html", context, status=400)
    a, b = form.cleaned_data["a"], form.cleaned_data["b"]
    runs = compare_page_runs([a, b])
    if a not in runs or b not in runs:
        raise Http404("No such run.")
    context["comparison"] = compare_runs(runs[a], runs[b])
    return render(request, "pages/compare.html", context)


@login_required
def alerts_view(request: HttpRequest) -> HttpResponse:
    """The open alerts across bundles: those of each bundle's newest non-refresh report, newest first."""
    return render(request, "pages/alerts.html", {"alerts": open_alerts()})
