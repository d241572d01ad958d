"""Runs, executions and attempts: what happened when a schedule was executed.

History is append-only: a run is created with one pending execution per selected schedule entry;
workers claim rows with conditional updates and a unique constraint makes a second delivery
harmless (DESIGN.md principle 4, known-failure-modes B1).
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from schedules.models import Schedule, ScheduleEntry


class Trigger(models.TextChoices):
    NIGHTLY = "nightly", "nightly"
    MANUAL = "manual", "manual"


class RunStatus(models.TextChoices):
    PENDING = "pending", "pending"
    RUNNING = "running", "running"
    FINISHED = "finished", "finished"
    FAILED = "failed", "failed"


class ExecutionStatus(models.TextChoices):
    PENDING = "pending", "pending"
    RUNNING = "running", "running"
    FINISHED = "finished", "finished"


class Classification(models.TextChoices):
    COMPLETED = "completed", "completed"
    CANDIDATE_FAILURE = "candidate_failure", "candidate failure"
    INFRASTRUCTURE_FAILURE = "infrastructure_failure", "infrastructure failure"
    SKIPPED = "skipped", "skipped"


class Run(models.Model):
    """One pass over a schedule, or a selection of it, under a campaign cost ceiling (USD).

    ``selection`` is ``{"candidateIds": [...], "caseIds": [...], "limit": n|null}`` or ``None`` for
    the whole schedule. ``spent_usd`` is the sum of the recorded execution costs; an execution whose
    cost is unknown is counted at its budget's ``maxCostUsd`` and flags ``has_unpriced``
    (known-failure-modes B5), never as $0.
    """

    schedule = models.ForeignKey(Schedule, on_delete=models.PROTECT, related_name="runs")
    trigger = models.CharField(max_length=16, choices=Trigger.choices, default=Trigger.MANUAL)
    selection = models.JSONField(null=True, blank=True)
    cost_ceiling_usd = models.DecimalField("cost ceiling (USD)", max_digits=12, decimal_places=6)
    spent_usd = models.DecimalField("spent (USD)", max_digits=14, decimal_places=6, default=0)
    has_unpriced = models.BooleanField(default=False)
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.PENDING)
    stopped_at_ceiling = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["schedule"],
                condition=Q(trigger="nightly"),
                name="run_one_nightly_per_schedule",
                violation_error_message="This night already has its nightly run.",
            ),
            models.CheckConstraint(
                condition=Q(cost_ceiling_usd__gt=0),
                name="run_cost_ceiling_positive",
                violation_error_message="The campaign cost ceiling must be more than $0.",
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} · {self.schedule.night} · {self.trigger}"


class Execution(models.Model):
    """One schedule entry executed within a run; its ``observation`` is the reference document."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="executions")
    entry = models.ForeignKey(ScheduleEntry, on_delete=models.PROTECT, related_name="executions")
    position = models.PositiveIntegerField()
    execution_id = models.CharField(max_length=32)
    case_key = models.CharField("case", max_length=100)
    candidate_key = models.CharField("candidate", max_length=100)
    slot_key = models.CharField("slot", max_length=100)
    repetition = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=ExecutionStatus.choices, default=ExecutionStatus.PENDING)
    classification = models.CharField(max_length=32, choices=Classification.choices, blank=True)
    failure_code = models.CharField(max_length=100, blank=True)
    failure_category = models.CharField(max_length=32, blank=True)
    failure_retryable = models.BooleanField(null=True, blank=True)
    failure_message = models.TextField(blank=True)
    observation = models.JSONField(null=True, blank=True)
    cost_usd = models.DecimalField("cost (USD)", max_digits=14, decimal_places=6, null=True, blank=True)
    cost_known = models.BooleanField(default=True)
    duration_ms = models.PositiveIntegerField("duration (ms)", null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "execution_id"],
                name="execution_unique_per_run",
                violation_error_message="This run already has an execution with this id.",
            ),
        ]
        indexes = [models.Index(fields=["run", "classification"], name="execution_run_class_idx")]

    def __str__(self) -> str:
        return self.execution_id


class AttemptOutcome(models.TextChoices):
    OBSERVATION = "observation", "observation"
    INFRASTRUCTURE_ERROR = "infrastructure_error", "infrastructure error"
    CRASH = "crash", "unexpected exception"


class Attempt(models.Model):
    """One try of an execution (a retryable infrastructure error gives a second one)."""

    execution = models.ForeignKey(Execution, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveIntegerField()
    outcome = models.CharField(max_length=32, choices=AttemptOutcome.choices)
    error_code = models.CharField(max_length=100, blank=True)
    retryable = models.BooleanField(null=True, blank=True)
    message = models.TextField(blank=True)
    cost_usd = models.DecimalField("cost (USD)", max_digits=14, decimal_places=6, null=True, blank=True)
    duration_ms = models.PositiveIntegerField("duration (ms)", default=0)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()

    class Meta:
        ordering = ["execution", "number"]
        constraints = [
            models.UniqueConstraint(
                fields=["execution", "number"],
                name="attempt_number_unique",
                violation_error_message="This execution already has an attempt with this number.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.execution.execution_id} attempt {self.number}"
