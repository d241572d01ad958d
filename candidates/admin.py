"""Admin for budgets, slots (candidates inline, drag-and-drop order), candidates and model prices.

Every rule is the model's (constraints and ``clean()``); the forms come from
:mod:`evalhub.admin_forms`, which parse JSON strictly, check every constraint even when a field
is not on the form, and never send a secret-shaped value back to the browser.
"""

from __future__ import annotations

from typing import Any

from adminsortable2.admin import SortableStackedInline
from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, F, QuerySet
from django.http import HttpRequest
from import_export import resources
from import_export.admin import ImportExportModelAdmin
from import_export.formats.base_formats import CSV

from candidates.models import Budget, Candidate, ModelPrice, Slot
from candidates.prices import quoted_price
from evalhub.admin_forms import (
    EnvironmentNamesField,
    EvalhubAdminMixin,
    OffsetSortableAdminMixin,
    SecretSafeModelForm,
    renumber_positions,
)
from evalhub.secrets import redact
from evalhub.validation import REORDER_OFFSET


@admin.register(Budget)
class BudgetAdmin(EvalhubAdminMixin, admin.ModelAdmin):
    list_display = ("name", "max_latency_ms", "max_attempts", "max_cost_usd", "max_total_tokens", "candidate_count")
    search_fields = ("name",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Budget]:
        return super().get_queryset(request).annotate(candidate_count=Count("candidates"))

    @admin.display(description="candidates", ordering="candidate_count")
    def candidate_count(self, budget: Budget) -> int:
        return budget.candidate_count


ENVIRONMENT_HELP = (
    "Names of the environment variables this candidate needs, e.g. OPENAI_API_KEY (several: separated by commas). Never values."
)
#: What a saved schedule snapshots of a candidate: editing one of these does not reach it.
SNAPSHOT_FIELDS = ("adapter", "provider", "model", "tier", "reasoning_effort", "required_environment", "profile", "budget")


class CandidateFieldsMixin:
    """The required environment typed as plain names, and a warning that a saved schedule keeps
    the candidate as it was (shared by the candidate admin and the inline under its slot)."""

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "required_environment":
            kwargs.update(
                form_class=EnvironmentNamesField,
                widget=forms.TextInput(attrs={"class": "vTextField", "placeholder": "OPENAI_API_KEY"}),
                help_text=ENVIRONMENT_HELP,
            )
        if db_field.name == "model" and request is not None and "changelist" in (getattr(request.resolver_match, "url_name", "") or ""):
            kwargs.setdefault("widget", forms.TextInput(attrs={"size": 30}))
        return super().formfield_for_dbfield(db_field, request, **kwargs)  # type: ignore[misc]


def snapshot_values(candidates: QuerySet[Candidate]) -> dict[int, dict[str, Any]]:
    """What a schedule snapshots of each candidate, by pk, as stored now (one query)."""
    columns = [name if name != "budget" else "budget_id" for name in SNAPSHOT_FIELDS]
    return {row.pop("pk"): row for row in candidates.values("pk", *columns)}


def warn_saved_schedules_keep_the_old_candidate(request: HttpRequest, candidate: Candidate, before: dict[str, Any] | None) -> None:
    """Tell the editor that schedules already saved (tonight's, maybe) still run the candidate as
    it was, naming what changed (``before``: :func:`snapshot_values` of it before the save)."""
    if before is None:
        return
    after = snapshot_values(Candidate.objects.filter(pk=candidate.pk)).get(candidate.pk, {})
    fields = [name.replace("_id", "").replace("_", " ") for name, value in before.items() if after.get(name) != value]
    if fields:
        messages.warning(
            request,
            f"{candidate.key}: the {', '.join(fields)} change applies from the next schedule built. A schedule already "
            "saved (tonight's, if the nightly has run or saved it) keeps the candidate as it was; the Tonight page lists such differences.",
        )


class CandidateInlineForm(SecretSafeModelForm):
    """A candidate row under its slot. ``position`` is checked among the submitted rows by the
    formset and saved through an offset by :meth:`SlotAdmin.save_formset`, so swapping two rows
    is legal here (the whole-instance check would see the other row still holding the place)."""

    constraint_exclude = ("position",)

    def clean_position(self) -> int | None:
        position = self.cleaned_data.get("position")
        if position is None and self.instance.pk is not None:
            # The sortable inline leaves its hidden field optional (a new row gets the next free
            # place from the formset); a saved row posted without it was saved with no position,
            # breaking the NOT NULL column: a 500.
            raise ValidationError("Position is required: drag the row to its place and save again.", code="required")
        if position is not None and position >= REORDER_OFFSET:
            raise ValidationError(f"Position must be less than {REORDER_OFFSET}.", code="max_value")
        return position


class CandidateInline(CandidateFieldsMixin, EvalhubAdminMixin, SortableStackedInline):
    model = Candidate
    form = CandidateInlineForm
    ordering = ("position", "id")  # the sortable inline drags this field (the model orders by slot first)
    # Stacked: a candidate has too many fields for one table row. Drag the row headers to reorder.
    fields = (
        ("key", "tier"),
        ("adapter", "provider"),
        ("model", "reasoning_effort"),
        ("required_environment", "profile"),
        "budget",
    )
    extra = 0
    show_change_link = True


class SlotForm(SecretSafeModelForm):
    # The sortable admin leaves position off the form and gives a new slot the next free one on save.
    constraint_exclude = ("position",)


@admin.register(Slot)
class SlotAdmin(EvalhubAdminMixin, OffsetSortableAdminMixin, admin.ModelAdmin):
    """Slots in line-up order (drag to reorder), each with its candidates inline (drag to reorder)."""

    form = SlotForm
    list_display = ("position", "key", "candidate_list")
    search_fields = ("key", "candidates__key", "candidates__model")
    inlines = (CandidateInline,)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Slot]:
        return super().get_queryset(request).prefetch_related("candidates")

    @admin.display(description="candidates (in rotation order)")
    def candidate_list(self, slot: Slot) -> str:
        return ", ".join(candidate.key for candidate in slot.candidates.all())

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        if formset.model is not Candidate:
            super().save_formset(request, form, formset, change)
            return
        slot = form.instance
        # Unique (slot, position) is checked row by row: move the slot's candidates out of the
        # way, save the submitted rows, then renumber 0..n-1 in the submitted order.
        before = snapshot_values(Candidate.objects.filter(slot=slot))
        with transaction.atomic():
            Candidate.objects.filter(slot=slot, position__lt=REORDER_OFFSET).update(position=F("position") + REORDER_OFFSET)
            formset.save()
            renumber_positions(Candidate.objects.filter(slot=slot))
        for candidate_form in formset.forms:
            if candidate_form.instance.pk in before:
                warn_saved_schedules_keep_the_old_candidate(request, candidate_form.instance, before[candidate_form.instance.pk])


@admin.register(Candidate)
class CandidateAdmin(CandidateFieldsMixin, EvalhubAdminMixin, admin.ModelAdmin):
    # Fits a 1366 px window beside the filters: the adapter and provider are filters (and the
    # slot's name says its runtime), the position is the order on the slot's page.
    list_display = ("key", "slot", "model", "tier", "budget", "environment_names")
    list_editable = ("model", "tier")
    list_filter = ("slot", "adapter", "provider", "tier", "budget")
    list_select_related = ("slot", "budget")
    search_fields = ("key", "model", "slot__key", "profile")
    ordering = ("slot__position", "position", "id")
    fieldsets = (
        (None, {"fields": ("key", "slot", "position")}),
        ("Runtime", {"fields": ("adapter", "provider", "model", "tier", "reasoning_effort")}),
        ("Qualification", {"fields": ("required_environment", "profile")}),
        ("Budget", {"fields": ("budget", "price")}),
    )
    readonly_fields = ("price",)

    @admin.display(description="price")
    def price(self, candidate: Candidate) -> str:
        """What the model costs and where the figure comes from (the price table, or genai-prices)."""
        quoted = quoted_price(candidate.model) if candidate.pk else None
        if quoted is None:
            return "unknown: no price table row and none shipped by genai-prices (its cost is counted at the budget's maximum)"
        return quoted.line()

    def save_model(self, request: HttpRequest, obj: Candidate, form: Any, change: bool) -> None:
        before = snapshot_values(Candidate.objects.filter(pk=obj.pk)).get(obj.pk) if change else None
        super().save_model(request, obj, form, change)
        warn_saved_schedules_keep_the_old_candidate(request, obj, before)

    @admin.display(description="required environment")
    def environment_names(self, candidate: Candidate) -> str:
        names = candidate.required_environment
        return ", ".join(map(str, names)) if isinstance(names, list) and names else "—"


class ModelPriceResource(resources.ModelResource):
    """The price table as CSV (import and export in the admin): one row per model, matched on the
    model name ignoring case and blanks, so a re-import updates rows instead of duplicating
    them. Each imported row is validated like a form save (``full_clean``): a negative or absurd
    price, a blank model or a secret-shaped note is an error on its row and nothing is written."""

    class Meta:
        model = ModelPrice
        fields = ("model", "input_usd", "cached_input_usd", "output_usd", "reasoning_usd", "note")
        export_order = ("model", "input_usd", "cached_input_usd", "output_usd", "reasoning_usd", "note")
        import_id_fields = ("model",)
        clean_model_instances = True
        skip_unchanged = True
        report_skipped = True
        use_transactions = True

    def get_instance(self, instance_loader: Any, row: dict[str, Any]) -> ModelPrice | None:
        name = str(row.get("model") or "").strip()
        return ModelPrice.objects.filter(model__iexact=name).first() if name else None

    def before_import_row(self, row: Any, **kwargs: Any) -> None:
        if row.get("model") is not None:
            row["model"] = str(row["model"]).strip()

    def export_field(self, field: Any, instance: Any, **kwargs: Any) -> Any:
        """A cell of the export; a text redacted (a row written around validation may hold a secret)."""
        value = super().export_field(field, instance, **kwargs)
        return redact(value) if isinstance(value, str) else value

    def import_data(self, *args: Any, **kwargs: Any) -> Any:
        """Import, then redact what the admin's preview would echo back: a refused row's values
        and every row's diff (a secret-shaped note is refused, and never shown either)."""
        result = super().import_data(*args, **kwargs)
        for invalid in result.invalid_rows:
            invalid.values = tuple(value if value is None else redact(str(value)) for value in invalid.values)
        for row in result.rows:
            if row.diff:
                row.diff = [value if value is None else redact(str(value)) for value in row.diff]
        return result


@admin.register(ModelPrice)
class ModelPriceAdmin(EvalhubAdminMixin, ImportExportModelAdmin):
    """The price table the live harness computes costs from (USD per million tokens), with CSV
    import and export. A model without a row is priced from the data genai-prices ships (the
    candidate's page in the admin shows which); one neither knows has an unknown cost, shown as
    unknown — never $0."""

    resource_classes = [ModelPriceResource]
    # CSV only: a JSON or YAML upload of any shape reaches the library's parser unchecked (a 500).
    formats = [CSV]
    list_display = ("model", "input_usd", "cached_input_usd", "output_usd", "reasoning_usd", "note", "updated_at")
    search_fields = ("model", "note")
    fields = ("model", "input_usd", "cached_input_usd", "output_usd", "reasoning_usd", "note")
