"""Every catalog rule holds on the shell path (``full_clean()``) and in the database itself.

docs/DESIGN.md "One validation path": the admin, the API, manifest import and the shell all call
``full_clean()``, so these tests drive the models directly. The second half bypasses
``full_clean()`` with ``objects.create()`` to show that the named constraints back the rules
(docs/failure-modes.md B8: validation that lives only in a form is skipped by code).

Secrets are synthetic and assembled by concatenation so this file carries no key-shaped literal.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from candidates.models import Budget, Candidate, ModelPrice, Slot
from runs.models import Attempt, Execution, Run
from schedules.models import ChaosScenario, Schedule, ScheduleEntry, WorkflowCase
from tests.builders import make_budget, make_candidate, make_case, make_slot

pytestmark = pytest.mark.django_db

# --- synthetic secrets --------------------------------------------------------------------------

#: An OpenAI-shaped key that also satisfies the lowercase id pattern, so only the secret rule fires.
KEY_SHAPED = "sk-" + "abcdefghijklmnop1234"
#: docs/failure-modes.md B8 (d): a value where a name belongs.
B8_OPENAI = "sk-" + "proj-" + "FAKE0123456789abcdefghij"
BEARER = "Bearer " + "abcdefghijklmnopqrstuvwxyz012345"
AWS = "AKIA" + "IOSFODNN7EXAMPLE"

SECRET_MESSAGE = re.compile(r"looks like it contains a secret \(.+\)\. Store the name of the environment variable")


def all_text(error: ValidationError) -> str:
    return repr(error.message_dict)


def clean_errors(instance: Any, **kwargs: Any) -> dict[str, list[str]]:
    """``full_clean()``'s errors by field, or fail when the instance is valid."""
    with pytest.raises(ValidationError) as caught:
        instance.full_clean(**kwargs)
    return caught.value.message_dict


def new_candidate(**overrides: Any) -> Candidate:
    """An unsaved candidate that passes ``full_clean()`` unless overridden."""
    slot = overrides.pop("slot", None) or make_slot()
    budget = overrides.pop("budget", None) or make_budget()
    values: dict[str, Any] = {
        "key": "codex-luna",
        "slot": slot,
        "position": slot.candidates.count(),
        "adapter": "codex_app_server",
        "provider": "codex",
        "model": "gpt-5.6-luna",
        "tier": "strong",
        "reasoning_effort": "medium",
        "required_environment": ["OPENAI_API_KEY"],
        "profile": "",
        "budget": budget,
    }
    values.update(overrides)
    return Candidate(**values)


def new_case(**overrides: Any) -> WorkflowCase:
    values: dict[str, Any] = {
        "key": "final-response",
        "title": "Preserve one substantive final response",
        "tags": ["response"],
        "providers": ["codex", "opencode", "acpx"],
        "steps": [{"kind": "run_start", "taskMode": "ask"}],
        "assertions": {"requiredOperationIds": ["finish_task"]},
        "repetitions": 3,
        "position": WorkflowCase.objects.count(),
    }
    values.update(overrides)
    return WorkflowCase(**values)


def new_scenario(**overrides: Any) -> ChaosScenario:
    values: dict[str, Any] = {
        "key": "chaos-restart",
        "lane": "chaos",
        "fault": "restart",
        "expected_invariant": "one resumable execution owns finalization",
        "position": ChaosScenario.objects.count(),
    }
    values.update(overrides)
    return ChaosScenario(**values)


def new_budget(**overrides: Any) -> Budget:
    values: dict[str, Any] = {
        "name": "strong-premium",
        "max_latency_ms": 180_000,
        "max_attempts": 3,
        "max_cost_usd": Decimal("1.5"),
        "max_total_tokens": 100_000,
    }
    values.update(overrides)
    return Budget(**values)


# --- the valid baseline -------------------------------------------------------------------------


def test_the_baseline_rows_are_valid() -> None:
    new_candidate().full_clean()
    new_case().full_clean()
    new_scenario().full_clean()
    new_budget().full_clean()
    Slot(key="codex-strong", position=7).full_clean()


# --- uniqueness, with human messages --------------------------------------------------------------


def test_slot_ids_are_unique() -> None:
    make_slot(key="codex-strong", position=0)
    errors = clean_errors(Slot(key="codex-strong", position=1))
    assert errors == {"__all__": ["A slot with this id already exists."]}


def test_slot_positions_are_unique() -> None:
    make_slot(key="codex-strong", position=0)
    errors = clean_errors(Slot(key="opencode-strong", position=0))
    assert errors == {"__all__": ["Another slot already has this position."]}


def test_candidate_ids_are_unique_across_all_slots() -> None:
    make_candidate(key="codex-luna", slot=make_slot(key="codex-strong"))
    other_slot = make_slot(key="acpx-codex")
    errors = clean_errors(new_candidate(key="codex-luna", slot=other_slot))
    assert errors == {"__all__": ["A candidate with this id already exists (ids are unique across all slots)."]}


def test_candidate_order_inside_a_slot_is_unique() -> None:
    slot = make_slot(key="opencode-strong")
    make_candidate(key="opencode-kimi", slot=slot, position=0)
    errors = clean_errors(new_candidate(key="opencode-glm", slot=slot, position=0))
    assert errors == {"__all__": ["Another candidate in this slot already has this position."]}


def test_the_same_position_in_another_slot_is_fine() -> None:
    make_candidate(key="opencode-kimi", slot=make_slot(key="opencode-strong"), position=0)
    new_candidate(key="codex-luna", slot=make_slot(key="codex-strong"), position=0).full_clean()


def test_case_ids_are_unique() -> None:
    make_case(key="final-response")
    errors = clean_errors(new_case(key="final-response"))
    assert errors == {"__all__": ["A workflow case with this id already exists."]}


def test_case_positions_are_unique() -> None:
    make_case(key="final-response", position=0)
    errors = clean_errors(new_case(key="rich-activity", position=0))
    assert errors == {"__all__": ["Another workflow case already has this position."]}


def test_scenario_ids_are_unique() -> None:
    new_scenario().save()
    errors = clean_errors(new_scenario(fault="wake_race"))
    assert errors == {"__all__": ["A chaos scenario with this id already exists."]}


def test_budget_names_are_unique() -> None:
    make_budget(name="strong-premium")
    errors = clean_errors(new_budget(name="strong-premium", max_cost_usd=Decimal("2")))
    assert errors == {"__all__": ["A budget with this name already exists."]}


# --- candidates ------------------------------------------------------------------------------------

ADAPTER_PROVIDER_MESSAGE = (
    "Adapter and provider do not belong together: codex_app_server runs codex, opencode_server runs opencode, acpx_runtime runs acpx."
)
WRONG_PAIRS = [
    (adapter, provider)
    for adapter, right in (("codex_app_server", "codex"), ("opencode_server", "opencode"), ("acpx_runtime", "acpx"))
    for provider in ("codex", "opencode", "acpx")
    if provider != right
]


@pytest.mark.parametrize(("adapter", "provider"), WRONG_PAIRS)
def test_every_wrong_adapter_provider_pair_is_refused(adapter: str, provider: str) -> None:
    errors = clean_errors(new_candidate(adapter=adapter, provider=provider))
    assert errors == {"__all__": [ADAPTER_PROVIDER_MESSAGE]}


@pytest.mark.parametrize(
    ("adapter", "provider"), [("codex_app_server", "codex"), ("opencode_server", "opencode"), ("acpx_runtime", "acpx")]
)
def test_every_right_adapter_provider_pair_is_accepted(adapter: str, provider: str) -> None:
    new_candidate(adapter=adapter, provider=provider).full_clean()


def test_six_wrong_pairs_are_covered() -> None:
    assert len(WRONG_PAIRS) == 6


@pytest.mark.parametrize("model", ["", " ", "\t\n "])
def test_a_blank_model_is_refused(model: str) -> None:
    errors = clean_errors(new_candidate(model=model))
    assert "Model must not be blank." in errors["model"]


def test_the_model_is_trimmed() -> None:
    candidate = new_candidate(model="  gpt-5.6-luna ")
    candidate.full_clean()
    assert candidate.model == "gpt-5.6-luna"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("adapter", "codex", "Value 'codex' is not a valid choice."),
        ("provider", "openai", "Value 'openai' is not a valid choice."),
        ("tier", "medium", "Value 'medium' is not a valid choice."),
        ("key", "Codex Luna", "Use lowercase letters, digits, '.', '_' and '-' only"),
    ],
)
def test_candidate_fields_outside_their_vocabulary_are_refused(field: str, value: str, message: str) -> None:
    errors = clean_errors(new_candidate(**{field: value}))
    assert errors[field][0].startswith(message)


# --- required environment: names only (docs/failure-modes.md B8) -------------------------------------

NOT_A_LIST = 'Required environment must be a list of environment variable names such as ["OPENAI_API_KEY"].'
NOT_A_NAME = (
    "Required environment item {} is not an environment variable name: use capital letters, digits and "
    "underscores, starting with a letter or underscore (for example OPENAI_API_KEY)."
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("OPENAI_API_KEY", NOT_A_LIST, id="a JSON string"),
        pytest.param(None, NOT_A_LIST, id="null"),
        pytest.param({}, NOT_A_LIST, id="an object"),
        pytest.param({"OPENAI_API_KEY": True}, NOT_A_LIST, id="an object of names"),
        pytest.param(7, NOT_A_LIST, id="a number"),
        pytest.param([1], "Required environment item 1 must be a text name, not int.", id="[1]"),
        pytest.param([None], "Required environment item 1 must be a text name, not NoneType.", id="[null]"),
        pytest.param([""], NOT_A_NAME.format(1), id='[""]'),
        pytest.param(["OPENAI_API_KEY", "OPENAI_API_KEY"], "Required environment lists OPENAI_API_KEY twice.", id="duplicate"),
        pytest.param(["OPENAI_API_KEY "], NOT_A_NAME.format(1), id="trailing space"),
        pytest.param([" OPENAI_API_KEY"], NOT_A_NAME.format(1), id="leading space"),
        pytest.param(["openai api key"], NOT_A_NAME.format(1), id="words"),
        pytest.param(["openai_api_key"], NOT_A_NAME.format(1), id="lowercase"),
        pytest.param(["OPENAI_API_KEY", "1PASSWORD"], NOT_A_NAME.format(2), id="starts with a digit"),
        pytest.param(["OPENAI-API-KEY"], NOT_A_NAME.format(1), id="hyphens"),
    ],
)
def test_required_environment_must_be_a_list_of_unique_names(value: Any, expected: str) -> None:
    errors = clean_errors(new_candidate(required_environment=value))
    assert expected in errors["required_environment"]


def test_a_secret_value_where_a_name_belongs_is_refused_without_echoing_it() -> None:
    errors = clean_errors(new_candidate(required_environment=[B8_OPENAI]))
    assert errors["required_environment"][0] == (
        "Required environment looks like it contains a secret (OpenAI API key). Store the name of the "
        "environment variable that holds it (such as OPENAI_API_KEY), never the value."
    )
    assert B8_OPENAI not in all_text(ValidationError(errors))


@pytest.mark.parametrize(
    "names",
    [
        [],
        ["OPENAI_API_KEY"],
        ["OPENROUTER_API_KEY", "ANTHROPIC_API_KEY"],
        ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "HF_TOKEN", "_PRIVATE"],
    ],
)
def test_real_variable_names_are_never_taken_for_secrets(names: list[str]) -> None:
    candidate = new_candidate(required_environment=names, profile="OPENAI_API_KEY", reasoning_effort="ANTHROPIC_API_KEY")
    candidate.full_clean()
    candidate.save()
    candidate.refresh_from_db()
    assert candidate.required_environment == names


# --- budgets -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("max_latency_ms", 0, "Max latency must be more than 0 ms."),
        ("max_attempts", 0, "Max attempts must be at least 1."),
        ("max_total_tokens", 0, "Max total tokens must be more than 0."),
    ],
)
def test_a_zero_budget_limit_is_refused_by_its_constraint(field: str, value: int, message: str) -> None:
    assert clean_errors(new_budget(**{field: value})) == {"__all__": [message]}


@pytest.mark.parametrize("field", ["max_latency_ms", "max_attempts", "max_total_tokens"])
def test_a_negative_budget_limit_is_refused(field: str) -> None:
    errors = clean_errors(new_budget(**{field: -1}))
    assert errors == {field: ["Ensure this value is greater than or equal to 0."]}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (Decimal("0"), "Ensure this value is greater than or equal to 0.000001."),
        (Decimal("-1"), "Ensure this value is greater than or equal to 0.000001."),
        (Decimal("NaN"), "“NaN” value must be a decimal number."),
        (Decimal("Infinity"), "“Infinity” value must be a decimal number."),
        (Decimal("-Infinity"), "“-Infinity” value must be a decimal number."),
        (Decimal("1E+7"), "Ensure that there are no more than 6 digits before the decimal point."),
    ],
)
def test_a_max_cost_that_is_not_a_positive_finite_amount_is_refused(value: Decimal, message: str) -> None:
    errors = clean_errors(new_budget(max_cost_usd=value))
    assert errors["max_cost_usd"][0] == message


def test_the_smallest_cost_budget_is_one_millionth_of_a_dollar() -> None:
    new_budget(max_cost_usd=Decimal("0.000001")).full_clean()


# --- workflow cases --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        pytest.param(
            [{"kind": "jump"}],
            "Steps[1].kind is an unknown step kind: use one of run_start, interaction_response, steer, "
            "review_decision, permission_decision, cancel, process_restart, child_completion.",
            id="unknown kind",
        ),
        pytest.param(
            [{"kind": "run_start", "taskMode": "ask", "speed": "fast"}],
            "Steps[1] has unknown field speed.",
            id="unknown field",
        ),
        pytest.param([{"kind": "run_start"}], "Steps[1] is missing 'taskMode'.", id="missing parameter"),
        pytest.param(
            [{"kind": "cancel", "actor": "robot"}],
            "Steps[1].actor must be one of operator, control_plane.",
            id="bad parameter value",
        ),
        pytest.param([], "Steps needs at least one step.", id="no steps"),
        pytest.param("run_start", "Steps must be a list.", id="not a list"),
        pytest.param([{"taskMode": "ask"}], "Steps[1] is missing 'kind'.", id="no kind"),
    ],
)
def test_bad_steps_are_refused_with_their_place(steps: Any, message: str) -> None:
    errors = clean_errors(new_case(steps=steps))
    assert message in errors["steps"]


@pytest.mark.parametrize(
    ("assertions", "message"),
    [
        pytest.param(
            {"issueStatus": "done", "colour": "green"},
            "Unknown assertion key colour: use one of issueStatus, runStatus, semanticDisposition, maxAttempts, "
            "maxRuns, commentCount, recoveryOwner, responseSource, orderedMarkers, requiredPrpEventTypes, "
            "forbiddenPrpEventTypes, requiredActivityFamilies, artifactDigests, requiredOperationIds, trace.",
            id="unknown key",
        ),
        pytest.param(
            {"requiredPrpEventTypes": ["run.terminal", "plan.updated"], "forbiddenPrpEventTypes": ["plan.updated"]},
            "Event type plan.updated is both required and forbidden.",
            id="required and forbidden",
        ),
        pytest.param({"maxRuns": 0}, "Assertions.maxRuns must be at least 1.", id="maxRuns 0"),
        pytest.param({"trace": {}}, "Assertions.trace is missing 'capture'.", id="trace without capture"),
        pytest.param([], "Assertions must be an object.", id="not an object"),
    ],
)
def test_bad_assertions_are_refused(assertions: Any, message: str) -> None:
    errors = clean_errors(new_case(assertions=assertions))
    assert message in errors["assertions"]


@pytest.mark.parametrize(
    ("providers", "message"),
    [
        ([], 'Providers must be a non-empty list drawn from "codex", "opencode" and "acpx".'),
        (["openai"], 'Providers must be a non-empty list drawn from "codex", "opencode" and "acpx".'),
        ("codex", 'Providers must be a non-empty list drawn from "codex", "opencode" and "acpx".'),
        (["codex", "codex"], "Providers must not repeat."),
    ],
)
def test_bad_providers_are_refused(providers: Any, message: str) -> None:
    assert message in clean_errors(new_case(providers=providers))["providers"]


@pytest.mark.parametrize(
    ("tags", "message"),
    [
        ("response", 'Tags must be a list of non-blank texts, e.g. ["response", "resolver"].'),
        ([""], 'Tags must be a list of non-blank texts, e.g. ["response", "resolver"].'),
        ([3], 'Tags must be a list of non-blank texts, e.g. ["response", "resolver"].'),
        (["response", "response"], "Tags must not repeat."),
    ],
)
def test_bad_tags_are_refused(tags: Any, message: str) -> None:
    assert message in clean_errors(new_case(tags=tags))["tags"]


def test_a_blank_case_title_is_refused() -> None:
    assert "Title must not be blank." in clean_errors(new_case(title="   "))["title"]


@pytest.mark.parametrize("repetitions", [0, 21])
def test_case_repetitions_stay_between_1_and_20(repetitions: int) -> None:
    errors = clean_errors(new_case(repetitions=repetitions))
    assert errors["repetitions"]


# --- chaos scenarios ------------------------------------------------------------------------------


def test_an_unknown_fault_is_refused() -> None:
    assert clean_errors(new_scenario(fault="meteor"))["fault"] == ["Value 'meteor' is not a valid choice."]


def test_a_blank_invariant_is_refused() -> None:
    assert "Expected invariant must not be blank." in clean_errors(new_scenario(expected_invariant="  "))["expected_invariant"]


# --- secret-shaped data in every text and JSON field of every model (docs/failure-modes.md B8, docs/failure-modes.md B12) ----------------------


def new_price(**overrides: Any) -> ModelPrice:
    values: dict[str, Any] = {
        "model": "gpt-5.6-luna",
        "input_usd": Decimal("1"),
        "cached_input_usd": Decimal("0.1"),
        "output_usd": Decimal("8"),
        "reasoning_usd": Decimal("8"),
    }
    values.update(overrides)
    return ModelPrice(**values)


SECRET_FIELDS = [
    # (model, builder, field, the field's label in the message, a value holding a secret)
    ("Budget", new_budget, "name", "Name", KEY_SHAPED),
    ("Slot", lambda **kw: Slot(**{"key": "codex-strong", "position": 0, **kw}), "key", "Id", KEY_SHAPED),
    ("Candidate", new_candidate, "key", "Id", KEY_SHAPED),
    ("Candidate", new_candidate, "model", "Model", B8_OPENAI),
    ("Candidate", new_candidate, "model", "Model", "openrouter/" + BEARER),
    ("Candidate", new_candidate, "reasoning_effort", "Reasoning effort", AWS),
    ("Candidate", new_candidate, "profile", "Profile", B8_OPENAI),
    ("Candidate", new_candidate, "required_environment", "Required environment", [B8_OPENAI]),
    ("Candidate", new_candidate, "required_environment", "Required environment", ["OPENAI_API_KEY", AWS]),
    ("Candidate", new_candidate, "adapter", "Adapter", B8_OPENAI),
    ("Candidate", new_candidate, "provider", "Provider", B8_OPENAI),
    ("Candidate", new_candidate, "tier", "Tier", B8_OPENAI),
    ("WorkflowCase", new_case, "key", "Id", KEY_SHAPED),
    ("WorkflowCase", new_case, "title", "Title", "Answer with " + B8_OPENAI),
    ("WorkflowCase", new_case, "tags", "Tags", ["response", B8_OPENAI]),
    ("WorkflowCase", new_case, "providers", "Providers", ["codex", AWS]),
    ("WorkflowCase", new_case, "steps", "Steps", [{"kind": "run_start", "taskMode": "ask", B8_OPENAI: True}]),
    ("WorkflowCase", new_case, "steps", "Steps", [{"kind": "steer", "delivery": BEARER}]),
    ("WorkflowCase", new_case, "assertions", "Assertions", {"orderedMarkers": [B8_OPENAI]}),
    ("WorkflowCase", new_case, "assertions", "Assertions", {B8_OPENAI: "done"}),
    (
        "WorkflowCase",
        new_case,
        "assertions",
        "Assertions",
        {"requiredPrpEventTypes": [B8_OPENAI], "forbiddenPrpEventTypes": [B8_OPENAI]},
    ),
    ("WorkflowCase", new_case, "prompt", "Prompt", "Call finish_task with the key " + B8_OPENAI),
    ("ModelPrice", lambda **kw: new_price(**kw), "model", "Model", B8_OPENAI),
    ("ModelPrice", lambda **kw: new_price(**kw), "note", "Note", "checked with " + BEARER),
    ("ChaosScenario", new_scenario, "key", "Id", KEY_SHAPED),
    ("ChaosScenario", new_scenario, "expected_invariant", "Expected invariant", "replays " + BEARER),
    ("ChaosScenario", new_scenario, "fault", "Fault", AWS),
    ("ChaosScenario", new_scenario, "lane", "Lane", B8_OPENAI),
]


@pytest.mark.parametrize(
    ("model", "build", "field", "label", "value"),
    SECRET_FIELDS,
    ids=[f"{model}.{field}-{index}" for index, (model, _, field, _, _) in enumerate(SECRET_FIELDS)],
)
def test_secret_shaped_data_is_refused_in_every_field_without_echoing_it(
    model: str, build: Any, field: str, label: str, value: Any
) -> None:
    instance = build(**{field: value})
    with pytest.raises(ValidationError) as caught:
        instance.full_clean()
    errors = caught.value.message_dict
    assert field in errors, errors
    assert errors[field][0].startswith(f"{label} looks like it contains a secret ("), errors[field]
    assert SECRET_MESSAGE.search(errors[field][0])
    text = all_text(caught.value)
    for secret in (KEY_SHAPED, B8_OPENAI, AWS, BEARER.split()[1]):
        assert secret not in text
        assert secret[:12] not in text


def test_every_text_and_json_field_of_every_catalog_model_is_covered() -> None:
    from django.db import models

    covered = {(model, field) for model, _, field, _, _ in SECRET_FIELDS}
    for model_class in (Budget, Slot, Candidate, WorkflowCase, ChaosScenario, ModelPrice):
        for field in model_class._meta.concrete_fields:
            if isinstance(field, (models.CharField, models.TextField, models.JSONField)):
                assert (model_class.__name__, field.name) in covered, f"{model_class.__name__}.{field.name}"


def test_clean_fields_alone_also_refuses_secrets() -> None:
    candidate = new_candidate(tier=B8_OPENAI)
    with pytest.raises(ValidationError) as caught:
        candidate.clean_fields(exclude=["slot", "budget"])
    assert caught.value.message_dict["tier"][0].startswith("Tier looks like it contains a secret")
    assert B8_OPENAI not in all_text(caught.value)
    assert caught.value.error_dict["tier"][0].code == "secret_shaped"


def test_a_secret_typed_into_a_choice_field_is_named_and_redacted_in_the_choice_error() -> None:
    errors = clean_errors(new_candidate(tier=B8_OPENAI))
    assert errors["tier"] == [
        "Tier looks like it contains a secret (OpenAI API key). Store the name of the environment variable "
        "that holds it (such as OPENAI_API_KEY), never the value.",
        "Value '[REDACTED]' is not a valid choice.",
    ]


# --- the database backs the rules: objects.create() skips full_clean() but not the constraints ------


def _integrity_error(create: Any) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        create()


def test_constraints_back_slot_rules() -> None:
    Slot.objects.create(key="codex-strong", position=0)
    _integrity_error(lambda: Slot.objects.create(key="codex-strong", position=1))
    _integrity_error(lambda: Slot.objects.create(key="opencode-strong", position=0))


def test_constraints_back_candidate_rules() -> None:
    slot = make_slot(key="codex-strong")
    budget = make_budget()
    fields = {
        "slot": slot,
        "adapter": "codex_app_server",
        "provider": "codex",
        "model": "gpt-5.6-luna",
        "tier": "strong",
        "budget": budget,
    }
    Candidate.objects.create(key="codex-luna", position=0, **fields)
    other = make_slot(key="acpx-codex")
    _integrity_error(lambda: Candidate.objects.create(**{**fields, "key": "codex-luna", "position": 0, "slot": other}))
    _integrity_error(lambda: Candidate.objects.create(**{**fields, "key": "codex-sol", "position": 0}))
    for adapter, provider in WRONG_PAIRS:
        _integrity_error(
            lambda adapter=adapter, provider=provider: Candidate.objects.create(
                **{**fields, "key": "mismatch", "position": 5, "adapter": adapter, "provider": provider}
            )
        )
    _integrity_error(lambda: Candidate.objects.create(**{**fields, "key": "blank-model", "position": 6, "model": ""}))
    assert Candidate.objects.count() == 1


@pytest.mark.parametrize("field", ["max_latency_ms", "max_attempts", "max_total_tokens", "max_cost_usd"])
def test_constraints_back_positive_budgets(field: str) -> None:
    values = {"name": "zero", "max_latency_ms": 1, "max_attempts": 1, "max_cost_usd": Decimal("1"), "max_total_tokens": 1}
    _integrity_error(lambda: Budget.objects.create(**{**values, field: 0}))


def test_constraints_back_unique_budget_names() -> None:
    values = {"max_latency_ms": 1, "max_attempts": 1, "max_cost_usd": Decimal("1"), "max_total_tokens": 1}
    Budget.objects.create(name="strong-premium", **values)
    _integrity_error(lambda: Budget.objects.create(name="strong-premium", **values))


def test_constraints_back_case_rules() -> None:
    values = {"title": "t", "providers": ["codex"], "steps": [{"kind": "run_start", "taskMode": "ask"}]}
    WorkflowCase.objects.create(key="final-response", position=0, **values)
    _integrity_error(lambda: WorkflowCase.objects.create(key="final-response", position=1, **values))
    _integrity_error(lambda: WorkflowCase.objects.create(key="rich-activity", position=0, **values))
    _integrity_error(lambda: WorkflowCase.objects.create(key="zero", position=2, repetitions=0, **values))
    _integrity_error(lambda: WorkflowCase.objects.create(key="many", position=3, repetitions=21, **values))
    _integrity_error(lambda: WorkflowCase.objects.create(**{**values, "key": "untitled", "position": 4, "title": ""}))


def test_constraints_back_chaos_scenario_rules() -> None:
    ChaosScenario.objects.create(key="chaos-restart", fault="restart", expected_invariant="x")
    _integrity_error(lambda: ChaosScenario.objects.create(key="chaos-restart", fault="restart", expected_invariant="y"))
    _integrity_error(lambda: ChaosScenario.objects.create(key="chaos-meteor", fault="meteor", expected_invariant="y"))
    _integrity_error(lambda: ChaosScenario.objects.create(key="chaos-blank", fault="restart", expected_invariant=""))


def test_constraints_make_a_second_delivery_harmless() -> None:
    """One schedule per (seed, day, night), one nightly run per schedule, one execution per id, one attempt number."""
    import datetime as dt

    from django.utils import timezone

    key = {"seed": "s", "rotation_day": 0, "night": dt.date(2026, 8, 24)}
    schedule = Schedule.objects.create(**key, generated_at="2026-08-24T04:00:00.000Z")
    _integrity_error(lambda: Schedule.objects.create(**key, generated_at="2026-08-24T04:00:00.000Z"))
    _integrity_error(lambda: Schedule.objects.create(seed="s", rotation_day=7, night=dt.date(2026, 8, 25), generated_at="x"))
    entry = ScheduleEntry.objects.create(
        schedule=schedule,
        position=0,
        execution_id="rwe-0",
        case_key="c",
        candidate_key="k",
        slot_key="s",
        repetition=1,
        candidate={},
        budget={},
    )
    run = Run.objects.create(schedule=schedule, trigger="nightly", cost_ceiling_usd=Decimal("12"))
    _integrity_error(lambda: Run.objects.create(schedule=schedule, trigger="nightly", cost_ceiling_usd=Decimal("12")))
    Run.objects.create(schedule=schedule, trigger="manual", cost_ceiling_usd=Decimal("12"))
    _integrity_error(lambda: Run.objects.create(schedule=schedule, trigger="manual", cost_ceiling_usd=Decimal("0")))
    fields = {"entry": entry, "case_key": "c", "candidate_key": "k", "slot_key": "s", "repetition": 1}
    execution = Execution.objects.create(run=run, position=0, execution_id="rwe-0", **fields)
    _integrity_error(lambda: Execution.objects.create(run=run, position=1, execution_id="rwe-0", **fields))
    now = timezone.now()
    Attempt.objects.create(execution=execution, number=1, outcome="observation", started_at=now, finished_at=now)
    _integrity_error(lambda: Attempt.objects.create(execution=execution, number=1, outcome="crash", started_at=now, finished_at=now))


# --- added after the bad-input review ---------------------------------------------------------------


def test_a_second_candidate_running_the_same_model_in_a_slot_is_refused_ignoring_case(db) -> None:
    from django.core.exceptions import ValidationError

    from candidates.models import Candidate
    from tests.builders import make_candidate

    first = make_candidate(model="gpt-4o")
    copy = Candidate(
        key="copy",
        slot=first.slot,
        position=1,
        adapter=first.adapter,
        provider=first.provider,
        model="GPT-4o ",
        tier="strong",
        required_environment=[],
        budget=first.budget,
    )
    with pytest.raises(ValidationError, match="already has a candidate running this model"):
        copy.full_clean()
    copy.reasoning_effort = "high"
    copy.full_clean()  # another reasoning effort is another candidate


@pytest.mark.parametrize("position", [1_000_000, 5_000_000])
def test_positions_at_or_above_the_reorder_offset_are_refused(db, position: int) -> None:
    from django.core.exceptions import ValidationError

    from candidates.models import Slot

    with pytest.raises(ValidationError, match="Position must be at most 999999"):
        Slot(key="late", position=position).full_clean()


@pytest.mark.parametrize("value", ["a\x00b", ["ok", "a\x00"], {"k\x00": 1}])
def test_nul_characters_are_refused_in_text_and_json_fields(db, value) -> None:
    from django.core.exceptions import ValidationError

    from tests.builders import make_case

    field = "title" if isinstance(value, str) else "tags"
    kwargs = (
        {field: value}
        if field == "title"
        else {"tags": value if isinstance(value, list) else ["x"], "assertions": value if isinstance(value, dict) else {}}
    )
    with pytest.raises(ValidationError, match="NUL character"):
        make_case(**kwargs)


@pytest.mark.parametrize("value", ["a\ud800b", ["ok", "a\udfff"], {"k\udc00": 1}])
def test_lone_surrogates_are_refused_in_text_and_json_fields(db, value) -> None:
    # A shell or loaddata writer bypasses the API's parser: SQLite's text write (or the API's
    # response) cannot encode the surrogate, and PostgreSQL's jsonb refuses it.
    from django.core.exceptions import ValidationError

    from tests.builders import make_case

    kwargs = {"title": value} if isinstance(value, str) else {"tags": value} if isinstance(value, list) else {"assertions": value}
    with pytest.raises(ValidationError, match="half of a surrogate pair, which cannot be stored"):
        make_case(**kwargs)


def test_json_nested_too_deeply_is_refused(db) -> None:
    from django.core.exceptions import ValidationError

    from tests.builders import make_case

    deep: list = []
    for _ in range(100):
        deep = [deep]
    with pytest.raises(ValidationError, match="nested too deeply"):
        make_case(tags=deep)


def test_a_secret_shaped_seed_is_refused_before_anything_is_stored() -> None:
    from schedules.building import ScheduleError, build_schedule
    from tests.reference import reference_cases, reference_manifest_slots

    seed = "ghp_" + "A1b2C3d4" * 4 + "E5f6"
    with pytest.raises(ScheduleError, match=r"schedule seed looks like a secret \(GitHub token\)") as caught:
        build_schedule(seed=seed, rotation_day=0, generated_at="2026-08-24", slots=reference_manifest_slots(), cases=reference_cases())
    assert seed not in str(caught.value)
