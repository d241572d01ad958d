"""Admin for runs, executions and attempts: read-only, because history is immutable (DESIGN.md
principle 3). Runs are started by the nightly task, the ``nightly`` command or the API."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from evalhub.admin_forms import EvalhubAdminMixin, ReadOnlyAdminMixin
from evalhub.templatetags.evalhub_format import format_usd
from runs.models import Alert, Attempt, CoverageCatalog, Execution, Report, Run, Scorecard, TraceArtifact


@admin.register(Run)
class RunAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "id",
        "night",
        "rotation_day",
        "trigger",
        "status",
        "spent",
        "cost_ceiling_usd",
        "has_unpriced",
        "stopped_at_ceiling",
        "created_at",
        "page",
    )
    list_display_links = ("id", "night")
    list_filter = ("status", "trigger", "has_unpriced", "stopped_at_ceiling", "schedule__rotation_day")
    list_select_related = ("schedule",)
    date_hierarchy = "created_at"
    search_fields = ("=id", "schedule__seed")
    fields = (
        "schedule",
        "trigger",
        "status",
        "selection",
        "cost_ceiling_usd",
        "spent",
        "has_unpriced",
        "stopped_at_ceiling",
        "error",
        "created_at",
        "started_at",
        "finished_at",
        "page",
        "executions_link",
    )
    readonly_fields = fields

    @admin.display(description="night", ordering="schedule__night")
    def night(self, run: Run) -> object:
        return run.schedule.night

    @admin.display(description="rotation day", ordering="schedule__rotation_day")
    def rotation_day(self, run: Run) -> int:
        return run.schedule.rotation_day

    @admin.display(description="spent (USD)", ordering="spent_usd")
    def spent(self, run: Run) -> str:
        text = format_usd(run.spent_usd)
        return f"{text} (some costs unknown)" if run.has_unpriced else text

    @admin.display(description="page")
    def page(self, run: Run) -> str:
        return format_html('<a href="{}">view run</a>', reverse("pages:run", args=[run.pk]))

    @admin.display(description="executions")
    def executions_link(self, run: Run) -> str:
        url = reverse("admin:runs_execution_changelist") + f"?run__id__exact={run.pk}"
        return format_html('<a href="{}">executions of this run</a>', url)


class AttemptInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = Attempt
    fields = ("number", "outcome", "error_code", "retryable", "message", "cost", "duration_ms", "started_at", "finished_at")
    readonly_fields = fields
    extra = 0
    can_delete = False

    @admin.display(description="cost (USD)")
    def cost(self, attempt: Attempt) -> str:
        return format_usd(attempt.cost_usd)


class TraceArtifactInline(ReadOnlyAdminMixin, admin.TabularInline):
    """An execution's recorded traces: sizes and digest only (the bytes are downloaded from the
    execution page, which verifies the digest first)."""

    model = TraceArtifact
    fields = ("attempt", "frame_count", "raw_bytes", "stored_bytes", "truncated", "digest", "download", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def get_queryset(self, request: HttpRequest) -> QuerySet[TraceArtifact]:
        return super().get_queryset(request).defer("data")

    @admin.display(description="download")
    def download(self, trace: TraceArtifact) -> str:
        url = reverse("pages:execution-trace", args=[trace.execution_id, trace.attempt])
        return format_html('<a href="{}">NDJSON, gzip</a>', url)


@admin.register(Execution)
class ExecutionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "execution_id",
        "run_link",
        "case_key",
        "candidate_key",
        "slot_key",
        "repetition",
        "status",
        "classification",
        "failure_code",
        "cost",
        "duration_ms",
    )
    list_filter = ("classification", "status", "failure_code", "cost_known", "slot_key", "candidate_key", "case_key")
    list_select_related = ("run__schedule",)
    search_fields = ("execution_id", "case_key", "candidate_key", "failure_code", "failure_message")
    fields = (
        "run",
        "execution_id",
        "position",
        "case_key",
        "candidate_key",
        "slot_key",
        "repetition",
        "status",
        "classification",
        "failure_code",
        "failure_category",
        "failure_retryable",
        "failure_message",
        "cost",
        "duration_ms",
        "started_at",
        "finished_at",
        "observation",
    )
    readonly_fields = fields
    inlines = (AttemptInline, TraceArtifactInline)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Execution]:
        return super().get_queryset(request).select_related("run__schedule")

    @admin.display(description="run", ordering="run")
    def run_link(self, execution: Execution) -> str:
        return format_html('<a href="{}">{}</a>', reverse("pages:run", args=[execution.run_id]), execution.run)

    @admin.display(description="cost (USD)", ordering="cost_usd")
    def cost(self, execution: Execution) -> str:
        return format_usd(execution.cost_usd, execution.cost_known)


def _run_page_link(run_id: int) -> str:
    return format_html('<a href="{}">run {}</a>', reverse("pages:run", args=[run_id]), run_id)


@admin.register(Scorecard)
class ScorecardAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Scorecards are made by scoring (and re-made by a refresh), never edited."""

    list_display = ("execution_id", "run", "case", "candidate", "scoring_version", "overall_score", "gate_passed", "passed", "created_at")
    list_filter = ("passed", "gate_passed", "scoring_version", "execution__candidate_key", "execution__case_key")
    list_select_related = ("execution",)
    search_fields = ("execution__execution_id", "execution__case_key", "execution__candidate_key")
    fields = ("execution", "run", "scoring_version", "overall_score", "gate_passed", "passed", "created_at", "document")
    readonly_fields = fields

    @admin.display(description="execution", ordering="execution__execution_id")
    def execution_id(self, scorecard: Scorecard) -> str:
        return scorecard.execution.execution_id

    @admin.display(description="run", ordering="execution__run")
    def run(self, scorecard: Scorecard) -> str:
        return _run_page_link(scorecard.execution.run_id)

    @admin.display(description="case", ordering="execution__case_key")
    def case(self, scorecard: Scorecard) -> str:
        return scorecard.execution.case_key

    @admin.display(description="candidate", ordering="execution__candidate_key")
    def candidate(self, scorecard: Scorecard) -> str:
        return scorecard.execution.candidate_key


class AlertInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = Alert
    fields = ("severity", "code", "case_key", "candidate_key", "message", "occurrences")
    readonly_fields = fields
    extra = 0
    can_delete = False


@admin.register(Report)
class ReportAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Reports are history: built by the reporting service, read here with their alerts."""

    list_display = ("id", "run_link", "bundle_id", "is_refresh", "executions", "scoreable", "passed", "mean_overall", "alert_count", "generated_at")
    list_filter = ("is_refresh", "source", "scoring_version", "bundle_id")
    search_fields = ("=run__id", "bundle_id")
    fields = (
        "run_link",
        "bundle_id",
        "source",
        "generated_at",
        "is_refresh",
        "scoring_version",
        "executions",
        "scoreable",
        "passed",
        "mean_overall",
        "previous",
        "comparison",
        "document",
        "created_at",
    )
    readonly_fields = fields
    inlines = (AlertInline,)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Report]:
        return super().get_queryset(request).annotate(alert_total=Count("alerts"))

    @admin.display(description="run", ordering="run")
    def run_link(self, report: Report) -> str:
        return _run_page_link(report.run_id)

    @admin.display(description="alerts", ordering="alert_total")
    def alert_count(self, report: Report) -> int:
        return report.alert_total


@admin.register(Alert)
class AlertAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("severity", "code", "case_key", "candidate_key", "message", "occurrences", "run_link", "created_at")
    list_filter = ("code", "severity")
    list_select_related = ("report",)
    search_fields = ("code", "case_key", "candidate_key", "message", "=report__run__id")
    fields = ("report", "run_link", "severity", "code", "case_key", "candidate_key", "message", "occurrences", "created_at")
    readonly_fields = fields

    @admin.display(description="run", ordering="report__run")
    def run_link(self, alert: Alert) -> str:
        return _run_page_link(alert.report.run_id)


@admin.register(CoverageCatalog)
class CoverageCatalogAdmin(EvalhubAdminMixin, admin.ModelAdmin):
    """The data behind a report's coverage section: editable, parsed as strict JSON and checked
    by the model's ``clean()`` (snake_case operation ids, no repeats)."""

    list_display = ("id", "operation_count", "capability_cases", "updated_at")
    fields = ("operation_ids", "capability_cases", "updated_at")
    readonly_fields = ("updated_at",)

    @admin.display(description="operations")
    def operation_count(self, catalog: CoverageCatalog) -> int:
        return len(catalog.operation_ids) if isinstance(catalog.operation_ids, list) else 0
