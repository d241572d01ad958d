"""Admin for workflow cases (drag-and-drop catalog order), chaos scenarios, saved schedules
(read-only: history is immutable) and the "preview a schedule" page.

The preview builds any night's schedule for a seed, a date or a rotation day, and a selection,
without saving anything; it only calls :func:`schedules.services.preview_schedule` and
:func:`schedules.services.catalog_coverage`.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html_join

from candidates.admin import CandidateAdmin, SlotAdmin
from candidates.models import Candidate, Slot
from evalhub.admin_forms import (
    EvalhubAdminMixin,
    OffsetSortableAdminMixin,
    ReadOnlyAdminMixin,
    SecretSafeFormMixin,
    SecretSafeModelForm,
)
from evalhub.conf import evalhub_setting
from evalhub.secrets import redact
from evalhub.templatetags.evalhub_format import format_usd
from evalhub.validation import validate_no_secrets
from schedules.building import ROTATION_DAYS, ScheduleError, ceiling_projection
from schedules.coverage import COVERAGE_DESCRIPTIONS, COVERAGE_INVARIANTS, slot_load
from schedules.models import VERSIONED_FIELDS, ChaosScenario, Schedule, ScheduleEntry, WorkflowCase
from schedules.services import Selection, campaign_ceiling, catalog_coverage, coverage_warning, preview_schedule

#: Set on a request once it changed the catalog, so its view checks the coverage once.
_CATALOG_CHANGED = "_evalhub_catalog_changed"


class CoverageWarningMixin:
    """After a save, delete or reorder of the catalog (candidates, slots, workflow cases), warn
    when the week's coverage no longer holds: ``nightly`` refuses to run then
    (:func:`schedules.services.require_coverage`), and "added successfully" alone would hide it.

    The writes mark the request; the view (add/change form, changelist with its editable rows
    and bulk delete, delete page, drag-and-drop reorder) computes the coverage once at the end,
    after its transaction, however many rows it saved.
    """

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)  # type: ignore[misc]
        setattr(request, _CATALOG_CHANGED, True)

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        super().delete_model(request, obj)  # type: ignore[misc]
        setattr(request, _CATALOG_CHANGED, True)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        super().delete_queryset(request, queryset)  # type: ignore[misc]
        setattr(request, _CATALOG_CHANGED, True)

    def changeform_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return self._warn_about_coverage(request, super().changeform_view(request, *args, **kwargs))  # type: ignore[misc]

    def changelist_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return self._warn_about_coverage(request, super().changelist_view(request, *args, **kwargs))  # type: ignore[misc]

    def delete_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return self._warn_about_coverage(request, super().delete_view(request, *args, **kwargs))  # type: ignore[misc]

    def update_order(self, request: HttpRequest) -> HttpResponse:
        """The drag-and-drop reorder (django-admin-sortable2); the warning shows on the next page."""
        response = super().update_order(request)  # type: ignore[misc]
        if response.status_code == 200:
            setattr(request, _CATALOG_CHANGED, True)
        return self._warn_about_coverage(request, response)

    def _warn_about_coverage(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if getattr(request, _CATALOG_CHANGED, False):
            setattr(request, _CATALOG_CHANGED, False)
            warning = coverage_warning(seed=evalhub_setting("SCHEDULE_SEED"))
            if warning:
                messages.warning(request, warning)
        return response


# The candidate and slot admins live in candidates/admin.py, which may not import schedules (the
# apps are layers, pyproject.toml [tool.importlinter]): they are registered again here with the
# coverage check on top, as a project extends another app's admin.
class CoverageCheckedSlotAdmin(CoverageWarningMixin, SlotAdmin):
    pass


class CoverageCheckedCandidateAdmin(CoverageWarningMixin, CandidateAdmin):
    pass


admin.site.unregister((Slot, Candidate))
admin.site.register(Slot, CoverageCheckedSlotAdmin)
admin.site.register(Candidate, CoverageCheckedCandidateAdmin)


class WorkflowCaseForm(SecretSafeModelForm):
    # The sortable admin leaves position off the form and gives a new case the next free one on save.
    constraint_exclude = ("position",)


@admin.register(WorkflowCase)
class WorkflowCaseAdmin(CoverageWarningMixin, EvalhubAdminMixin, OffsetSortableAdminMixin, admin.ModelAdmin):
    """The catalog in order (drag to reorder: the order decides which slots a case meets)."""

    form = WorkflowCaseForm
    list_display = ("position", "key", "title", "repetitions", "tag_list", "provider_list", "version")
    search_fields = ("key", "title")
    list_filter = ("repetitions",)
    readonly_fields = ("version",)
    fields = ("key", "title", "tags", "providers", "repetitions", "steps", "assertions", "prompt", "version")

    @admin.display(description="tags")
    def tag_list(self, case: WorkflowCase) -> str:
        return ", ".join(map(str, case.tags)) if isinstance(case.tags, list) else ""

    @admin.display(description="providers")
    def provider_list(self, case: WorkflowCase) -> str:
        return ", ".join(map(str, case.providers)) if isinstance(case.providers, list) else ""

    def save_model(self, request: HttpRequest, obj: WorkflowCase, form: Any, change: bool) -> None:
        # Schedule entries keep the case version they were built with; a changed scenario
        # (steps, assertions or prompt) is a new version. The stored row is the reference: the
        # form's obj already holds the submitted values.
        if change and WorkflowCase.objects.get(pk=obj.pk).changes_version({name: getattr(obj, name) for name in VERSIONED_FIELDS}):
            obj.version += 1
        super().save_model(request, obj, form, change)


@admin.register(ChaosScenario)
class ChaosScenarioAdmin(EvalhubAdminMixin, admin.ModelAdmin):
    list_display = ("key", "fault", "lane", "expected_invariant", "position")
    list_filter = ("fault", "lane")
    search_fields = ("key", "expected_invariant")


class ScheduleEntryInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = ScheduleEntry
    fields = ("position", "execution_id", "case_key", "case_version", "candidate_key", "slot_key", "repetition", "max_cost")
    readonly_fields = fields
    extra = 0
    can_delete = False

    @admin.display(description="max cost")
    def max_cost(self, entry: ScheduleEntry) -> Any:
        return format_usd(entry.budget.get("maxCostUsd")) if isinstance(entry.budget, dict) else "—"


@admin.register(Schedule)
class ScheduleAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Saved schedules are history: view only. The changelist links to the preview page."""

    list_display = ("night", "rotation_day", "seed", "expected_executions", "generated_at", "created_at")
    list_filter = ("rotation_day", "seed")
    date_hierarchy = "night"
    search_fields = ("seed", "generated_at")
    fields = ("seed", "night", "rotation_day", "generated_at", "expected_executions", "line_up", "run_links", "created_at")
    readonly_fields = fields
    inlines = (ScheduleEntryInline,)

    @admin.display(description="line-up")
    def line_up(self, schedule: Schedule) -> str:
        candidates = schedule.candidates if isinstance(schedule.candidates, list) else []
        return (
            format_html_join(
                ", ", "{} ({}, {})", ((c.get("id"), c.get("slotId"), c.get("tier")) for c in candidates if isinstance(c, dict))
            )
            or "—"
        )

    @admin.display(description="runs")
    def run_links(self, schedule: Schedule) -> str:
        runs = schedule.runs.order_by("-created_at", "-id")
        return (
            format_html_join(
                ", ",
                '<a href="{}">run {} ({}, {})</a>',
                ((reverse("pages:run", args=[run.pk]), run.pk, run.trigger, run.status) for run in runs),
            )
            or "—"
        )

    def get_urls(self) -> list[Any]:
        preview = path("preview/", self.admin_site.admin_view(self.preview_view), name="schedules_schedule_preview")
        return [preview, *super().get_urls()]

    def preview_view(self, request: HttpRequest) -> HttpResponse:
        """Build a schedule for a seed, a date (midnight UTC) or a rotation day, and a selection; save nothing."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        form = SchedulePreviewForm(request.GET or {"seed": evalhub_setting("SCHEDULE_SEED")})
        document: dict[str, Any] | None = None
        coverage: list[dict[str, Any]] = []
        coverage_error = ""
        if form.is_valid():
            data = form.cleaned_data
            night = data["night"] or timezone.now().astimezone(dt.UTC).date()
            selection = Selection(candidate_ids=tuple(data["candidates"]), case_ids=tuple(data["cases"]), limit=data["limit"])
            try:
                document = preview_schedule(
                    seed=data["seed"],
                    now=timezone.now(),
                    rotation_day=data["rotation_day"],
                    generated_at=f"{night.isoformat()}T00:00:00.000Z",
                    selection=selection,
                )
            except ScheduleError as exc:
                form.add_error(None, redact(str(exc)))
            try:
                holds = catalog_coverage(seed=data["seed"])
            except ScheduleError as exc:
                coverage_error = redact(str(exc))
            else:
                coverage = [
                    {"name": name, "description": COVERAGE_DESCRIPTIONS[name], "holds": holds.get(name) is True}
                    for name in COVERAGE_INVARIANTS
                ]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Preview a schedule",
            "form": form,
            "document": document,
            "load": slot_load(document) if document else {},
            "worst_case_cost": _worst_case_cost(document) if document else None,
            "projection": ceiling_projection(document["entries"], campaign_ceiling()) if document else None,
            "coverage": coverage,
            "coverage_error": coverage_error,
        }
        return TemplateResponse(request, "admin/schedules/schedule/preview.html", context)


def _worst_case_cost(document: dict[str, Any]) -> Decimal:
    """What the entries may spend at most: the sum of their budgets' maxCostUsd (USD)."""
    return sum((Decimal(str(entry["budget"]["maxCostUsd"])) for entry in document["entries"]), Decimal(0))


class SchedulePreviewForm(SecretSafeFormMixin, forms.Form):
    """The preview's inputs (a GET form, so a preview is a link that can be shared)."""

    seed = forms.CharField(
        max_length=200,
        validators=[validate_no_secrets],
        widget=forms.TextInput(attrs={"class": "vTextField"}),
        help_text="The schedule seed.",
    )
    night = forms.DateField(
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text="Built as generated at midnight UTC of this date (today, UTC, when blank).",
    )
    rotation_day = forms.TypedChoiceField(
        required=False,
        coerce=int,
        empty_value=None,
        choices=[("", "derived from the date"), *((day, str(day)) for day in range(ROTATION_DAYS))],
        help_text="Override the rotation day (0..6) the date would give.",
    )
    candidates = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, help_text="Only these candidates (none ticked: all)."
    )
    cases = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, help_text="Only these workflow cases (none ticked: all)."
    )
    limit = forms.IntegerField(required=False, min_value=1, max_value=100_000, help_text="At most this many executions.")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        candidates: QuerySet[Candidate] = Candidate.objects.select_related("slot").order_by("slot__position", "position", "id")
        self.fields["candidates"].choices = [(c.key, f"{c.key} ({c.slot.key}, {c.tier})") for c in candidates]
        self.fields["cases"].choices = [(c.key, c.key) for c in WorkflowCase.objects.order_by("position", "id")]
