"""Runs, executions and attempts: what happened when a schedule was executed.

History is append-only: a run is created with one pending execution per selected schedule entry;
workers claim rows with conditional updates and a unique constraint makes a second delivery
harmless (docs/DESIGN.md principle 4, docs/failure-modes.md B1).
"""

from __future__ import annotations

import re
from decimal import Decimal

from django.core.exceptions import ObjectDoesNotExist, ValidationError
from django.db import models
from django.db.models import F, Q

from evalhub.credentials import is_credential_name, reserved_name_reason
from evalhub.fields import DocumentField
from evalhub.validation import ENV_NAME_PATTERN, SecretFreeModel
from schedules.building import CAMPAIGN_COST_DECIMAL_PLACES, CAMPAIGN_COST_MAX_DIGITS
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
    #: Faults injected into evalhub's own pipeline (``manage.py chaos``): one execution per
    #: scenario, never a measurement.
    CHAOS = "chaos", "chaos (pipeline faults)"


#: What a chaos-lane run is, where a page, the API or a command refuses to treat it as a
#: measurement (compare, refresh, signal): it never gets a report.
CHAOS_RUN = "a chaos run (faults injected into evalhub's own pipeline to check its invariants, not a measurement: it has no report)"


class RunStatus(models.TextChoices):
    PENDING = "pending", "pending"
    RUNNING = "running", "running"
    FINISHED = "finished", "finished"
    FAILED = "failed", "failed"
    #: Cancelled by a person: its pending executions were skipped, its running ones interrupted.
    CANCELLED = "cancelled", "cancelled"


class RerunScope(models.TextChoices):
    FAILED = "failed", "failed executions"
    INFRASTRUCTURE = "infrastructure", "infrastructure-failed executions"
    #: Skipped executions (missing credentials, the ceiling, a cancel): run them once the cause is fixed.
    SKIPPED = "skipped", "skipped executions"


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
    (docs/failure-modes.md B5), never as $0.
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
    repeat_of = models.ForeignKey(
        "self",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="reruns",
        help_text="For a re-run: the run whose failed executions it repeats (the original keeps its history).",
    )
    repeat_scope = models.CharField(max_length=16, choices=RerunScope.choices, blank=True)
    provider_overrides = models.JSONField(
        null=True,
        blank=True,
        help_text="Model provider profiles by candidate id that replace the candidates' own for this run (the scripted lane's "
        "scripted model), so its executions use them on any worker. Names and URLs only, never a key.",
    )
    cost_ceiling_usd = models.DecimalField(
        "cost ceiling (USD)", max_digits=CAMPAIGN_COST_MAX_DIGITS, decimal_places=CAMPAIGN_COST_DECIMAL_PLACES
    )
    spent_usd = models.DecimalField("spent (USD)", max_digits=14, decimal_places=6, default=0)
    reserved_usd = models.DecimalField(
        "reserved (USD)",
        max_digits=14,
        decimal_places=6,
        default=0,
        help_text="The worst-case cost of the attempts running now, held against the ceiling until they settle.",
    )
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    has_unpriced = models.BooleanField(default=False)
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.PENDING)
    stopped_at_ceiling = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        # The history's order: the database walks it and stops at the page's last run, so the
        # counts annotated on the page (``runs.queries.run_history``) are computed for its runs only.
        indexes = [models.Index(F("created_at").desc(), F("id").desc(), name="run_history_order_idx")]
        constraints = [
            models.UniqueConstraint(
                fields=["schedule"],
                condition=Q(trigger="nightly"),
                name="run_one_nightly_per_schedule",
                violation_error_message="This night already has its nightly run.",
            ),
            # A double-click or a second POST must not queue the same executions twice.
            models.UniqueConstraint(
                fields=["repeat_of"],
                condition=Q(repeat_of__isnull=False, status__in=["pending", "running"]),
                name="run_one_unfinished_rerun_per_run",
                violation_error_message="An earlier re-run of this run is still pending or running.",
            ),
            models.CheckConstraint(
                condition=Q(cost_ceiling_usd__gt=0),
                name="run_cost_ceiling_positive",
                violation_error_message="The campaign cost ceiling must be more than $0.",
            ),
            # SQLite adds and subtracts decimals as floats: a reservation released to zero may
            # read -1e-16. Amounts are whole micro-dollars, so half a micro-dollar is the tolerance.
            models.CheckConstraint(
                condition=Q(reserved_usd__gte=Decimal("-0.0000005")),
                name="run_reserved_not_negative",
                violation_error_message="A run cannot hold a negative reservation.",
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} · {self.schedule.night} · {self.trigger}"

    @property
    def selection_text(self) -> str:
        """The run's selection in words (``"candidates a, b · at most 3"``, ``"12 named
        executions"`` for a re-run's), or ``""`` for a full night."""
        selection = self.selection or {}
        parts = []
        if selection.get("candidateIds"):
            parts.append("candidates " + ", ".join(selection["candidateIds"]))
        if selection.get("caseIds"):
            parts.append("cases " + ", ".join(selection["caseIds"]))
        if selection.get("limit"):
            parts.append(f"at most {selection['limit']}")
        if selection.get("executionIds"):
            count = len(selection["executionIds"])
            parts.append(f"{count} named execution{'s' if count != 1 else ''}")
        return " · ".join(parts)


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
    #: Who holds the execution while it runs (``host:pid``) and until when; the heartbeat extends
    #: the lease, the reaper takes back an execution whose lease expired.
    owner = models.CharField(max_length=200, blank=True, help_text="The machine and process running it (host:pid).")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    dispatched_at = models.DateTimeField(null=True, blank=True, help_text="When its task was last put on the queue.")
    dispatches = models.PositiveIntegerField(default=0, help_text="How many times its task was put on the queue.")
    chaos = DocumentField(
        null=True, blank=True, help_text="For a chaos-lane execution: the scenario, its fault, and every invariant checked."
    )

    class Meta:
        ordering = ["run", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "execution_id"],
                name="execution_unique_per_run",
                violation_error_message="This run already has an execution with this id.",
            ),
        ]
        indexes = [
            # The history's counts per run, classification and failure code are read from this
            # index alone (runs.queries.history_rows), never from the rows with their observations.
            models.Index(fields=["run", "classification", "failure_code"], name="execution_run_outcome_idx"),
            # The API's order (runs.api.EXECUTION_ORDER): a page's ids are read from this index alone,
            # whatever its page number (evalhub.api.pagination.IdsFirstPaginator), and so are cursor pages.
            models.Index(fields=["-run", "position", "id"], name="execution_api_order_idx"),
            models.Index(fields=["status", "lease_expires_at"], name="execution_lease_idx"),
        ]

    def __str__(self) -> str:
        return self.execution_id

    @classmethod
    def for_entry(cls, run: Run, entry: ScheduleEntry, position: int) -> Execution:
        """A pending execution (not saved) of schedule ``entry`` in ``run`` at ``position``: the
        entry's identity (execution id, case, candidate, slot, repetition) copied onto the row."""
        return cls(
            run=run,
            entry=entry,
            position=position,
            execution_id=entry.execution_id,
            case_key=entry.case_key,
            candidate_key=entry.candidate_key,
            slot_key=entry.slot_key,
            repetition=entry.repetition,
        )

    @property
    def scorecard_or_none(self) -> Scorecard | None:
        """The execution's scorecard, or None when it has none (no query once the queryset
        ``select_related("scorecard")``)."""
        try:
            return self.scorecard
        except ObjectDoesNotExist:
            return None


class AttemptOutcome(models.TextChoices):
    #: Started and not finished yet: the row is written before the executor is called, so a
    #: process that dies mid-attempt still leaves the attempt counted.
    RUNNING = "running", "running"
    OBSERVATION = "observation", "observation"
    INFRASTRUCTURE_ERROR = "infrastructure_error", "infrastructure error"
    CRASH = "crash", "unexpected exception"
    #: The process running it died, timed out or was stopped (``worker_lost``, ``worker_timeout``,
    #: ``worker_shutdown``): an infrastructure failure.
    WORKER_LOST = "worker_lost", "worker lost"
    #: The run was cancelled while the attempt ran; its runtime was killed.
    CANCELLED = "cancelled", "cancelled"


class Attempt(models.Model):
    """One call of an execution's executor (a retryable infrastructure error may give another,
    never more than the budget's ``maxAttempts``).

    Written with outcome ``running`` before the executor is called and finished (outcome, cost,
    ``finished_at``) in the transaction that records what the call produced.
    """

    execution = models.ForeignKey(Execution, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveIntegerField()
    outcome = models.CharField(max_length=32, choices=AttemptOutcome.choices)
    error_code = models.CharField(max_length=100, blank=True)
    retryable = models.BooleanField(null=True, blank=True)
    message = models.TextField(blank=True)
    cost_usd = models.DecimalField("cost (USD)", max_digits=14, decimal_places=6, null=True, blank=True)
    reserved_usd = models.DecimalField(
        "reserved (USD)", max_digits=14, decimal_places=6, default=0, help_text="Held against the ceiling while it ran."
    )
    counted_usd = models.DecimalField(
        "counted (USD)",
        max_digits=14,
        decimal_places=6,
        default=0,
        help_text="What it added to the run's spend: its cost, or its reservation when the cost is unknown.",
    )
    owner = models.CharField(max_length=200, blank=True, help_text="The machine and process that made the call (host:pid).")
    duration_ms = models.PositiveIntegerField("duration (ms)", default=0)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

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


class ProviderSlot(models.Model):
    """One of the concurrent executions a model provider allows (``EVALHUB_PROVIDER_CONCURRENCY``).

    Taken with a conditional update by an execution before it runs and given back when it settles;
    a slot whose holder's lease expired is free again, so a dead worker never keeps one.
    """

    provider = models.CharField(max_length=100)
    number = models.PositiveIntegerField()
    execution = models.ForeignKey(Execution, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["provider", "number"]
        constraints = [
            models.UniqueConstraint(
                fields=["provider", "number"],
                name="provider_slot_unique",
                violation_error_message="This provider already has a slot with this number.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.provider} slot {self.number}"


class TraceArtifact(models.Model):
    """The raw protocol trace of one execution attempt: an NDJSON document (``runs/executors/trace.py``),
    gzip-compressed, as ``runs.executors.trace.TraceRecorder`` recorded it (every frame already
    scrubbed of secrets).

    ``raw_bytes`` is the uncompressed size, ``stored_bytes`` the compressed size (bytes);
    ``digest`` is ``sha256:<hex>`` of the uncompressed document and is checked on every read
    (``runs.executors.trace.read_artifact``); ``frame_count`` counts every frame the runtime
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

    ``scoring_version`` records the scoring rules that made it (``runs.evaluation.scoring.SCORING_VERSION``);
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

    def not_a_measurement(self) -> str:
        """Why this report is not a measurement (``"a refresh (...)"``, ``"a scripted run (...)"``),
        or ``""`` when it is one. Only measurements are compared: the pages and the API share this."""
        if self.is_refresh:
            return "a refresh (re-scored, not measured)"
        if self.is_scripted:
            return "a scripted run (the runtime against evalhub's scripted model, not measured)"
        return ""


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


def trace_filename(run_id: int, execution_id: str, attempt: int, *, lane: str = RunLane.LIVE) -> str:
    """``run-<run>-<execution id>-attempt-<n>.trace.ndjson.gz``: an execution id repeats in every
    run of its schedule (a re-run, a selection), so the run number keeps the files apart. A run
    that is not a measurement names its lane after the run number
    (``run-17-scripted-rwe-…-attempt-1.trace.ndjson.gz``), as its report exports do."""
    kind = "" if lane == RunLane.LIVE else f"{lane}-"
    return f"run-{run_id}-{kind}{execution_id}-attempt-{attempt}.trace.ndjson.gz"


# --- alert delivery ------------------------------------------------------------------------------


class ChannelKind(models.TextChoices):
    """The kinds of notification channel; each is one module of ``runs/notifications/``."""

    EMAIL = "email", "email"
    WEBHOOK = "webhook", "JSON webhook"
    SLACK = "slack", "Slack incoming webhook"


#: Kinds whose destination is a secret URL, named by the environment variable that holds it.
URL_KINDS = (ChannelKind.WEBHOOK, ChannelKind.SLACK)
_SEVERITY_RANK = {AlertSeverity.WARNING: 0, AlertSeverity.CRITICAL: 1}


class NotificationChannel(SecretFreeModel):
    """Somewhere new alerts are sent: an email list, a JSON webhook or a Slack incoming webhook.

    A webhook URL carries its own token, so the row stores only the *name* of the environment
    variable holding it (``url_env``), read when a notice is sent. ``min_severity`` drops alerts
    below it (``warning`` sends every alert, ``critical`` only critical ones).
    """

    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(max_length=16, choices=ChannelKind.choices)
    enabled = models.BooleanField(default=True)
    url_env = models.CharField(
        "URL variable",
        max_length=128,
        blank=True,
        help_text="Webhook and Slack channels: the NAME of the environment variable holding the URL, e.g. EVALHUB_SLACK_WEBHOOK_URL (never the URL).",
    )
    recipients = models.JSONField(
        default=list, blank=True, help_text='Email channels: a JSON list of addresses, e.g. ["oncall@example.com"].'
    )
    min_severity = models.CharField("minimum severity", max_length=16, choices=AlertSeverity.choices, default=AlertSeverity.WARNING)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.CheckConstraint(
                condition=~Q(kind__in=[kind.value for kind in URL_KINDS]) | ~Q(url_env=""),
                name="channel_url_kinds_name_their_url_variable",
                violation_error_message="Webhook and Slack channels need the name of the environment variable holding their URL.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.get_kind_display()})"

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if self.url_env and not ENV_NAME_PATTERN.fullmatch(self.url_env):
            errors["url_env"] = (
                "Enter the name of an environment variable (capital letters, digits and underscores, "
                "e.g. EVALHUB_SLACK_WEBHOOK_URL), not the URL itself."
            )
        elif self.kind in URL_KINDS and not self.url_env:
            errors["url_env"] = "Webhook and Slack channels need the name of the environment variable holding their URL."
        elif self.url_env and self.kind not in URL_KINDS:
            errors["url_env"] = "Only webhook and Slack channels have a URL variable; leave it empty."
        elif self.url_env and (problem := _url_variable_problem(self.url_env)):
            errors["url_env"] = problem
        if self.kind == ChannelKind.EMAIL:
            problem = _recipient_problem(self.recipients)
            if problem:
                errors["recipients"] = problem
        elif self.recipients not in ([], None):
            errors["recipients"] = "Only email channels have recipients; leave this empty ([])."
        if errors:
            raise ValidationError(errors)

    def wants(self, severity: str) -> bool:
        """Whether an alert of ``severity`` reaches this channel."""
        return _SEVERITY_RANK.get(severity, 1) >= _SEVERITY_RANK.get(self.min_severity, 0)


#: The most addresses one email channel sends to (a mailing list is one address).
MAX_RECIPIENTS = 100


def _url_variable_problem(name: str) -> str | None:
    """Why the variable ``name`` cannot hold a channel's URL, or None. A channel reads its
    variable and sends every alert there, so it may not be one that holds something else of
    evalhub's: a credential (``OPENAI_API_KEY``), the database or broker URL, the process basics.
    ``EVALHUB_*`` names are a channel's to use (``EVALHUB_SLACK_WEBHOOK_URL``) unless
    credential-named (``EVALHUB_EMAIL_PASSWORD``)."""
    if is_credential_name(name):
        return f"{name} is named as a credential; a channel's URL variable holds only its URL (for example EVALHUB_SLACK_WEBHOOK_URL)."
    reason = reserved_name_reason(name)
    if reason and not name.startswith("EVALHUB_"):
        return f"{name} cannot hold a channel's URL: it is not a channel's to use ({reason})."
    return None


def _recipient_problem(value: object) -> str | None:
    from django.core.validators import validate_email

    if not isinstance(value, list) or not value:
        return 'Email channels need a JSON list of one or more addresses, e.g. ["oncall@example.com"].'
    if len(value) > MAX_RECIPIENTS:
        return f"An email channel sends to at most {MAX_RECIPIENTS} addresses, not {len(value)}: use a mailing list's address."
    for index, item in enumerate(value, start=1):
        try:
            validate_email(item if isinstance(item, str) else "")
        except ValidationError:
            return f"Recipient {index} is not an email address."
    # Addresses are compared ignoring case, as mail servers deliver them.
    if len({item.casefold() for item in value}) != len(value):
        return "Recipients must not repeat (compared ignoring case)."
    return None


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "pending"
    SENT = "sent", "sent"
    FAILED = "failed", "failed"


class Delivery(models.Model):
    """One alert sent (or being sent) to one channel: at most one row per (alert, channel), so a
    second delivery of the same alert is a no-op. ``alert`` is null for a test sent from the admin.

    A failed attempt that may succeed later leaves the row ``pending`` with ``next_attempt_at``
    pushed back (doubling each time) until ``NOTIFY_MAX_ATTEMPTS``; a permanent failure or the last
    attempt marks it ``failed``. ``last_error`` is redacted (never the URL or its token).
    """

    channel = models.ForeignKey(NotificationChannel, on_delete=models.CASCADE, related_name="deliveries")
    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, null=True, blank=True, related_name="deliveries")
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    #: A sender holds the row until then; past it, another may take it (the sender died).
    claimed_until = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "deliveries"
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["alert", "channel"],
                condition=Q(alert__isnull=False),
                name="delivery_once_per_alert_channel",
                violation_error_message="This alert was already delivered to this channel.",
            ),
        ]
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="delivery_due")]

    def __str__(self) -> str:
        what = f"alert {self.alert_id}" if self.alert_id else "test"
        return f"{what} → {self.channel_id}: {self.status}"
