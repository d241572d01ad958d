"""Slots, candidates and budgets: what a nightly puts under test.

Documents follow ``paperclip.runner.live-eval-candidate.v1`` (camelCase keys) so tools written for
the reference read evalhub's output unchanged.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.db.models.functions import Lower

from evalhub.jsnum import json_number
from evalhub.validation import MAX_INTEGER, SecretFreeModel, env_name_errors, key_validator, position_validators, validate_identity_text

CANDIDATE_SCHEMA = "paperclip.runner.live-eval-candidate.v1"


class Adapter(models.TextChoices):
    CODEX_APP_SERVER = "codex_app_server", "Codex app-server"
    OPENCODE_SERVER = "opencode_server", "opencode server"
    ACPX_RUNTIME = "acpx_runtime", "ACP runtime (acpx)"


class Provider(models.TextChoices):
    CODEX = "codex", "codex"
    OPENCODE = "opencode", "opencode"
    ACPX = "acpx", "acpx"


class Tier(models.TextChoices):
    STRONG = "strong", "strong"
    INEXPENSIVE = "inexpensive", "inexpensive"


#: Which provider each adapter drives (the reference pairs them one to one).
ADAPTER_PROVIDER = {
    Adapter.CODEX_APP_SERVER: Provider.CODEX,
    Adapter.OPENCODE_SERVER: Provider.OPENCODE,
    Adapter.ACPX_RUNTIME: Provider.ACPX,
}


class Budget(SecretFreeModel):
    """A named, reusable budget: per-turn latency (ms), attempts, cost (USD) and total tokens."""

    name = models.CharField(max_length=100, validators=[key_validator], help_text="For example strong-premium.")
    max_latency_ms = models.PositiveIntegerField(
        "max latency (ms)", help_text="Per turn, in milliseconds.", validators=[MaxValueValidator(MAX_INTEGER)]
    )
    max_attempts = models.PositiveIntegerField("max attempts", validators=[MaxValueValidator(100)])
    max_cost_usd = models.DecimalField(
        "max cost (USD)", max_digits=12, decimal_places=6, validators=[MinValueValidator(Decimal("0.000001"))]
    )
    max_total_tokens = models.PositiveIntegerField("max total tokens", validators=[MaxValueValidator(MAX_INTEGER)])

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["name"], name="budget_name_unique", violation_error_message="A budget with this name already exists."
            ),
            models.CheckConstraint(
                condition=Q(max_latency_ms__gt=0),
                name="budget_latency_positive",
                violation_error_message="Max latency must be more than 0 ms.",
            ),
            models.CheckConstraint(
                condition=Q(max_attempts__gt=0),
                name="budget_attempts_positive",
                violation_error_message="Max attempts must be at least 1.",
            ),
            models.CheckConstraint(
                condition=Q(max_cost_usd__gt=0),
                name="budget_cost_positive",
                violation_error_message="Max cost must be more than $0.",
            ),
            models.CheckConstraint(
                condition=Q(max_total_tokens__gt=0),
                name="budget_tokens_positive",
                violation_error_message="Max total tokens must be more than 0.",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def to_document(self) -> dict[str, int | float]:
        """The reference budget object: ``{maxLatencyMs, maxAttempts, maxCostUsd, maxTotalTokens}``."""
        return {
            "maxLatencyMs": self.max_latency_ms,
            "maxAttempts": self.max_attempts,
            "maxCostUsd": json_number(self.max_cost_usd),
            "maxTotalTokens": self.max_total_tokens,
        }


class Slot(SecretFreeModel):
    """A seat in the nightly line-up; ordered by ``position``. Holds one or more candidates."""

    key = models.CharField("id", max_length=100, validators=[key_validator], help_text="For example codex-strong.")
    position = models.PositiveIntegerField(default=0, help_text="Slot order decides the schedule.", validators=position_validators)

    class Meta:
        ordering = ["position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["key"], name="slot_key_unique", violation_error_message="A slot with this id already exists."),
            models.UniqueConstraint(
                fields=["position"],
                name="slot_position_unique",
                violation_error_message="Another slot already has this position.",
            ),
        ]

    def __str__(self) -> str:
        return self.key


class Candidate(SecretFreeModel):
    """One concrete thing under test: adapter, provider, model, tier, qualification and budget.

    ``required_environment`` holds environment variable *names* only (a JSON list of unique
    ``^[A-Z_][A-Z0-9_]*$`` strings); the values are read from the process environment at run time
    and never stored.
    """

    key = models.CharField("id", max_length=100, validators=[key_validator], help_text="Unique across all slots, e.g. codex-luna.")
    # Deleting a slot that still holds candidates is refused (the API says which: a 409), never a silent cascade.
    slot = models.ForeignKey(Slot, on_delete=models.PROTECT, related_name="candidates")
    position = models.PositiveIntegerField(
        default=0, help_text="Order inside the slot: week d plays candidate d mod n.", validators=position_validators
    )
    adapter = models.CharField(max_length=32, choices=Adapter.choices)
    provider = models.CharField(max_length=32, choices=Provider.choices)
    model = models.CharField(max_length=200, validators=[validate_identity_text], help_text="The provider's model name, e.g. gpt-5.6-luna.")
    tier = models.CharField(max_length=16, choices=Tier.choices)
    reasoning_effort = models.CharField(max_length=32, blank=True, validators=[validate_identity_text], help_text="Optional, e.g. medium.")
    required_environment = models.JSONField(
        "required environment",
        default=list,
        blank=True,
        help_text='Names of the environment variables this candidate needs, e.g. ["OPENAI_API_KEY"]. Never values.',
    )
    profile = models.CharField(
        max_length=64, blank=True, validators=[validate_identity_text], help_text="Optional qualification profile, e.g. openrouter."
    )
    budget = models.ForeignKey(Budget, on_delete=models.PROTECT, related_name="candidates")

    class Meta:
        ordering = ["slot__position", "position", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["key"],
                name="candidate_key_unique",
                violation_error_message="A candidate with this id already exists (ids are unique across all slots).",
            ),
            models.UniqueConstraint(
                fields=["slot", "position"],
                name="candidate_position_unique_in_slot",
                violation_error_message="Another candidate in this slot already has this position.",
            ),
            models.UniqueConstraint(
                "slot",
                "adapter",
                Lower("model"),
                "reasoning_effort",
                name="candidate_model_unique_in_slot",
                violation_error_message="This slot already has a candidate running this model (names compared "
                "ignoring case) with this adapter and reasoning effort.",
            ),
            models.CheckConstraint(
                condition=(
                    Q(adapter=Adapter.CODEX_APP_SERVER, provider=Provider.CODEX)
                    | Q(adapter=Adapter.OPENCODE_SERVER, provider=Provider.OPENCODE)
                    | Q(adapter=Adapter.ACPX_RUNTIME, provider=Provider.ACPX)
                ),
                name="candidate_adapter_matches_provider",
                violation_error_message="Adapter and provider do not belong together: codex_app_server runs codex, "
                "opencode_server runs opencode, acpx_runtime runs acpx.",
            ),
            models.CheckConstraint(
                condition=~Q(model=""),
                name="candidate_model_not_blank",
                violation_error_message="Model must not be blank.",
            ),
        ]

    def __str__(self) -> str:
        return self.key

    def clean(self) -> None:
        errors: dict[str, list[str]] = {}
        if isinstance(self.model, str):
            self.model = self.model.strip()
            if not self.model:
                errors.setdefault("model", []).append("Model must not be blank.")
        if isinstance(self.reasoning_effort, str):
            self.reasoning_effort = self.reasoning_effort.strip()
        if isinstance(self.profile, str):
            self.profile = self.profile.strip()
        problems = env_name_errors(self.required_environment, label="Required environment")
        if problems:
            errors.setdefault("required_environment", []).extend(problems)
        if errors:
            raise ValidationError(errors)

    def to_document(self) -> dict[str, Any]:
        """The reference candidate document (``paperclip.runner.live-eval-candidate.v1``).

        Optional keys (``reasoningEffort``, ``qualification.profile``) are omitted when blank, as
        in the reference manifest. Needs ``slot`` and ``budget`` loaded (use ``select_related``).
        """
        document: dict[str, Any] = {
            "schema": CANDIDATE_SCHEMA,
            "id": self.key,
            "slotId": self.slot.key,
            "adapter": self.adapter,
            "provider": self.provider,
            "model": self.model,
            "tier": self.tier,
        }
        if self.reasoning_effort:
            document["reasoningEffort"] = self.reasoning_effort
        names = self.required_environment
        # A row written around full_clean() may hold anything; the schedule build refuses it by name.
        qualification: dict[str, Any] = {"requiredEnvironment": list(names) if isinstance(names, list) else names}
        if self.profile:
            qualification["profile"] = self.profile
        document["qualification"] = qualification
        document["budget"] = self.budget.to_document()
        return document


#: The highest price per million tokens the price table accepts (USD): above it is a unit mix-up
#: (a price per token typed per million, or cents for dollars), not a price.
MAX_PRICE_PER_MILLION_USD = Decimal("10000")
_price_validators = [
    MinValueValidator(Decimal("0"), message="A price cannot be negative."),
    MaxValueValidator(
        MAX_PRICE_PER_MILLION_USD,
        message=f"A price above ${MAX_PRICE_PER_MILLION_USD} per million tokens is almost surely a unit mix-up.",
    ),
]


def _price_field(label: str, help_text: str) -> models.DecimalField:
    return models.DecimalField(
        f"{label} (USD per million tokens)",
        max_digits=12,
        decimal_places=6,
        validators=_price_validators,
        help_text=help_text,
    )


class ModelPrice(SecretFreeModel):
    """What a model costs, in US dollars per million tokens, for the live harness's cost figures
    (``runs.executors.live.pricing``).

    ``model`` is the provider's model name exactly as candidates name it (``gpt-5.6-luna``,
    ``openrouter/z-ai/glm-4.6``), unique ignoring case. ``input_usd`` prices uncached input
    tokens, ``cached_input_usd`` cached input tokens, ``output_usd`` output tokens (reasoning
    excluded) and ``reasoning_usd`` reasoning tokens — enter the output price there when the
    provider bills reasoning as output. A model without a row has an *unknown* cost (never $0).
    """

    model = models.CharField(
        max_length=200, validators=[validate_identity_text], help_text="The provider's model name, as candidates use it."
    )
    input_usd = _price_field("input", "Uncached input tokens.")
    cached_input_usd = _price_field("cached input", "Input tokens served from the provider's prompt cache.")
    output_usd = _price_field("output", "Output tokens, reasoning excluded.")
    reasoning_usd = _price_field("reasoning", "Reasoning tokens (usually the output price).")
    note = models.CharField(max_length=300, blank=True, help_text="Where the price comes from and when it was checked.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["model"]
        verbose_name = "model price"
        constraints = [
            models.UniqueConstraint(
                Lower("model"),
                name="model_price_unique_model",
                violation_error_message="This model already has a price (names compared ignoring case).",
            ),
            models.CheckConstraint(
                condition=~Q(model=""),
                name="model_price_model_not_blank",
                violation_error_message="Model must not be blank.",
            ),
            models.CheckConstraint(
                condition=(
                    Q(input_usd__gte=0, input_usd__lte=MAX_PRICE_PER_MILLION_USD)
                    & Q(cached_input_usd__gte=0, cached_input_usd__lte=MAX_PRICE_PER_MILLION_USD)
                    & Q(output_usd__gte=0, output_usd__lte=MAX_PRICE_PER_MILLION_USD)
                    & Q(reasoning_usd__gte=0, reasoning_usd__lte=MAX_PRICE_PER_MILLION_USD)
                ),
                name="model_price_range",
                violation_error_message=f"Prices must be from $0 to ${MAX_PRICE_PER_MILLION_USD} per million tokens.",
            ),
        ]

    def __str__(self) -> str:
        return self.model

    def clean(self) -> None:
        if isinstance(self.model, str):
            self.model = self.model.strip()
            if not self.model:
                raise ValidationError({"model": "Model must not be blank."})
