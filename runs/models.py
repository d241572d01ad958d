"""Runs, executions and attempts: what happened when a schedule was executed.

History is append-only: a run is created with one pending execution per selected schedule entry;
workers claim rows with conditional updates and a unique constraint makes a second delivery
harmless (DESIGN.md principle 4, known-failure-modes B1).
"""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from evalhub.fields import DocumentField
from evalhub.validation import SecretFreeModel
from schedules.models import Schedule, ScheduleEntry

OPERATION_ID = re.compile(r"^[a-z][a-z0-9_]*$")


class Trigger(models.TextChoices):
    NIGHTLY = "nightly", "nightly"
    MANUAL = "manual", "manual"


class RunLane(models.TextChoices):
    LIVE = "live", "live"
    REPLAY = "replay", "replay (refresh)"
    #: Real runtimes against evalhub's scripted model (``make demo-live``): not a measurement.
    SCRIPTED = "scripted", "scripted (not measured)"


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
    lane = models.CharField(max_length=16, choices=RunLane.choices, default=RunLane.LIVE)
    refresh_of = models.ForeignKey(
        "self",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="refreshes",
        help_text="For a replay-lane refresh: the run whose stored observations were re-scored.",
    )
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
    observation = DocumentField(null=True, blank=True)
    settlement_ms = models.PositiveIntegerField(
        "settlement (ms)", null=True, blank=True, help_text="The observation's metrics.settlementMs, for trends."
    )
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


class TraceArtifact(models.Model):
    """The raw protocol trace of one execution attempt: an NDJSON document (upstream-spec §6.2),
    gzip-compressed, as ``runs.harness.trace.TraceRecorder`` recorded it (every frame already
    scrubbed of secrets).

    ``raw_bytes`` is the uncompressed size, ``stored_bytes`` the compressed size (bytes);
    ``digest`` is ``sha256:<hex>`` of the uncompressed document and is checked on every read
    (``runs.harness.trace.read_artifact``); ``frame_count`` counts every frame the runtime
    exchanged, ``truncated`` says the size cap was reached and later frames were counted but not
    stored. Traces are evidence for people debugging one execution: they never go into reports
    or exports.
    """

    execution = models.ForeignKey(Execution, on_delete=models.CASCADE, related_name="traces")
    attempt = models.PositiveIntegerField(help_text="The attempt number this trace belongs to (1, 2).")
    data = models.BinaryField(help_text="The gzip-compressed NDJSON trace.")
    raw_bytes = models.PositiveBigIntegerField("uncompressed size (bytes)")
    stored_bytes = models.PositiveBigIntegerField("stored size (bytes)")
    frame_count = models.PositiveIntegerField("frames")
    digest = models.CharField(max_length=71, help_text="sha256:<hex> of the uncompressed NDJSON.")
    truncated = models.BooleanField(default=False, help_text="The size cap was reached: later frames were not stored.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["execution", "attempt"]
        constraints = [
            models.UniqueConstraint(
                fields=["execution", "attempt"],
                name="trace_one_per_attempt",
                violation_error_message="This execution attempt already has a trace.",
            ),
            models.CheckConstraint(
                condition=Q(digest__regex=r"^sha256:[0-9a-f]{64}$"),
                name="trace_digest_sha256",
                violation_error_message="The digest must be sha256: followed by 64 lowercase hex digits.",
            ),
        ]

    def __str__(self) -> str:
        return f"trace of {self.execution.execution_id} attempt {self.attempt}"


class Scorecard(models.Model):
    """An execution's observation scored into the reference scorecard (``paperclip.runner.eval-scorecard.v2``).

    ``scoring_version`` records the scoring rules that made it (``runs.scoring.SCORING_VERSION``);
    the overall score, gate and verdict are copied out of ``document`` for queries (all null
    for unscored skipped and infrastructure-failure executions).
    """

    execution = models.OneToOneField(Execution, on_delete=models.CASCADE, related_name="scorecard")
    scoring_version = models.CharField(max_length=32)
    document = DocumentField()
    overall_score = models.FloatField(null=True, blank=True)
    gate_passed = models.BooleanField(null=True, blank=True)
    passed = models.BooleanField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"scorecard of {self.execution.execution_id}"


class Report(models.Model):
    """A run's reference report (``paperclip.runner.workflow-eval-report.v1``) and its comparison.

    ``bundle_id`` decides comparability: only reports with the same bundle are compared and feed
    alerts. A refresh (replay lane) is labelled ``is_refresh`` and never counts as a measurement
    in history, comparisons or alerts.
    """

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="report")
    bundle_id = models.CharField(max_length=64)
    source = models.CharField(max_length=16, default="live")
    generated_at = models.CharField(max_length=64)
    is_refresh = models.BooleanField(default=False)
    is_scripted = models.BooleanField(
        default=False, help_text="A scripted-lane run's report: real runtimes against a scripted model, never history."
    )
    scoring_version = models.CharField(max_length=32)
    document = DocumentField()
    comparison = DocumentField(null=True, blank=True)
    alert_documents = DocumentField(
        default=list,
        blank=True,
        help_text="The alerts exactly as the reference computes them (repetitions included), for exports.",
    )
    previous = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="+", help_text="The compared report."
    )
    executions = models.PositiveIntegerField(default=0)
    scoreable = models.PositiveIntegerField(default=0)
    passed = models.PositiveIntegerField(default=0)
    mean_overall = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["bundle_id", "is_refresh", "created_at"], name="report_bundle_history_idx")]

    def __str__(self) -> str:
        return f"report of run {self.run_id} · {self.bundle_id}"


class AlertSeverity(models.TextChoices):
    CRITICAL = "critical", "critical"
    WARNING = "warning", "warning"


class Alert(models.Model):
    """One alert of a report, stored once per (report, code, case, candidate).

    The reference repeats a consecutive-failure alert for every repetition of the same case and
    candidate; evalhub keeps one row (``occurrences`` counts the repeats). Run-wide alerts have
    blank case and candidate.
    """

    report = models.ForeignKey(Report, on_delete=models.CASCADE, related_name="alerts")
    code = models.CharField(max_length=64)
    severity = models.CharField(max_length=16, choices=AlertSeverity.choices)
    case_key = models.CharField("case", max_length=100, blank=True)
    candidate_key = models.CharField("candidate", max_length=100, blank=True)
    message = models.TextField()
    occurrences = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["report", "code", "case_key", "candidate_key"],
                name="alert_once_per_report_code_case_candidate",
                violation_error_message="This report already has this alert for this case and candidate.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.severity} {self.code}: {self.message}"


class CoverageCatalog(SecretFreeModel):
    """The data behind a report's coverage section, editable in the admin (one row is used).

    ``operation_ids`` is the semantic-operation catalog (41 in the reference's stored catalog);
    ``capability_cases`` the external capability inventory size (106 in the reference).
    """

    operation_ids = models.JSONField(default=list)
    capability_cases = models.PositiveIntegerField(default=106)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "coverage catalog"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(capability_cases__gte=0),
                name="coverage_capability_cases_non_negative",
                violation_error_message="Capability cases must be 0 or more.",
            ),
        ]

    def clean(self) -> None:
        ids = self.operation_ids
        if not isinstance(ids, list) or not all(isinstance(i, str) and OPERATION_ID.match(i) for i in ids):
            raise ValidationError(
                {"operation_ids": 'Operation ids must be a list of snake_case names, e.g. ["finish_task", "report_progress"].'}
            )
        if len(set(ids)) != len(ids):
            raise ValidationError({"operation_ids": "Operation ids must not repeat."})

    def __str__(self) -> str:
        return f"{len(self.operation_ids)} operations · {self.capability_cases} capability cases"
