"""REST endpoints for slots, candidates and budgets (``/api/slots/``, ``/api/candidates/``, ``/api/budgets/``).

Field names follow the reference candidate document (``paperclip.runner.live-eval-candidate.v1``,
camelCase). Writes build the model instance and run ``full_clean()``
(:class:`evalhub.api.serializers.ModelCleanSerializer`), so they accept and refuse exactly what the
admin and the manifest import do.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch, QuerySet
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from candidates.filters import CandidateFilter
from candidates.models import CANDIDATE_SCHEMA, Adapter, Budget, Candidate, Provider, Slot, Tier
from evalhub.api.serializers import KeyRelatedField, ModelCleanSerializer, PassThroughChoiceField, RejectUnknownFieldsMixin, UsdField
from evalhub.api.views import CatalogViewSet
from evalhub.validation import ENV_NAME_PATTERN

LENIENT_TEXT = {"allow_blank": True, "trim_whitespace": False}


class BudgetSerializer(ModelCleanSerializer):
    """A named budget: ``{name, maxLatencyMs, maxAttempts, maxCostUsd, maxTotalTokens}``.

    ``maxCostUsd`` is a JSON number of US dollars; the three others are whole numbers above 0.
    """

    model_class = Budget

    name = serializers.CharField(**LENIENT_TEXT)
    maxLatencyMs = serializers.IntegerField(source="max_latency_ms", help_text="Per turn, in milliseconds.")
    maxAttempts = serializers.IntegerField(source="max_attempts")
    maxCostUsd = UsdField(source="max_cost_usd")
    maxTotalTokens = serializers.IntegerField(source="max_total_tokens")


class BudgetDocumentSerializer(serializers.Serializer):
    """The reference budget object inside a candidate document (read-only)."""

    maxLatencyMs = serializers.IntegerField(source="max_latency_ms", read_only=True)
    maxAttempts = serializers.IntegerField(source="max_attempts", read_only=True)
    maxCostUsd = UsdField(source="max_cost_usd", read_only=True)
    maxTotalTokens = serializers.IntegerField(source="max_total_tokens", read_only=True)


@extend_schema_field(
    {
        "type": "array",
        "items": {"type": "string", "pattern": ENV_NAME_PATTERN.pattern},
        "description": 'Environment variable names, never values, e.g. ["OPENAI_API_KEY"].',
    }
)
class EnvironmentNamesField(serializers.JSONField):
    """Any JSON here; the model decides (a list of unique ``^[A-Z_][A-Z0-9_]*$`` names, docs/failure-modes.md B8)."""


class QualificationSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    """``{requiredEnvironment: [names], profile}``; ``profile`` is omitted on read when blank."""

    requiredEnvironment = EnvironmentNamesField(source="required_environment", required=False)
    profile = serializers.CharField(required=False, **LENIENT_TEXT)


class SlotSerializer(ModelCleanSerializer):
    """A slot: ``{id, position, candidates: [candidate ids in rotation order]}``.

    ``candidates`` is read-only (a candidate names its slot with ``slotId``). A new slot without a
    ``position`` goes last.
    """

    model_class = Slot

    id = serializers.CharField(source="key", **LENIENT_TEXT)
    position = serializers.IntegerField(required=False, help_text="Slot order decides the schedule.")
    candidates = serializers.SerializerMethodField(help_text="Candidate ids in rotation order (read-only).")

    def get_candidates(self, slot: Slot) -> list[str]:
        return [candidate.key for candidate in slot.candidates.all()]

    def position_scope(self, instance: Slot) -> QuerySet:
        return Slot.objects.all()


class CandidateSerializer(ModelCleanSerializer):
    """A candidate as the reference document, plus ``position`` (order inside its slot) and ``budgetName``.

    Reads return ``budget`` as the reference budget object and ``budgetName`` naming it; writes
    choose the budget by ``budgetName`` (``budget`` is read-only). Optional ``reasoningEffort`` and
    ``qualification.profile`` are omitted when blank, as in the reference manifest. A new candidate
    without a ``position`` goes last in its slot.
    """

    model_class = Candidate

    schema = serializers.SerializerMethodField()
    id = serializers.CharField(source="key", **LENIENT_TEXT)
    slotId = KeyRelatedField(
        source="slot",
        slug_field="key",
        queryset=Slot.objects.all(),
        error_messages={"does_not_exist": "There is no slot with this id.", "invalid": "Must be a slot id."},
    )
    adapter = PassThroughChoiceField(choices=Adapter.choices)
    provider = PassThroughChoiceField(choices=Provider.choices)
    model = serializers.CharField(**LENIENT_TEXT)
    tier = PassThroughChoiceField(choices=Tier.choices)
    reasoningEffort = serializers.CharField(source="reasoning_effort", required=False, **LENIENT_TEXT)
    qualification = QualificationSerializer(source="*", required=False)
    budget = BudgetDocumentSerializer(read_only=True)
    budgetName = KeyRelatedField(
        source="budget",
        slug_field="name",
        queryset=Budget.objects.all(),
        error_messages={"does_not_exist": "There is no budget with this name.", "invalid": "Must be a budget name."},
    )
    position = serializers.IntegerField(required=False, help_text="Order inside the slot: week d plays candidate d mod n.")

    def get_schema(self, candidate: Candidate) -> str:
        return CANDIDATE_SCHEMA

    def position_scope(self, instance: Candidate) -> QuerySet | None:
        return Candidate.objects.filter(slot=instance.slot) if instance.slot_id else None

    def to_representation(self, instance: Candidate) -> dict[str, Any]:
        data = super().to_representation(instance)
        if not data.get("reasoningEffort"):
            data.pop("reasoningEffort", None)
        if not data["qualification"].get("profile"):
            data["qualification"].pop("profile", None)
        return data


class CandidateDocumentSerializer(serializers.Serializer):
    """The reference candidate document as a schedule snapshots it (documentation of responses only)."""

    schema = serializers.CharField(help_text=CANDIDATE_SCHEMA)
    id = serializers.CharField()
    slotId = serializers.CharField()
    adapter = serializers.ChoiceField(choices=Adapter.choices)
    provider = serializers.ChoiceField(choices=Provider.choices)
    model = serializers.CharField()
    tier = serializers.ChoiceField(choices=Tier.choices)
    reasoningEffort = serializers.CharField(required=False)
    qualification = QualificationSerializer()
    budget = BudgetDocumentSerializer()


class BudgetViewSet(CatalogViewSet):
    """Budgets by name: ``/api/budgets/`` and ``/api/budgets/{name}/``.

    Writes need a staff account. Deleting a budget that candidates still use is a 409 naming them.
    """

    queryset = Budget.objects.order_by("name", "id")
    serializer_class = BudgetSerializer
    lookup_field = "name"
    lookup_url_kwarg = "name"


class SlotViewSet(CatalogViewSet):
    """Slots in line-up order: ``/api/slots/`` and ``/api/slots/{id}/``.

    Writes need a staff account. Deleting a slot deletes its candidates (as in the admin).
    """

    queryset = Slot.objects.order_by("position", "id").prefetch_related(
        Prefetch("candidates", queryset=Candidate.objects.order_by("position", "id").only("id", "key", "slot_id"))
    )
    serializer_class = SlotSerializer
    lookup_field = "key"


class CandidateViewSet(CatalogViewSet):
    """Candidates in line-up order (slot, then position): ``/api/candidates/`` and ``/api/candidates/{id}/``.

    Filters: ``slot``, ``adapter``, ``provider``, ``tier``, ``budget``. Writes need a staff account.
    """

    queryset = Candidate.objects.select_related("slot", "budget").order_by("slot__position", "position", "id")
    serializer_class = CandidateSerializer
    filterset_class = CandidateFilter
    lookup_field = "key"
