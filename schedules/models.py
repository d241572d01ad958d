"""Workflow cases, chaos scenarios, and saved schedules with their entries.

A saved schedule is history: each entry snapshots the candidate and budget documents it was built
with and the case version, so editing the catalog never rewrites a past night (docs/DESIGN.md,
"History is immutable").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxLengthValidator, MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from evalhub.fields import DocumentField
from evalhub.validation import SecretFreeModel, key_validator, position_validators
from schedules.building import CANDIDATE_SCHEMA, SCHEDULE_SCHEMA  # noqa: F401  (re-exported)
from schedules.case_schema import assertions_problems, steps_problems

CASE_SCHEMA = "paperclip.runner.workflow-eval-case.v1"
PROVIDERS = ("codex", "opencode", "acpx")
#: The fields that make up a case's scenario: changing any of them gives the case a new version.
VERSIONED_FIELDS = ("steps", "assertions", "prompt")


def normalize_prompt(text: Any) -> Any:
    """A prompt as stored: line endings as ``\\n`` (browsers post ``\\r\\n``), no surrounding blanks."""
    return text.replace("\r\n", "\n").replace("\r", "\n").strip() if isinstance(text, str) else text


#: The longest case prompt evalhub stores, in characters.
MAX_PROMPT_LENGTH = 100_000


class WorkflowCase(SecretFreeModel):
    """One scenario of the catalog: steps, assertions and repetitions per nightly.

    ``position`` is the catalog order, which decides the slots a case meets each night.
    ``prompt`` is evalhub's task prompt for the case: what the live harness gives the agent
    (the reference's common preamble is the harness's; this is the per-case part).
    ``version`` is bumped by every writer (admin, API, ``load_cases``) whenever steps,
    assertions or the prompt change (:data:`VERSIONED_FIELDS`, :meth:`changes_version`).
    """

    key = models.CharField("id", max_length=100, validators=[key_validator])
    title = models.CharField(max_length=200)
    tags = models.JSONField(default=list, blank=True, help_text='Unique labels, e.g. ["response", "resolver"].')
    providers = models.JSONField(default=list, help_text='Subset of ["codex", "opencode", "acpx"], at least one.')
    steps = models.JSONField(default=list, help_text='The scenario\'s steps, e.g. [{"kind": "run_start", "taskMode": "ask"}].')
    assertions = models.JSONField(default=dict, blank=True)
    prompt = models.TextField(
        blank=True,
        # Runtimes refuse a turn past 1 MiB of input (codex); a task prompt is a page, not a book.
        validators=[MaxLengthValidator(MAX_PROMPT_LENGTH)],
        help_text="The task the agent reads at run start (plain text, at most 100 000 characters). Changing it makes a new case version.",
    )
    repetitions = models.PositiveIntegerField(default=1, validators=[MinValueValidator(1), MaxValueValidator(20)])
    position = models.PositiveIntegerField(default=0, help_text="Catalog order.", validators=position_validators)
    version = models.PositiveIntegerField(default=1)

    class Meta:
        ordering = ["position", "id"]
        verbose_name = "workflow case"
        constraints = [
            models.UniqueConstraint(
                fields=["key"], name="case_key_unique", violation_error_message="A workflow case with this id already exists."
            ),
            models.UniqueConstraint(
                fields=["position"],
                name="case_position_unique",
                violation_error_message="Another workflow case already has this position.",
            ),
            models.CheckConstraint(
                condition=Q(repetitions__gte=1) & Q(repetitions__lte=20),
                name="case_repetitions_range",
                violation_error_message="Repetitions must be from 1 to 20.",
            ),
            models.CheckConstraint(condition=~Q(title=""), name="case_title_not_blank", violation_error_message="Title must not be blank."),
        ]

    def __str__(self) -> str:
        return self.key

    def clean(self) -> None:
        errors: dict[str, list[str]] = {}
        if isinstance(self.title, str):
            self.title = self.title.strip()
            if not self.title:
                errors["title"] = ["Title must not be blank."]
        if not isinstance(self.tags, list) or not all(isinstance(tag, str) and tag.strip() for tag in self.tags):
            errors["tags"] = ['Tags must be a list of non-blank texts, e.g. ["response", "resolver"].']
        elif len(set(self.tags)) != len(self.tags):
            errors["tags"] = ["Tags must not repeat."]
        if not isinstance(self.providers, list) or not self.providers or any(p not in PROVIDERS for p in self.providers):
            errors["providers"] = ['Providers must be a non-empty list drawn from "codex", "opencode" and "acpx".']
        elif len(set(self.providers)) != len(self.providers):
            errors["providers"] = ["Providers must not repeat."]
        if problems := steps_problems(self.steps):
            errors["steps"] = [problem[0].upper() + problem[1:] + "." for problem in problems]
        if problems := assertions_problems(self.assertions):
            errors["assertions"] = [problem[0].upper() + problem[1:] + "." for problem in problems]
        self.prompt = normalize_prompt(self.prompt)
        if errors:
            raise ValidationError(errors)

    def changes_version(self, values: Mapping[str, Any]) -> bool:
        """Whether saving ``values`` (field name → new value; fields left out are unchanged) over
        this case changes its scenario — steps, assertions or prompt (prompts compared after
        :func:`normalize_prompt`) — so the case must get a new version."""
        for name in VERSIONED_FIELDS:
            if name not in values:
                continue
            new, old = values[name], getattr(self, name)
            if name == "prompt":
                new, old = normalize_prompt(new), normalize_prompt(old)
            if new != old:
                return True
        return False

    def to_document(self) -> dict[str, Any]:
        """The case as in ``workflow-cases.json`` (id, title, tags, providers, repetitions, steps, assertions).

        The reference's shape, byte for byte: the prompt is evalhub's and is left out (the API
        and the live executor read it from :attr:`prompt`)."""
        return {
            "id": self.key,
            "title": self.title,
            "tags": list(self.tags),
            "providers": list(self.providers),
            "repetitions": self.repetitions,
            "steps": self.steps,
            "assertions": self.assertions,
        }


class Fault(models.TextChoices):
    RESTART = "restart"
    DUPLICATE_DELIVERY = "duplicate_delivery"
    TRACE_INTERRUPTION = "trace_interruption"
    TRACE_TRUNCATION = "trace_truncation"
    STALE_CHECKPOINT = "stale_checkpoint"
    RETRY_EXHAUSTION = "retry_exhaustion"
    INTERACTION_TIMEOUT = "interaction_timeout"
    WAKE_RACE = "wake_race"


class Lane(models.TextChoices):
    CHAOS = "chaos"


class ChaosScenario(SecretFreeModel):
    """A named fault injected into evalhub's own pipeline, and the invariant that must hold under it."""

    key = models.CharField("id", max_length=100, validators=[key_validator])
    lane = models.CharField(max_length=16, choices=Lane.choices, default=Lane.CHAOS)
    fault = models.CharField(max_length=32, choices=Fault.choices)
    expected_invariant = models.CharField(max_length=300)
    position = models.PositiveIntegerField(default=0, validators=position_validators)

    class Meta:
        ordering = ["position", "id"]
        verbose_name = "chaos scenario"
        constraints = [
            models.UniqueConstraint(
                fields=["key"], name="chaos_key_unique", violation_error_message="A chaos scenario with this id already exists."
            ),
            models.UniqueConstraint(
                fields=["position"],
                name="chaos_position_unique",
                violation_error_message="Another chaos scenario already has this position.",
            ),
            models.CheckConstraint(
                condition=Q(fault__in=Fault.values),
                name="chaos_fault_known",
                violation_error_message="Fault must be one of the eight reference faults.",
            ),
            models.CheckConstraint(
                condition=~Q(expected_invariant=""),
                name="chaos_invariant_not_blank",
                violation_error_message="Expected invariant must not be blank.",
            ),
        ]

    def __str__(self) -> str:
        return self.key

    def clean(self) -> None:
        if isinstance(self.expected_invariant, str):
            self.expected_invariant = self.expected_invariant.strip()
            if not self.expected_invariant:
                raise ValidationError({"expected_invariant": "Expected invariant must not be blank."})

    def to_document(self) -> dict[str, str]:
        return {"id": self.key, "lane": self.lane, "fault": self.fault, "expectedInvariant": self.expected_invariant}


class Schedule(models.Model):
    """The plan for one night: one per (seed, rotation day, night).

    ``generated_at`` keeps the timestamp text exactly as given (the reference echoes it);
    ``candidates`` snapshots the week's resolved line-up documents.
    """

    seed = models.CharField(max_length=200)
    rotation_day = models.PositiveSmallIntegerField(validators=[MaxValueValidator(6)])
    night = models.DateField(help_text="The UTC date this schedule is for.")
    generated_at = models.CharField(max_length=64)
    candidates = DocumentField(default=list)
    expected_executions = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-night", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["seed", "rotation_day", "night"],
                name="schedule_one_per_seed_day_night",
                violation_error_message="A schedule for this seed, rotation day and night already exists.",
            ),
            models.CheckConstraint(
                condition=Q(rotation_day__lte=6),
                name="schedule_rotation_day_range",
                violation_error_message="Rotation day must be from 0 to 6.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.night} · day {self.rotation_day} · {self.seed}"

    def to_document(self, entries: list[ScheduleEntry] | None = None) -> dict[str, Any]:
        """The reference schedule document (``paperclip.runner.live-eval-schedule.v1``)."""
        rows = entries if entries is not None else list(self.entries.all())
        return {
            "schema": SCHEDULE_SCHEMA,
            "seed": self.seed,
            "rotationDay": self.rotation_day,
            "generatedAt": self.generated_at,
            "candidates": self.candidates,
            "entries": [row.to_document() for row in rows],
            "expectedExecutions": len(rows),
        }


class ScheduleEntry(models.Model):
    """One planned execution, with snapshots of the candidate, budget and case version it was built with."""

    schedule = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="entries")
    position = models.PositiveIntegerField()
    execution_id = models.CharField(max_length=32)
    case_key = models.CharField("case", max_length=100)
    case_version = models.PositiveIntegerField(default=1)
    candidate_key = models.CharField("candidate", max_length=100)
    slot_key = models.CharField("slot", max_length=100)
    repetition = models.PositiveIntegerField()
    candidate = DocumentField(help_text="The candidate document as it was when the schedule was built.")
    budget = DocumentField(help_text="The budget document as it was when the schedule was built.")

    class Meta:
        ordering = ["schedule", "position"]
        verbose_name_plural = "schedule entries"
        constraints = [
            models.UniqueConstraint(
                fields=["schedule", "execution_id"],
                name="entry_execution_id_unique_in_schedule",
                violation_error_message="This schedule already has an entry with this execution id.",
            ),
            models.UniqueConstraint(
                fields=["schedule", "position"],
                name="entry_position_unique_in_schedule",
                violation_error_message="This schedule already has an entry at this position.",
            ),
        ]

    def __str__(self) -> str:
        return self.execution_id

    def to_document(self) -> dict[str, Any]:
        return {
            "executionId": self.execution_id,
            "caseId": self.case_key,
            "candidateId": self.candidate_key,
            "slotId": self.slot_key,
            "repetition": self.repetition,
            "providerTrace": "raw",
            "budget": self.budget,
        }
