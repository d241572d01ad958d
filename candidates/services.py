"""Writes to the candidate catalog: manifest import/export and the reference data.

Every write goes through ``full_clean()`` (docs/DESIGN.md principle 2). An import is all or nothing: a
document that fails validation changes nothing and every problem names its slot, candidate and
field.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import CheckConstraint, F, Prefetch

from candidates.models import CANDIDATE_SCHEMA, Budget, Candidate, Slot
from evalhub.secrets import redact, secret_kinds
from evalhub.validation import REORDER_OFFSET

MANIFEST_SCHEMA = "paperclip.runner.live-eval-candidate-slots.v1"
MANIFEST_NOTE = (
    "The five candidate slots of the reference system, in order; slot order and candidate order inside a slot matter to the schedule."
)
SLOT_KEYS = {"id", "candidates"}
CANDIDATE_KEYS = {"schema", "id", "slotId", "adapter", "provider", "model", "tier", "reasoningEffort", "qualification", "budget"}
QUALIFICATION_KEYS = {"requiredEnvironment", "profile"}
BUDGET_KEYS = ("maxLatencyMs", "maxAttempts", "maxCostUsd", "maxTotalTokens")
#: The largest whole-number budget limit every supported database stores (a 32-bit signed integer).
MAX_BUDGET_INTEGER = 2_147_483_647
#: Check constraints a manifest reader fixes in one field: constraint name → field.
CONSTRAINT_FIELDS = {"candidate_adapter_matches_provider": "provider", "candidate_model_not_blank": "model"}

FIELD_NAMES = {
    "key": "id",
    "model": "model",
    "adapter": "adapter",
    "provider": "provider",
    "tier": "tier",
    "reasoning_effort": "reasoningEffort",
    "required_environment": "qualification.requiredEnvironment",
    "profile": "qualification.profile",
    "max_latency_ms": "budget.maxLatencyMs",
    "max_attempts": "budget.maxAttempts",
    "max_cost_usd": "budget.maxCostUsd",
    "max_total_tokens": "budget.maxTotalTokens",
    "name": "budget",
    "__all__": "",
}


class ManifestError(ValueError):
    """An import that failed validation; ``problems`` lists every problem, one sentence each.

    Problems quote ids and unknown keys from the document, so each one is redacted: a secret
    pasted as a slot id or as a key is named as a secret, never echoed (docs/failure-modes.md B12).
    """

    def __init__(self, problems: list[str]) -> None:
        problems = [redact(problem) for problem in problems]
        super().__init__("; ".join(problems))
        self.problems = problems


#: A candidate's four budget limits: latency (ms), attempts, cost (USD), total tokens.
BudgetValues = tuple[int, int, Decimal, int]
#: A candidate row the import will save, with the budget limits it asks for (``None``: invalid).
PlannedCandidate = tuple[Candidate, BudgetValues | None]


@dataclass(frozen=True)
class ImportSummary:
    slots: int
    candidates: int
    removed_candidates: int
    removed_slots: int
    created_budgets: int


def catalog_queryset():
    """Slots in order with their candidates (in order), slot and budget loaded: two queries."""
    return Slot.objects.order_by("position", "id").prefetch_related(
        Prefetch("candidates", queryset=Candidate.objects.select_related("slot", "budget").order_by("position", "id"))
    )


def catalog_lineup() -> tuple[list[dict[str, Any]], list[str]]:
    """``(slots, unscheduled slot ids)`` from one load of the catalog (two queries).

    ``slots`` is the catalog as the schedule core reads it, ``[{"id", "candidates": [candidate
    documents]}]``, without the slots that have no candidate yet: the core refuses a slot without
    candidates, and a slot saved in the admin before its candidates must not stop every nightly,
    preview and coverage call. Those slots' ids come second, in line-up order, for the pages to
    show as not scheduled.
    """
    slots: list[dict[str, Any]] = []
    unscheduled: list[str] = []
    for slot in catalog_queryset():
        candidates = [candidate.to_document() for candidate in slot.candidates.all()]
        if candidates:
            slots.append({"id": slot.key, "candidates": candidates})
        else:
            unscheduled.append(slot.key)
    return slots, unscheduled


def catalog_slots() -> list[dict[str, Any]]:
    """The scheduled slots of :func:`catalog_lineup` (every slot with at least one candidate)."""
    return catalog_lineup()[0]


def export_manifest() -> dict[str, Any]:
    """The candidate manifest in the format of the reference ``candidate-manifest.json``."""
    return {"schema": MANIFEST_SCHEMA, "note": MANIFEST_NOTE, "slots": catalog_slots()}


def _budget_values(document: Any, where: str, problems: list[str]) -> BudgetValues | None:
    """The four budget limits of a candidate document, or ``None`` after adding the problems found.

    Limits must be positive whole numbers up to ``MAX_BUDGET_INTEGER`` (maxCostUsd: a positive
    finite number) and fit the budget columns, so a bad budget is reported here rather than failing
    half-way through the import's transaction.
    """
    if not isinstance(document, dict):
        problems.append(f"{where}, field budget: must be an object with {', '.join(BUDGET_KEYS)}")
        return None
    unknown = sorted(set(document) - set(BUDGET_KEYS))
    if unknown:
        problems.append(f"{where}, field budget: unknown field {', '.join(map(str, unknown))}")
    values: list[Any] = []
    for name in BUDGET_KEYS:
        value = document.get(name)
        if name == "maxCostUsd":
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            try:
                number = Decimal(str(value)) if ok else None
            except InvalidOperation:
                number = None
            if number is None or not number.is_finite() or number <= 0:
                problems.append(f"{where}, field budget.{name}: must be a positive number of US dollars")
                return None
            values.append(number)
        else:
            if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= MAX_BUDGET_INTEGER:
                problems.append(f"{where}, field budget.{name}: must be a whole number from 1 to {MAX_BUDGET_INTEGER}")
                return None
            values.append(value)
    latency, attempts, cost, tokens = values
    probe = Budget(name="probe", max_latency_ms=latency, max_attempts=attempts, max_cost_usd=cost, max_total_tokens=tokens)
    try:
        probe.full_clean(exclude=["name"], validate_unique=False)
    except ValidationError as exc:
        problems.extend(_validation_messages(exc, where))
        return None
    return latency, attempts, cost, tokens


def _budget_for(values: BudgetValues, created: dict[tuple, Budget]) -> Budget:
    latency, attempts, cost, tokens = values
    budget = (
        Budget.objects.filter(max_latency_ms=latency, max_attempts=attempts, max_cost_usd=cost, max_total_tokens=tokens)
        .order_by("id")
        .first()
    )
    if budget is None and values in created:
        budget = created[values]
    if budget is None:
        cost_text = format(cost.normalize(), "f")
        name = f"budget-{latency}ms-{attempts}x-{cost_text}usd-{tokens}tok"
        # A budget renamed or edited in the admin may already hold the generated name.
        taken = set(Budget.objects.filter(name__startswith=name).values_list("name", flat=True))
        suffix = 2
        unique_name = name
        while unique_name in taken:
            unique_name, suffix = f"{name}-{suffix}", suffix + 1
        budget = Budget(
            name=unique_name,
            max_latency_ms=latency,
            max_attempts=attempts,
            max_cost_usd=cost,
            max_total_tokens=tokens,
        )
        created[values] = budget
    return budget


def _validation_messages(error: ValidationError, where: str) -> list[str]:
    messages = []
    for field, field_errors in error.message_dict.items():
        label = FIELD_NAMES.get(field, field)
        for message in field_errors:
            messages.append(f"{where}, field {label}: {message}" if label else f"{where}: {message}")
    return messages


def _clean_candidate(candidate: Candidate) -> None:
    """Field and model validation plus the check constraints; uniqueness is checked across the file."""
    candidate.full_clean(exclude=["slot", "budget"], validate_unique=False, validate_constraints=False)
    errors: dict[str, list[str]] = {}
    for constraint in Candidate._meta.constraints:
        if isinstance(constraint, CheckConstraint):
            try:
                constraint.validate(Candidate, candidate)
            except ValidationError as exc:
                errors.setdefault(CONSTRAINT_FIELDS.get(constraint.name, "__all__"), []).extend(exc.messages)
    if errors:
        raise ValidationError(errors)


def import_manifest(document: Mapping[str, Any]) -> ImportSummary:
    """Make the catalog equal to a manifest document (format of ``candidate-manifest.json``).

    Slots and candidates are matched by id: existing ones are updated, missing ones created,
    and ones not in the document deleted. Budgets are matched by their four values (an unknown
    combination creates a budget named after them). Raises :class:`ManifestError` listing every
    problem, naming slot, candidate and field, and then nothing has changed.

    Two steps: :class:`_ManifestReading` reads and validates the whole document into a plan of
    unsaved rows without writing anything; :func:`_apply_plan` writes the plan in one transaction.
    """
    problems = _document_problems(document)
    slots = document.get("slots")
    if not isinstance(slots, list) or not slots:
        raise ManifestError([*problems, "slots must be a non-empty list"])
    reading = _ManifestReading(
        problems=problems,
        existing_slots={slot.key: slot for slot in Slot.objects.all()},
        existing_candidates={candidate.key: candidate for candidate in Candidate.objects.all()},
    )
    for slot_index, slot_document in enumerate(slots, start=1):
        reading.read_slot(slot_index, slot_document)
    if reading.problems:
        raise ManifestError(reading.problems)
    return _apply_plan(reading)


def _document_problems(document: Any) -> list[str]:
    """The problems of the document's top level (schema, unknown fields, a secret in the note).

    Raises :class:`ManifestError` at once when ``document`` is not an object.
    """
    if not isinstance(document, Mapping):
        raise ManifestError(["the manifest must be a JSON object with schema and slots"])
    problems: list[str] = []
    if document.get("schema") != MANIFEST_SCHEMA:
        problems.append(f"schema must be {MANIFEST_SCHEMA}")
    unknown = sorted(set(document) - {"schema", "note", "slots"})
    if unknown:
        problems.append(f"unknown top-level field {', '.join(map(str, unknown))}")
    kinds = secret_kinds(document.get("note"))
    if kinds:
        problems.append(f"note looks like it contains a secret ({', '.join(kinds)}); remove it")
    return problems


@dataclass
class _ManifestReading:
    """One read of a manifest's slots: the rows to save (``plan``, unsaved, in document order) and
    every problem found, in document order. Reads the database only through the existing rows
    it is given; writes nothing.

    ``seen_slots`` maps each slot id to its 1-based place in the document, ``seen_candidates``
    each candidate id to its slot id, ``seen_models`` each (slot id, adapter, model in lower case,
    reasoning effort) to the first candidate id that runs it.
    """

    problems: list[str]
    existing_slots: dict[str, Slot]
    existing_candidates: dict[str, Candidate]
    seen_slots: dict[str, int] = dataclasses.field(default_factory=dict)
    seen_candidates: dict[str, str] = dataclasses.field(default_factory=dict)
    seen_models: dict[tuple[str, str, str, str], str] = dataclasses.field(default_factory=dict)
    plan: list[tuple[Slot, list[PlannedCandidate]]] = dataclasses.field(default_factory=list)

    def read_slot(self, slot_index: int, slot_document: Any) -> None:
        """Validate one slot and its candidates; plan them unless the slot itself is unusable
        (not an object, no id, a repeated id, no candidates)."""
        if not isinstance(slot_document, dict):
            self.problems.append(f"slot {slot_index}: must be an object with id and candidates")
            return
        slot_key = slot_document.get("id")
        where_slot = f"slot {slot_key}" if isinstance(slot_key, str) and slot_key else f"slot {slot_index}"
        self._unknown_fields(slot_document, SLOT_KEYS, where_slot)
        if not isinstance(slot_key, str) or not slot_key:
            self.problems.append(f"{where_slot}, field id: must be a non-blank text")
            return
        if slot_key in self.seen_slots:
            self.problems.append(f"{where_slot}: the id is used by slot {self.seen_slots[slot_key]} too; slot ids must be unique")
            return
        self.seen_slots[slot_key] = slot_index
        slot = self.existing_slots.get(slot_key) or Slot(key=slot_key)
        slot.position = slot_index - 1
        try:
            slot.full_clean(validate_unique=False, validate_constraints=False)
        except ValidationError as exc:
            self.problems.extend(_validation_messages(exc, where_slot))
        candidates = slot_document.get("candidates")
        if not isinstance(candidates, list) or not candidates:
            self.problems.append(f"{where_slot}, field candidates: must be a non-empty list")
            return
        planned = [self.read_candidate(slot_key, where_slot, index, document) for index, document in enumerate(candidates, start=1)]
        self.plan.append((slot, [candidate for candidate in planned if candidate is not None]))

    def read_candidate(self, slot_key: str, where_slot: str, candidate_index: int, document: Any) -> PlannedCandidate | None:
        """Validate one candidate of slot ``slot_key`` into an unsaved row (the existing one with
        that id, updated, or a new one); ``None`` when it cannot be planned at all (not an
        object, or an id already used)."""
        where = f"{where_slot}, candidate {candidate_index}"
        if not isinstance(document, dict):
            self.problems.append(f"{where}: must be an object")
            return None
        candidate_key = document.get("id")
        if isinstance(candidate_key, str) and candidate_key:
            where = f"{where_slot}, candidate {candidate_key}"
        self._unknown_fields(document, CANDIDATE_KEYS, where)
        if document.get("schema", CANDIDATE_SCHEMA) != CANDIDATE_SCHEMA:
            self.problems.append(f"{where}, field schema: must be {CANDIDATE_SCHEMA}")
        if document.get("slotId", slot_key) != slot_key:
            self.problems.append(f"{where}, field slotId: must be {slot_key}, the slot it is listed in")
        if isinstance(candidate_key, str) and candidate_key and not self._claim_candidate_key(candidate_key, slot_key, where):
            return None
        qualification = self._qualification(document, where)
        budget_values = _budget_values(document.get("budget"), where, self.problems)
        candidate = self.existing_candidates.get(candidate_key) if isinstance(candidate_key, str) else None
        candidate = candidate or Candidate()
        candidate.key = candidate_key if isinstance(candidate_key, str) else ""
        candidate.position = candidate_index - 1
        self._fill_candidate(candidate, document, qualification, where)
        try:
            _clean_candidate(candidate)
        except ValidationError as exc:
            self.problems.extend(_validation_messages(exc, where))
        self._check_model_once_per_slot(candidate, slot_key, where)
        return candidate, budget_values

    def _unknown_fields(self, document: Mapping[str, Any], known: set[str], where: str) -> None:
        extra = sorted(set(document) - known)
        if extra:
            self.problems.append(f"{where}: unknown field {', '.join(map(str, extra))}")

    def _claim_candidate_key(self, candidate_key: str, slot_key: str, where: str) -> bool:
        """Note ``candidate_key`` as used by ``slot_key``; ``False`` (with a problem) when an
        earlier candidate of the document has it."""
        if candidate_key in self.seen_candidates:
            self.problems.append(
                f"{where}, field id: already used in slot {self.seen_candidates[candidate_key]}; "
                "candidate ids must be unique across all slots"
            )
            return False
        self.seen_candidates[candidate_key] = slot_key
        return True

    def _qualification(self, document: Mapping[str, Any], where: str) -> Mapping[str, Any]:
        """The candidate's ``qualification`` object (``{}`` when absent or not an object)."""
        qualification = document.get("qualification", {})
        if not isinstance(qualification, dict):
            self.problems.append(f"{where}, field qualification: must be an object with requiredEnvironment")
            qualification = {}
        extra = sorted(set(qualification) - QUALIFICATION_KEYS)
        if extra:
            self.problems.append(f"{where}, field qualification: unknown field {', '.join(map(str, extra))}")
        return qualification

    def _fill_candidate(self, candidate: Candidate, document: Mapping[str, Any], qualification: Mapping[str, Any], where: str) -> None:
        """Copy the document's text fields and required environment onto ``candidate``; a field
        that is not text becomes ``""`` and a problem."""
        for attribute, source in (("adapter", "adapter"), ("provider", "provider"), ("model", "model"), ("tier", "tier")):
            value = document.get(source, "")
            setattr(candidate, attribute, value if isinstance(value, str) else "")
            if not isinstance(value, str):
                self.problems.append(f"{where}, field {source}: must be text")
        for attribute, value in (
            ("reasoning_effort", document.get("reasoningEffort", "")),
            ("profile", qualification.get("profile", "")),
        ):
            if not isinstance(value, str):
                self.problems.append(f"{where}, field {FIELD_NAMES[attribute]}: must be text")
                value = ""
            setattr(candidate, attribute, value)
        candidate.required_environment = qualification.get("requiredEnvironment", [])

    def _check_model_once_per_slot(self, candidate: Candidate, slot_key: str, where: str) -> None:
        """A slot runs a model (names compared ignoring case) with one adapter and reasoning effort once."""
        same_model = (slot_key, candidate.adapter, candidate.model.lower(), candidate.reasoning_effort)
        if candidate.model and same_model in self.seen_models:
            self.problems.append(
                f"{where}, field model: candidate {self.seen_models[same_model]} in this slot already runs this model "
                "(names compared ignoring case) with this adapter and reasoning effort"
            )
        self.seen_models.setdefault(same_model, candidate.key)


def _apply_plan(reading: _ManifestReading) -> ImportSummary:
    """Write a problem-free reading in one transaction: delete the candidates the document drops,
    save the slots and candidates in document order (with their budgets, created when no budget
    has the four values), then delete the slots the document drops."""
    created_budgets: dict[tuple, Budget] = {}
    with transaction.atomic():
        removed_candidates, _ = Candidate.objects.exclude(key__in=set(reading.seen_candidates)).delete()
        # Move every row out of the way first so swapped positions never clash mid-import.
        Slot.objects.update(position=F("position") + REORDER_OFFSET)
        Candidate.objects.update(position=F("position") + REORDER_OFFSET)
        for slot, planned in reading.plan:
            slot.save()
            for candidate, budget_values in planned:
                budget = _budget_for(budget_values, created_budgets)
                if budget.pk is None:
                    budget.full_clean()
                    budget.save()
                candidate.slot = slot
                candidate.budget = budget
                candidate.save()
        # Only now: a candidate may have moved out of a slot that the document drops.
        removed_slots, _ = Slot.objects.exclude(key__in=set(reading.seen_slots)).delete()
    return ImportSummary(
        slots=len(reading.seen_slots),
        candidates=len(reading.seen_candidates),
        removed_candidates=removed_candidates,
        removed_slots=removed_slots,
        created_budgets=len(created_budgets),
    )


def load_reference_budgets(documents: list[Mapping[str, Any]]) -> int:
    """Create or update the named reference budgets; returns how many were created."""
    created = 0
    for document in documents:
        budget = Budget.objects.filter(name=document["name"]).first() or Budget(name=document["name"])
        created += budget.pk is None
        budget.max_latency_ms = document["maxLatencyMs"]
        budget.max_attempts = document["maxAttempts"]
        budget.max_cost_usd = Decimal(str(document["maxCostUsd"]))
        budget.max_total_tokens = document["maxTotalTokens"]
        budget.full_clean()
        budget.save()
    return created
