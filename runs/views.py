"""The run pages: the history of runs, one run with its report, exports of that report, one
execution with its raw trace downloads, the comparison of two runs and the open alerts. Sign-in
required."""

from __future__ import annotations

from collections import Counter

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render
from django.template.loader import render_to_string
from django.utils.http import content_disposition_header

from evalhub.conf import evalhub_setting
from evalhub.validation import MAX_INTEGER
from runs.creation import summarize
from runs.executors import TraceIntegrityError, read_artifact
from runs.models import CHAOS_RUN, Classification, ExecutionStatus, Report, Run, RunLane, RunStatus, TraceArtifact, trace_filename
from runs.queries import (
    CEILING_REACHED,
    HISTORY_RUNS,
    LEADERBOARD_NIGHTS,
    LEADERBOARD_SORTS,
    MAX_LEADERBOARD_NIGHTS,
    HistoryPaginator,
    candidate_history,
    compare_page_runs,
    compare_runs,
    execution_page,
    history_rows,
    history_runs,
    leaderboard,
    missing_environment,
    newest_bundle_reports,
    open_alerts,
    recent_runs,
    run_executions,
    run_page,
    run_report,
    waiting_for_a_worker,
)
from runs.signal import bundle_signal, compare_signal_context, latest_history_report, not_a_history, run_signal_context

RUNS_PER_PAGE = 25
#: The export formats of a report, in the order the run page links them, with their link text.
EXPORT_FORMATS = {"json": "JSON", "markdown": "Markdown", "junit": "JUnit XML", "github": "CI summary"}


@login_required
def run_history_view(request: HttpRequest) -> HttpResponse:
    """Runs newest first, 25 a page. A page that is not a number shows the first page, one past
    the end the last page (docs/failure-modes.md B11: never a 500)."""
    paginator = HistoryPaginator(history_runs(), RUNS_PER_PAGE)
    page = paginator.get_page(request.GET.get("page"))
    return render(request, "pages/runs.html", {"page": page, "runs": history_rows(page.object_list)})


@login_required
def run_detail_view(request: HttpRequest, pk: int) -> HttpResponse:
    """One run: its schedule, counts, cost, its report (aggregate, dimension means, alerts,
    comparison, exports) and every execution with its outcome and scorecard."""
    run = get_object_or_404(run_page(), pk=pk)
    executions = run_executions(run)
    settled = sum(1 for execution in executions if execution.status == ExecutionStatus.FINISHED)
    context = {
        # A run still pending or running updates itself as its executions settle (live-run.js).
        "live": run.status in (RunStatus.PENDING, RunStatus.RUNNING),
        "progress": {
            "settled": settled,
            "total": len(executions),
            "percent": round(100 * settled / len(executions)) if executions else 100,
        },
        "run": run,
        "summary": summarize(run),
        "executions": executions,
        "missing": missing_environment(executions),
        "waiting_for_a_worker": waiting_for_a_worker(executions),
        "ceiling_skips": sum(1 for execution in executions if execution.failure_code == CEILING_REACHED),
        "report": run_report(run),
        "export_formats": EXPORT_FORMATS.items(),
    }
    context.update(run_signal_context(run))
    return render(request, "pages/run.html", context)


@login_required
def run_export_view(request: HttpRequest, pk: int, fmt: str) -> HttpResponse:
    """The run's report as a download in ``fmt`` (json, markdown, junit, github); 404 for another
    format or a run without a report."""
    if fmt not in EXPORT_FORMATS:
        raise Http404("No such export format.")
    if pk > MAX_INTEGER:  # past any id: the report's run_id lookup would overflow SQLite's INTEGER
        raise Http404("No such run.")
    report = get_object_or_404(Report.objects.select_related("run"), run_id=pk)
    from runs.reporting import export_report

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


@login_required
def execution_trace_view(request: HttpRequest, pk: int, attempt: int) -> HttpResponse:
    """The attempt's raw trace as a gzip-compressed NDJSON download, after verifying its digest.

    404 when the attempt has no trace; when the stored bytes no longer match the recorded
    digest (or are not gzip), an error page with status 409 says so — never a 500 and never the
    damaged bytes."""
    if pk > MAX_INTEGER or attempt > MAX_INTEGER:  # past any id: the database would overflow
        raise Http404("This attempt has no recorded trace.")
    trace = TraceArtifact.objects.select_related("execution__run").filter(execution_id=pk, attempt=attempt).first()
    if trace is None:
        raise Http404("This attempt has no recorded trace.")
    try:
        read_artifact(bytes(trace.data), trace.digest)
    except TraceIntegrityError as exc:
        context = {"trace": trace, "execution": trace.execution, "problem": str(exc)}
        return render(request, "pages/trace_error.html", context, status=409)
    response = HttpResponse(bytes(trace.data), content_type="application/gzip")
    response["Content-Disposition"] = content_disposition_header(
        as_attachment=True,
        filename=trace_filename(trace.execution.run_id, trace.execution.execution_id, trace.attempt, lane=trace.execution.run.lane),
    )
    return response


class CompareForm(forms.Form):
    a = forms.IntegerField(label="Run A (before)", min_value=1, max_value=2**63 - 1)
    b = forms.IntegerField(label="Run B (after)", min_value=1, max_value=2**63 - 1)


@login_required
def compare_view(request: HttpRequest) -> HttpResponse:
    """Two runs side by side per case, candidate and repetition, regressions and improvements
    marked. No parameters: only the form. A parameter that is not a run number: the form with
    its errors, status 400. A run that does not exist: the form saying which, status 404. Runs
    that are not comparable (a scripted or refresh run, different bundles) get the reason and no
    table: counting regressions between them would mislead."""
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
    missing = [(name, pk) for name, pk in (("a", a), ("b", b)) if pk not in runs]
    for name, pk in missing:
        form.add_error(name, f"There is no run {pk}: pick one from the list.")
    if missing:
        return render(request, "pages/compare.html", context, status=404)
    context["comparison"] = compare_runs(runs[a], runs[b])
    context.update(compare_signal_context(context["comparison"]))
    return render(request, "pages/compare.html", context)


@login_required
def alerts_view(request: HttpRequest) -> HttpResponse:
    """The open alerts across bundles: those of each bundle's newest non-refresh report, newest
    first. With none, the page says when alerts start: a ready baseline and seven compatible reports."""
    alerts = open_alerts()
    context = {"alerts": alerts, "baseline_ready": bool(evalhub_setting("BASELINE_READY"))}
    if not alerts:
        context["newest_bundle"] = newest_bundle_reports()
    return render(request, "pages/alerts.html", context)


@login_required
def candidate_view(request: HttpRequest, key: str) -> HttpResponse:
    """One candidate: pass rate, mean score, p95 latency and cost per run as charts, and each
    case's pass rate across repetitions with its 95% Wilson interval. 404 for a key that is
    neither in the catalog nor in any run."""
    history = candidate_history(key)
    if history is None:
        raise Http404("No such candidate.")
    return render(request, "pages/candidate.html", {"history": history, "history_runs": HISTORY_RUNS})


class LeaderboardForm(forms.Form):
    nights = forms.IntegerField(
        label="Nights", min_value=1, max_value=MAX_LEADERBOARD_NIGHTS, required=False, help_text="How many of the newest live nights."
    )
    sort = forms.ChoiceField(
        label="Sort", required=False, choices=[(f"{sign}{key}", f"{sign}{key}") for key in LEADERBOARD_SORTS for sign in ("", "-")]
    )


#: The leaderboard's columns that sort, by sort key: (heading, first click descending?).
LEADERBOARD_COLUMNS = {
    "candidate": ("Candidate", False),
    "scoreable": ("Scoreable", True),
    "pass_rate": ("Pass rate", True),
    "mean_score": ("Mean score", True),
    "p95_latency_ms": ("p95 latency", False),
    "cost_per_pass": ("Cost per pass", False),
}


@login_required
def leaderboard_view(request: HttpRequest) -> HttpResponse:
    """Each candidate over the newest live nights (``?nights=``, 7 by default): pass rate with its
    95% Wilson interval, mean score, p95 latency, cost per passed execution, sortable (``?sort=``,
    ``-`` for descending), and pass rate against cost per pass as a chart with the best value
    marked. A bad parameter: the form with its error, status 400."""
    form = LeaderboardForm(request.GET)
    if not form.is_valid():
        return render(request, "pages/leaderboard.html", {"form": form, "board": None, "nights": LEADERBOARD_NIGHTS}, status=400)
    nights = form.cleaned_data["nights"] or LEADERBOARD_NIGHTS
    sort = form.cleaned_data["sort"] or "-pass_rate"
    board = leaderboard(nights=nights, sort=sort)
    columns = []
    for key, (heading, descending_first) in LEADERBOARD_COLUMNS.items():
        current = sort.removeprefix("-") == key
        descending = sort.startswith("-")
        next_sort = (key if descending else f"-{key}") if current else (f"-{key}" if descending_first else key)
        columns.append(
            {
                "key": key,
                "heading": heading,
                "href": f"?nights={nights}&sort={next_sort}",
                "aria_sort": ("descending" if descending else "ascending") if current else "",
            }
        )
    context = {"form": form, "board": board, "nights": nights, "columns": {column["key"]: column for column in columns}}
    return render(request, "pages/leaderboard.html", context)


@login_required
def run_progress_view(request: HttpRequest, pk: int) -> JsonResponse:
    """The run's progress for its page to poll while it runs (two queries, and the workers' status when executions are queued):
    ``{"status", "finished", "settled", "total", "counts": {classification: n}, "waitingForWorker": n,
    "rows": {pk: html}}`` (``waitingForWorker``: :func:`runs.queries.waiting_for_a_worker`),
    each row the same ``<tr>`` the page renders, so the page swaps rows in place without reloading."""
    run = get_object_or_404(Run.objects.select_related("schedule"), pk=pk)
    executions = run_executions(run)
    counts = Counter(execution.classification for execution in executions if execution.classification)
    return JsonResponse(
        {
            "status": run.status,
            "statusLabel": run.get_status_display(),
            "finished": run.status not in (RunStatus.PENDING, RunStatus.RUNNING),
            "settled": sum(1 for execution in executions if execution.status == ExecutionStatus.FINISHED),
            "total": len(executions),
            "counts": {value: counts.get(value, 0) for value in Classification.values},
            "waitingForWorker": waiting_for_a_worker(executions),
            "rows": {
                str(execution.pk): render_to_string("pages/_execution_row.html", {"execution": execution}, request=request)
                for execution in executions
            },
        }
    )


# --- signal across nights (docs/signal.md) -------------------------------------------------------


class SignalForm(forms.Form):
    run = forms.IntegerField(label="As of run", min_value=1, max_value=MAX_INTEGER, required=False)


@login_required
def signal_view(request: HttpRequest) -> HttpResponse:
    """The heat map: every case × candidate of one bundle over its newest measured nights (pass
    rate per night, flaky badges, significant changes with effect and p-value), as of ``?run=``
    or of the newest measured report. A bad ``run``: the form with its error, status 400; a run
    that does not exist: 404; a run that is not history (no report, a refresh, a scripted run,
    a re-run): the reason, no table."""
    form = SignalForm(request.GET)
    context: dict[str, object] = {"form": form, "signal": None, "note": ""}
    if not form.is_valid():
        return render(request, "pages/signal.html", context, status=400)
    run_id = form.cleaned_data["run"]
    report = latest_history_report(run_id=run_id)
    if run_id is not None and report is None:
        lane = Run.objects.filter(pk=run_id).values_list("lane", flat=True).first()
        if lane is None:
            form.add_error("run", f"There is no run {run_id}.")
            return render(request, "pages/signal.html", context, status=404)
        context["note"] = (
            f"Run {run_id} is {CHAOS_RUN}, so it has no history."
            if lane == RunLane.CHAOS
            else f"Run {run_id} has no report yet, so it has no history."
        )
        return render(request, "pages/signal.html", context)
    if report is not None:
        context["report"] = report
        context["note"] = f"Run {report.run_id} is {reason}: it is not history." if (reason := not_a_history(report)) else ""
        context["signal"] = bundle_signal(report)
    return render(request, "pages/signal.html", context)
