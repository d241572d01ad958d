"""Admin for budgets, slots (candidates inline, drag-and-drop order), candidates and model prices.

Every rule is the model's (constraints and ``clean()``); the forms come from
:mod:`evalhub.admin_forms`, which parse JSON strictly, check every constraint even when a field
is not on the form, and never send a secret-shaped value back to the browser.
"""

from __future__ import annotations

from typing import Any

from adminsortable2.admin import SortableStackedInline
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, F, QuerySet
from django.http import HttpRequest

from candidates.models import Budget, Candidate, ModelPrice, Slot
from candidates.services import REORDER_OFFSET
from evalhub.admin_forms import (
    EvalhubAdminMixin,
    OffsetSortableAdminMixin,
    SecretSafeModelForm,
    renumber_positions,
)


@admin.register(Budget)
class BudgetAdmin(EvalhubAdminMixin, admin.ModelAdmin):
    list_display = ("name", "max_latency_ms", "max_attempts", "max_cost_usd", "max_total_tokens", "candidate_count")
    search_fields = ("name",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Budget]:
        return super().get_queryset(request).annotate(candidate_count=Count("candidates"))

    @admin.display(description="candidates", ordering="candidate_count")
    def candidate_count(self, budget: Budget) -> int:
        return budget.candidate_count


class CandidateInlineForm(SecretSafeModelForm):
    """A candidate row under its slot. ``position`` is checked among the submitted rows by the
    formset and saved through an offset by :meth:`SlotAdmin.save_formset`, so swapping two rows
    is legal here (the whole-instance check would see the other row still holding the place)."""

    constraint_exclude = ("position",)

    def clean_position(self) -> int | None:
        position = self.cleaned_data.get("position")
        if position is not None and position >= REORDER_OFFSET:
            raise ValidationError(f"Position must be less than {REORDER_OFFSET}.", code="max_value")
        return position


class CandidateInline(EvalhubAdminMixin, SortableStackedInline):
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
        with transaction.atomic():
            Candidate.objects.filter(slot=slot, position__lt=REORDER_OFFSET).update(position=F("position") + REORDER_OFFSET)
            formset.save()
            renumber_positions(Candidate.objects.filter(slot=slot))


@admin.register(Candidate)
class CandidateAdmin(EvalhubAdminMixin, admin.ModelAdmin):
    list_display = ("key", "slot", "position", "adapter", "provider", "model", "tier", "budget", "environment_names")
    list_editable = ("model", "tier")
    list_filter = ("slot", "adapter", "provider", "tier", "budget")
    list_select_related = ("slot", "budget")
    search_fields = ("key", "model", "slot__key", "profile")
    ordering = ("slot__position", "position", "id")
    fieldsets = (
        (None, {"fields": ("key", "slot", "position")}),
        ("Runtime", {"fields": ("adapter", "provider", "model", "tier", "reasoning_effort")}),
        ("Qualification", {"fields": ("required_environment", "profile")}),
        ("Budget", {"fields": ("budget",)}),
    )

    @admin.display(description="required environment")
    def environment_names(self, candidate: Candidate) -> str:
        names = candidate.required_environment
        return ", ".join(map(str, names)) if isinstance(names, list) and names else "—"


@admin.register(ModelPrice)
class ModelPriceAdmin(EvalhubAdminMixin, admin.ModelAdmin):
    """The price table the live harness computes costs from (USD per million tokens). A model
    without a row has an unknown cost, shown as unknown — never $0."""

    list_display = ("model", "input_usd", "cached_input_usd", "output_usd", "reasoning_usd", "note", "updated_at")
    search_fields = ("model", "note")
    fields = ("model", "input_usd", "cached_input_usd", "output_usd", "reasoning_usd", "note")
