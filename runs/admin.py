"""Admin for runs, executions and attempts: read-only, because history is immutable (docs/DESIGN.md
principle 3). Runs are started by the nightly task, the ``nightly`` command or the API; from the
run changelist staff can cancel runs, re-run their failed (or only infrastructure-failed)
executions as new runs, and run the chaos lane."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db import transaction
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django_q.admin import ScheduleAdmin as QScheduleAdmin
from django_q.models import Schedule as QSchedule

from evalhub.admin_forms import EvalhubAdminMixin, ReadOnlyAdminMixin, SecretSafeModelForm
from evalhub.templatetags.evalhub_format import format_usd
from runs.actions import RunActionError, cancel_run, rerun_run
from runs.alerting import send_test
from runs.dispatch import dispatch_run
from runs.models import (
    Alert,
    Attempt,
    CoverageCatalog,
    Delivery,
    DeliveryStatus,
    Execution,
    NotificationChannel,
    Report,
    RerunScope,
    Run,
    Scorecard,
    TraceArtifact,
)
from runs.periodic import PERIODIC_TASK_FUNCS
from schedules.models import ChaosScenario


@admin.register(Run)
class RunAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    # Fits a 1366 px window beside the filters: the rotation day, unknown costs and a stop at the
    # ceiling are filters; the cost reads against its ceiling in one column.
    list_display = ("id", "night", "trigger", "lane", "status", "repeat_of", "cost", "created_at", "page")
    list_display_links = ("id", "night")
    list_filter = ("status", "trigger", "lane", "has_unpriced", "stopped_at_ceiling", "schedule__rotation_day")
    list_select_related = ("schedule",)
    actions = ("cancel_runs", "rerun_failed", "rerun_infrastructure_failed", "rerun_skipped")
    date_hierarchy = "created_at"
    search_fields = ("=id", "schedule__seed")
    fields = (
        "schedule",
        "trigger",
        "status",
        "selection",
        "repeat_of",
        "repeat_scope",
        "ceiling",
        "spent",
        "reserved",
        "cancel_requested_at",
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

    def has_run_permission(self, request: HttpRequest) -> bool:
        """Cancelling and re-running are for staff (the API's write rule)."""
        return bool(request.user.is_active and request.user.is_staff)

    @admin.action(description="Cancel the selected runs", permissions=["run"])
    def cancel_runs(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        for run in queryset:
            try:
                skipped = cancel_run(run)
            except RunActionError as exc:
                self.message_user(request, str(exc), messages.ERROR)
                continue
            self.message_user(request, f"run {run.pk} cancelled: {skipped} pending execution(s) skipped, running ones interrupted")

    def _rerun(self, request: HttpRequest, queryset: QuerySet[Run], scope: str) -> None:
        for run in queryset:
            try:
                with transaction.atomic():
                    rerun = rerun_run(run, scope=scope)
                    dispatch_run(rerun)
            except RunActionError as exc:
                self.message_user(request, str(exc), messages.ERROR)
                continue
            self.message_user(
                request,
                f"run {rerun.pk} re-runs {rerun.executions.count()} {RerunScope(scope).label} of run {run.pk} (queued for the workers)",
            )

    @admin.action(description="Re-run the failed executions as a new run", permissions=["run"])
    def rerun_failed(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        self._rerun(request, queryset, RerunScope.FAILED)

    @admin.action(description="Re-run only the infrastructure-failed executions as a new run", permissions=["run"])
    def rerun_infrastructure_failed(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        self._rerun(request, queryset, RerunScope.INFRASTRUCTURE)

    @admin.action(description="Re-run the skipped executions as a new run (after adding credentials, or a cancel)", permissions=["run"])
    def rerun_skipped(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        self._rerun(request, queryset, RerunScope.SKIPPED)

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

    # The three amounts read alike ($12.00, not 12.000000 beside $0.00).
    @admin.display(description="cost ceiling (USD)", ordering="cost_ceiling_usd")
    def ceiling(self, run: Run) -> str:
        return format_usd(run.cost_ceiling_usd)

    @admin.display(description="reserved (USD)", ordering="reserved_usd")
    def reserved(self, run: Run) -> str:
        return format_usd(run.reserved_usd)

    @admin.display(description="cost", ordering="spent_usd")
    def cost(self, run: Run) -> str:
        """``$1.20 of $12.00``, with unknown costs and a stop at the ceiling said in words."""
        notes = [
            note for flag, note in ((run.has_unpriced, "some costs unknown"), (run.stopped_at_ceiling, "stopped at the ceiling")) if flag
        ]
        text = f"{format_usd(run.spent_usd)} of {format_usd(run.cost_ceiling_usd)}"
        return f"{text} ({'; '.join(notes)})" if notes else text

    @admin.display(description="page")
    def page(self, run: Run) -> str:
        return format_html('<a href="{}">view run</a>', reverse("pages:run", args=[run.pk]))

    @admin.display(description="executions")
    def executions_link(self, run: Run) -> str:
        url = reverse("admin:runs_execution_changelist") + f"?run__id__exact={run.pk}"
        return format_html('<a href="{}">executions of this run</a>', url)


class AttemptInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = Attempt
    fields = (
        "number",
        "outcome",
        "error_code",
        "retryable",
        "message",
        "cost",
        "counted_usd",
        "owner",
        "duration_ms",
        "started_at",
        "finished_at",
    )
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
        "owner",
        "lease_expires_at",
        "dispatches",
        "observation",
        "chaos",
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

    list_display = (
        "id",
        "run_link",
        "bundle_id",
        "is_refresh",
        "executions",
        "scoreable",
        "passed",
        "mean_overall",
        "alert_count",
        "generated_at",
    )
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


@admin.register(NotificationChannel)
class NotificationChannelAdmin(EvalhubAdminMixin, admin.ModelAdmin):
    """Where new alerts go. A webhook's URL is named by its environment variable, never typed here;
    "send a test" sends each selected channel a test notice now and says what happened."""

    list_display = ("name", "kind", "enabled", "url_env", "min_severity", "created_at")
    list_filter = ("kind", "enabled")
    fields = ("name", "kind", "enabled", "url_env", "recipients", "min_severity", "created_at")
    readonly_fields = ("created_at",)
    actions = ("send_test_notification",)

    @admin.action(description="Send a test notification to the selected channels")
    def send_test_notification(self, request: HttpRequest, queryset: QuerySet[NotificationChannel]) -> None:
        for channel in queryset.order_by("name"):
            delivery = send_test(channel)
            if delivery.status == DeliveryStatus.SENT:
                self.message_user(request, f"Test notification sent to {channel.name}.", messages.SUCCESS)
            else:
                self.message_user(request, f"Test notification to {channel.name} failed: {delivery.last_error}", messages.ERROR)


@admin.register(Delivery)
class DeliveryAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Every notification sent or being retried, with its outcome: a record, never edited."""

    list_display = ("id", "channel", "alert_code", "status", "attempts", "next_attempt_at", "sent_at", "last_error")
    list_filter = ("status", "channel")
    list_select_related = ("channel", "alert")
    fields = ("channel", "alert", "status", "attempts", "created_at", "next_attempt_at", "sent_at", "last_error")
    readonly_fields = fields

    @admin.display(description="alert", ordering="alert__code")
    def alert_code(self, delivery: Delivery) -> str:
        return delivery.alert.code if delivery.alert_id else "(test)"


@admin.action(description="Run the selected scenarios in the chaos lane (a chaos run, one execution per scenario)")
def run_chaos_scenarios(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[ChaosScenario]) -> None:
    """Inject each selected scenario's fault into evalhub's own pipeline and check its invariant."""
    from runs.chaos import ChaosError, run_chaos_lane

    if not request.user.is_staff:
        modeladmin.message_user(request, "only staff can run the chaos lane", messages.ERROR)
        return
    try:
        run = run_chaos_lane(keys=list(queryset.values_list("key", flat=True)))
    except ChaosError as exc:
        modeladmin.message_user(request, str(exc), messages.ERROR)
        return
    total = run.executions.count()
    held = run.executions.filter(classification="completed").count()
    url = reverse("pages:run", args=[run.pk])
    modeladmin.message_user(
        request,
        format_html('chaos run <a href="{}">{}</a>: {} of {} invariants held', url, run.pk, held, total),
        messages.SUCCESS if held == total else messages.ERROR,
    )


# The chaos scenarios are edited in the schedules app's admin; running them belongs to runs (the
# layers go one way), so the action is added to that admin here.
_chaos_admin = admin.site._registry.get(ChaosScenario)
if _chaos_admin is not None and run_chaos_scenarios not in (_chaos_admin.actions or ()):
    _chaos_admin.actions = (*(_chaos_admin.actions or ()), run_chaos_scenarios)


class PeriodicTaskForm(SecretSafeModelForm):
    """django-q2's scheduled-task form, refusing what a worker would run other than evalhub's
    own tasks: another function (``os.system``), arguments (its tasks take none: the nightly
    failed every night with one, and a pasted key was stored in each failed task's row) or a
    hook; a secret-shaped value is refused without being shown back, as in evalhub's own forms.
    ``manage.py setup_schedules`` puts back a declared task edited otherwise (``runs.periodic``)."""

    class Meta:
        model = QSchedule
        # Every field django-q2's own form shows (its editable ones).
        fields = (
            "name",
            "func",
            "hook",
            "args",
            "kwargs",
            "schedule_type",
            "minutes",
            "repeats",
            "next_run",
            "cron",
            "cluster",
            "intended_date_kwarg",
        )

    def clean(self) -> dict:
        cleaned = super().clean()
        if cleaned.get("func") and cleaned["func"] not in PERIODIC_TASK_FUNCS:
            self.add_error("func", f"evalhub's workers run only its own periodic tasks: {', '.join(PERIODIC_TASK_FUNCS)}.")
        for name in ("args", "kwargs"):
            if cleaned.get(name):
                self.add_error(name, "evalhub's periodic tasks take no arguments: leave this empty.")
        if cleaned.get("hook"):
            self.add_error("hook", "evalhub's periodic tasks record their result in their own rows: leave this empty.")
        return cleaned


class PeriodicTaskAdmin(QScheduleAdmin):
    """django-q2's scheduled tasks, as django-q2 shows them, with :class:`PeriodicTaskForm`."""

    form = PeriodicTaskForm


if admin.site.is_registered(QSchedule):
    admin.site.unregister(QSchedule)
admin.site.register(QSchedule, PeriodicTaskAdmin)
