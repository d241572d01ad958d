"""Admin for runs, executions and attempts: read-only, because history is immutable (DESIGN.md
principle 3). Runs are started by the nightly task, the ``nightly`` command or the API."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from evalhub.admin_forms import ReadOnlyAdminMixin
from evalhub.templatetags.evalhub_format import format_usd
from runs.models import Attempt, Execution, Run


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
    inlines = (AttemptInline,)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Execution]:
        return super().get_queryset(request).select_related("run__schedule")

    @admin.display(description="run", ordering="run")
    def run_link(self, execution: Execution) -> str:
        return format_html('<a href="{}">{}</a>', reverse("pages:run", args=[execution.run_id]), execution.run)

    @admin.display(description="cost (USD)", ordering="cost_usd")
    def cost(self, execution: Execution) -> str:
        return format_usd(execution.cost_usd, execution.cost_known)
