"""Every catalog validation rule, through the API: the model's own message, under the API field name.

The API builds the model instance and runs ``full_clean()``, so these are the same rules (and the
same words) as the admin and the manifest import. Nothing here may produce a 500 or echo a
secret-shaped value (docs/failure-modes.md B7, B8, B9, docs/failure-modes.md B12). Synthetic secrets are assembled by
concatenation so this file carries no key-shaped literal.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from candidates.models import Budget, Candidate, Slot
from schedules.models import ChaosScenario, WorkflowCase

pytestmark = pytest.mark.django_db

SECRET = "sk-" + "A1b2" * 5
B12_OPENAI = "sk-" + "proj-" + "FAKEfakeFAKE_0123456789-abcdefghijklmnop"
B12_AWS = "AKIA" + "IOSFODNN7EXAMPLE"
B8_OPENAI = "sk-" + "proj-" + "FAKE0123456789abcdefghij"
SECRETS = [SECRET, B12_OPENAI, B12_AWS]

ENV_NAME_HELP = (
    "is not an environment variable name: use capital letters, digits and underscores, starting with a "
    "letter or underscore (for example OPENAI_API_KEY)."
)


def send(client: Client, method: str, url: str, body: Any, **extra: Any):
    data = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return getattr(client, method)(url, data=data, content_type="application/json", **extra)


def candidate_body(**overrides: Any) -> dict[str, Any]:
    body = {
        "id": "codex-nova",
        "slotId": "codex-strong",
        "adapter": "codex_app_server",
        "provider": "codex",
        "model": "gpt-5.6-nova",
        "tier": "strong",
        "qualification": {"requiredEnvironment": ["OPENAI_API_KEY"]},
        "budgetName": "strong-premium",
    }
    body.update(overrides)
    return body


def budget_body(**overrides: Any) -> dict[str, Any]:
    return {"name": "tiny", "maxLatencyMs": 1000, "maxAttempts": 1, "maxCostUsd": 0.5, "maxTotalTokens": 2000, **overrides}


def case_body(**overrides: Any) -> dict[str, Any]:
    return {
        "id": "new-case",
        "title": "A new case",
        "providers": ["codex"],
        "steps": [{"kind": "run_start", "taskMode": "ask"}],
        **overrides,
    }


def chaos_body(**overrides: Any) -> dict[str, Any]:
    return {"id": "chaos-new", "fault": "restart", "expectedInvariant": "nothing is lost", **overrides}


def assert_refused(response, errors: dict[str, Any]) -> None:
    assert response.status_code == 400, response.content
    assert response.json() == errors


# --- uniqueness: database constraints, readable messages, never a 500 (docs/failure-modes.md B7) ----------------------


def test_a_duplicate_slot_id_is_refused(reference_catalog, staff_client):
    assert_refused(send(staff_client, "post", "/api/slots/", {"id": "codex-strong"}), {"id": ["A slot with this id already exists."]})


def test_a_duplicate_slot_position_is_refused(reference_catalog, staff_client):
    assert_refused(
        send(staff_client, "post", "/api/slots/", {"id": "extra", "position": 0}),
        {"position": ["Another slot already has this position."]},
    )


def test_a_candidate_id_used_in_another_slot_is_refused(reference_catalog, staff_client):
    response = send(staff_client, "post", "/api/candidates/", candidate_body(id="opencode-kimi"))

    assert_refused(response, {"id": ["A candidate with this id already exists (ids are unique across all slots)."]})


def test_renaming_a_candidate_to_a_taken_id_is_refused(reference_catalog, staff_client):
    response = send(staff_client, "patch", "/api/candidates/opencode-glm/", {"id": "codex-luna"})

    assert_refused(response, {"id": ["A candidate with this id already exists (ids are unique across all slots)."]})
    assert Candidate.objects.filter(key="opencode-glm").exists()


def test_two_candidates_at_one_position_in_a_slot_are_refused(reference_catalog, staff_client):
    response = send(staff_client, "post", "/api/candidates/", candidate_body(position=0))

    assert_refused(response, {"position": ["Another candidate in this slot already has this position."]})


def test_the_same_position_in_another_slot_is_accepted(reference_catalog, staff_client):
    response = send(staff_client, "post", "/api/candidates/", candidate_body(slotId="extra-slot-free", position=0))
    assert response.status_code == 400  # the slot must exist first
    Slot.objects.create(key="extra-slot-free", position=9)

    response = send(staff_client, "post", "/api/candidates/", candidate_body(slotId="extra-slot-free", position=0))

    assert response.status_code == 201


def test_a_duplicate_case_id_is_refused(reference_catalog, staff_client):
    assert_refused(
        send(staff_client, "post", "/api/cases/", case_body(id="final-response")),
        {"id": ["A workflow case with this id already exists."]},
    )


def test_a_duplicate_scenario_id_is_refused(reference_catalog, staff_client):
    assert_refused(
        send(staff_client, "post", "/api/chaos-scenarios/", chaos_body(id="chaos-restart")),
        {"id": ["A chaos scenario with this id already exists."]},
    )


def test_a_duplicate_budget_name_is_refused(reference_catalog, staff_client):
    assert_refused(
        send(staff_client, "post", "/api/budgets/", budget_body(name="strong-premium")),
        {"name": ["A budget with this name already exists."]},
    )


def test_a_duplicate_that_slips_past_validation_gets_the_constraint_message(reference_catalog, staff_client, monkeypatch):
    """A concurrent writer inserted the same id between full_clean() and the INSERT."""
    real = Slot.validate_constraints
    calls: list[int] = []

    def race_on_first_check(self: Slot, exclude: Any = None) -> None:
        calls.append(1)
        if len(calls) > 1:
            real(self, exclude=exclude)

    monkeypatch.setattr(Slot, "validate_constraints", race_on_first_check)

    response = send(staff_client, "post", "/api/slots/", {"id": "codex-strong", "position": 40})

    assert_refused(response, {"id": ["A slot with this id already exists."]})
    assert Slot.objects.filter(key="codex-strong").count() == 1


def test_an_integrity_error_no_rule_explains_is_a_409(reference_catalog, staff_client, monkeypatch):
    monkeypatch.setattr(Slot, "validate_constraints", lambda self, exclude=None: None)

    response = send(staff_client, "post", "/api/slots/", {"id": "codex-strong", "position": 40})

    assert response.status_code == 409
    assert response.json() == {"detail": "This change conflicts with another change saved at the same moment; reload and try again."}


@pytest.mark.parametrize("given", ["Codex-Luna", " codex-luna", "codex luna", ""])
def test_ids_are_not_normalised_a_differently_spelled_id_is_refused(reference_catalog, staff_client, given):
    response = send(staff_client, "post", "/api/candidates/", candidate_body(id=given))

    assert response.status_code == 400
    assert list(response.json()) == ["id"]
    assert not Candidate.objects.filter(key=given).exists()


# --- candidates ---------------------------------------------------------------------------------

PAIR_MESSAGE = (
    "Adapter and provider do not belong together: codex_app_server runs codex, opencode_server runs opencode, acpx_runtime runs acpx."
)


@pytest.mark.parametrize(
    ("adapter", "provider"),
    [("codex_app_server", "opencode"), ("opencode_server", "acpx"), ("acpx_runtime", "codex")],
)
def test_an_adapter_with_a_foreign_provider_is_refused(reference_catalog, staff_client, adapter, provider):
    response = send(staff_client, "post", "/api/candidates/", candidate_body(adapter=adapter, provider=provider))

    assert_refused(response, {"non_field_errors": [PAIR_MESSAGE]})


@pytest.mark.parametrize(
    ("adapter", "provider"),
    [("codex_app_server", "codex"), ("opencode_server", "opencode"), ("acpx_runtime", "acpx")],
)
def test_each_adapter_with_its_own_provider_is_accepted(reference_catalog, staff_client, adapter, provider):
    response = send(staff_client, "post", "/api/candidates/", candidate_body(adapter=adapter, provider=provider))

    assert response.status_code == 201


def test_an_unknown_adapter_is_refused_with_the_model_message(reference_catalog, staff_client):
    response = send(staff_client, "post", "/api/candidates/", candidate_body(adapter="claude_direct"))

    assert_refused(response, {"adapter": ["Value 'claude_direct' is not a valid choice."]})


@pytest.mark.parametrize(
    ("model", "messages"),
    [("", ["This field cannot be blank.", "Model must not be blank."]), ("   ", ["Model must not be blank."])],
)
def test_a_blank_model_is_refused(reference_catalog, staff_client, model, messages):
    assert_refused(send(staff_client, "post", "/api/candidates/", candidate_body(model=model)), {"model": messages})


def test_an_unknown_slot_or_budget_is_refused(reference_catalog, staff_client):
    response = send(staff_client, "post", "/api/candidates/", candidate_body(slotId="nowhere", budgetName="free"))

    assert_refused(response, {"slotId": ["There is no slot with this id."], "budgetName": ["There is no budget with this name."]})


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("OPENAI_API_KEY", 'Required environment must be a list of environment variable names such as ["OPENAI_API_KEY"].'),
        ({}, 'Required environment must be a list of environment variable names such as ["OPENAI_API_KEY"].'),
        (7, 'Required environment must be a list of environment variable names such as ["OPENAI_API_KEY"].'),
        ([1], "Required environment item 1 must be a text name, not int."),
        ([""], f"Required environment item 1 {ENV_NAME_HELP}"),
        (["OPENAI_API_KEY "], f"Required environment item 1 {ENV_NAME_HELP}"),
        (["openai api key"], f"Required environment item 1 {ENV_NAME_HELP}"),
        (["OPENAI_API_KEY", "OPENAI_API_KEY"], "Required environment lists OPENAI_API_KEY twice."),
    ],
)
def test_required_environment_must_be_a_list_of_unique_names(reference_catalog, staff_client, value, message):
    body = candidate_body(qualification={"requiredEnvironment": value})

    assert_refused(send(staff_client, "post", "/api/candidates/", body), {"qualification": {"requiredEnvironment": [message]}})


def test_required_environment_null_is_refused(reference_catalog, staff_client):
    body = candidate_body(qualification={"requiredEnvironment": None})

    assert_refused(
        send(staff_client, "post", "/api/candidates/", body), {"qualification": {"requiredEnvironment": ["This field may not be null."]}}
    )


def test_a_key_value_where_a_name_belongs_is_refused_and_not_echoed(reference_catalog, staff_client):
    body = candidate_body(qualification={"requiredEnvironment": [B8_OPENAI]})

    response = send(staff_client, "post", "/api/candidates/", body)

    assert response.status_code == 400
    messages = response.json()["qualification"]["requiredEnvironment"]
    assert messages[0].startswith("Required environment looks like it contains a secret (OpenAI API key).")
    assert B8_OPENAI not in response.content.decode()


def test_an_empty_required_environment_is_accepted(reference_catalog, staff_client):
    body = candidate_body(qualification={"requiredEnvironment": []})

    assert send(staff_client, "post", "/api/candidates/", body).status_code == 201


# --- budgets (docs/failure-modes.md B9) -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ("maxLatencyMs", "Max latency must be more than 0 ms."),
        ("maxAttempts", "Max attempts must be at least 1."),
        ("maxTotalTokens", "Max total tokens must be more than 0."),
        ("maxCostUsd", "Ensure this value is greater than or equal to 0.000001."),
    ],
)
def test_a_zero_budget_value_is_refused(staff_client, db, field, message):
    assert_refused(send(staff_client, "post", "/api/budgets/", budget_body(**{field: 0})), {field: [message]})


@pytest.mark.parametrize("field", ["maxLatencyMs", "maxAttempts", "maxTotalTokens"])
def test_a_negative_budget_count_is_refused(staff_client, db, field):
    response = send(staff_client, "post", "/api/budgets/", budget_body(**{field: -1}))

    assert_refused(response, {field: ["Ensure this value is greater than or equal to 0."]})


def test_a_budget_count_too_large_for_the_database_is_refused(staff_client, db):
    response = send(staff_client, "post", "/api/budgets/", budget_body(maxTotalTokens=10**20))

    # The bound is the database's integer range: 2**63 - 1 on SQLite, 2**31 - 1 on PostgreSQL.
    assert response.status_code == 400
    [message] = response.json()["maxTotalTokens"]
    assert message.startswith("Ensure this value is less than or equal to ")


def test_a_cost_with_more_than_six_decimals_is_refused(staff_client, db):
    response = send(staff_client, "post", "/api/budgets/", budget_body(maxCostUsd=0.1234567))

    assert_refused(response, {"maxCostUsd": ["Ensure that there are no more than 6 decimal places."]})


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("1e309", "JSON parse error - 1e309 is too large: use a finite number"),
        ("-1e309", "JSON parse error - -1e309 is too large: use a finite number"),
        ("NaN", "JSON parse error - NaN is not allowed in JSON: use a finite number"),
        ("Infinity", "JSON parse error - Infinity is not allowed in JSON: use a finite number"),
        ("-Infinity", "JSON parse error - -Infinity is not allowed in JSON: use a finite number"),
        # Past Python's digit limit: what to fix in the body, not Python's advice to the server.
        pytest.param("9" * 5000, "JSON parse error - a whole number of 5000 digits is too long: use at most 4300 digits", id="5000 digits"),
        pytest.param(
            "-" + "9" * 4301, "JSON parse error - a whole number of 4301 digits is too long: use at most 4300 digits", id="-4301 digits"
        ),
    ],
)
def test_non_finite_json_numbers_are_a_400(staff_client, db, raw, message):
    body = '{"name": "tiny", "maxLatencyMs": 1, "maxAttempts": 1, "maxCostUsd": ' + raw + ', "maxTotalTokens": 1}'

    assert_refused(send(staff_client, "post", "/api/budgets/", body), {"detail": message})
    assert not Budget.objects.filter(name="tiny").exists()


def test_a_key_given_twice_is_a_400_not_the_last_one_winning(staff_client, db):
    body = '{"name": "b1", "name": "b2", "maxLatencyMs": 1, "maxAttempts": 1, "maxCostUsd": 1, "maxTotalTokens": 1}'

    assert_refused(
        send(staff_client, "post", "/api/budgets/", body),
        {"detail": "JSON parse error - 'name' appears twice in one object: give each key once"},
    )
    assert not Budget.objects.exists()


LONE_SURROGATE = "JSON parse error - a string holds \\ud800, half of a surrogate pair with no other half: it is not a character; remove it"


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [
        # Saved, this case answered every later read with a 500 (no UTF-8 encodes the surrogate).
        pytest.param("patch", "/api/cases/final-response/", '{"tags": ["a\\ud800"]}', id="case tags"),
        pytest.param("patch", "/api/cases/final-response/", '{"assertions": {"orderedMarkers": ["\\ud800"]}}', id="case assertions"),
        pytest.param("post", "/api/score/", '[{"observation": {"caseId": "\\ud800"}}]', id="score echoes the case id"),
    ],
)
def test_a_lone_surrogate_escape_is_a_400_not_a_500(reference_catalog, staff_client, method, url, body):
    before = WorkflowCase.objects.get(key="final-response")

    assert_refused(send(staff_client, method, url, body), {"detail": LONE_SURROGATE})
    after = WorkflowCase.objects.get(key="final-response")
    assert (after.tags, after.assertions) == (before.tags, before.assertions)
    assert staff_client.get("/api/cases/final-response/").status_code == 200


def test_a_surrogate_pair_is_one_character_and_kept(reference_catalog, staff_client):
    response = send(staff_client, "patch", "/api/cases/final-response/", '{"tags": ["smile-\\ud83d\\ude00"]}')

    assert response.status_code == 200, response.content
    assert WorkflowCase.objects.get(key="final-response").tags == ["smile-\U0001f600"]


@pytest.mark.parametrize("value", ["NaN", "Infinity", "1e309", "1.5", True, None, [1.5]])
def test_a_cost_that_is_not_a_json_number_is_refused(staff_client, db, value):
    response = send(staff_client, "post", "/api/budgets/", budget_body(maxCostUsd=value))

    assert response.status_code == 400
    assert list(response.json()) == ["maxCostUsd"]


# --- workflow cases and chaos scenarios ---------------------------------------------------------


def test_an_unknown_step_kind_is_refused(reference_catalog, staff_client):
    response = send(staff_client, "post", "/api/cases/", case_body(steps=[{"kind": "dance"}]))

    assert_refused(
        response,
        {
            "steps": [
                "Steps[1].kind is an unknown step kind: use one of run_start, interaction_response, steer, "
                "review_decision, permission_decision, cancel, process_restart, child_completion."
            ]
        },
    )


def test_an_unknown_assertion_key_is_refused(reference_catalog, staff_client):
    response = send(staff_client, "post", "/api/cases/", case_body(assertions={"vibes": "good"}))

    assert response.status_code == 400
    assert response.json()["assertions"][0].startswith("Unknown assertion key vibes: use one of issueStatus, runStatus,")


def test_an_event_both_required_and_forbidden_is_refused(reference_catalog, staff_client):
    assertions = {"requiredPrpEventTypes": ["run.terminal"], "forbiddenPrpEventTypes": ["run.terminal"]}

    response = send(staff_client, "post", "/api/cases/", case_body(assertions=assertions))

    assert_refused(response, {"assertions": ["Event type run.terminal is both required and forbidden."]})


@pytest.mark.parametrize(
    ("overrides", "errors"),
    [
        ({"title": "  "}, {"title": ["Title must not be blank."]}),
        ({"tags": "response"}, {"tags": ['Tags must be a list of non-blank texts, e.g. ["response", "resolver"].']}),
        ({"tags": ["a", "a"]}, {"tags": ["Tags must not repeat."]}),
        (
            {"providers": []},
            {"providers": ["This field cannot be blank.", 'Providers must be a non-empty list drawn from "codex", "opencode" and "acpx".']},
        ),
        ({"providers": ["codex", "codex"]}, {"providers": ["Providers must not repeat."]}),
        ({"repetitions": 0}, {"repetitions": ["Ensure this value is greater than or equal to 1."]}),
        ({"repetitions": 21}, {"repetitions": ["Ensure this value is less than or equal to 20."]}),
        ({"steps": []}, {"steps": ["This field cannot be blank.", "Steps needs at least one step."]}),
    ],
)
def test_case_fields_are_checked_by_the_model(reference_catalog, staff_client, overrides, errors):
    assert_refused(send(staff_client, "post", "/api/cases/", case_body(**overrides)), errors)


def test_an_unknown_fault_and_a_blank_invariant_are_refused(reference_catalog, staff_client):
    response = send(staff_client, "post", "/api/chaos-scenarios/", chaos_body(fault="meteor", expectedInvariant=" "))

    assert_refused(
        response,
        {"fault": ["Value 'meteor' is not a valid choice."], "expectedInvariant": ["Expected invariant must not be blank."]},
    )


# --- secrets: refused in every text and JSON field, never echoed (docs/failure-modes.md B8, docs/failure-modes.md B12) -----------------------


def secret_cases() -> list[tuple[str, dict[str, Any], list[str], str]]:
    """(url, body, error path, label the message starts with) for every writable text/JSON field."""
    cases = []
    for secret in SECRETS:
        cases += [
            ("/api/candidates/", candidate_body(model=secret), ["model"], "Model"),
            ("/api/candidates/", candidate_body(model="gpt " + secret), ["model"], "Model"),
            ("/api/candidates/", candidate_body(reasoningEffort=secret), ["reasoningEffort"], "Reasoning effort"),
            (
                "/api/candidates/",
                candidate_body(qualification={"requiredEnvironment": ["OPENAI_API_KEY"], "profile": secret}),
                ["qualification", "profile"],
                "Profile",
            ),
            (
                "/api/candidates/",
                candidate_body(qualification={"requiredEnvironment": [secret]}),
                ["qualification", "requiredEnvironment"],
                "Required environment",
            ),
            ("/api/cases/", case_body(title="Token " + secret), ["title"], "Title"),
            ("/api/cases/", case_body(tags=[secret]), ["tags"], "Tags"),
            ("/api/cases/", case_body(assertions={"orderedMarkers": [secret]}), ["assertions"], "Assertions"),
            ("/api/cases/", case_body(steps=[{"kind": "run_start", "taskMode": "ask", secret: 1}]), ["steps"], "Steps"),
            ("/api/chaos-scenarios/", chaos_body(expectedInvariant=secret), ["expectedInvariant"], "Expected invariant"),
        ]
    return cases


@pytest.mark.parametrize(("url", "body", "path", "label"), secret_cases())
def test_secret_shaped_values_are_refused_naming_the_field_without_echoing_it(reference_catalog, staff_client, url, body, path, label):
    response = send(staff_client, "post", url, body)

    assert response.status_code == 400
    messages: Any = response.json()
    for part in path:
        messages = messages[part]
    assert messages[0].startswith(f"{label} looks like it contains a secret (")
    text = response.content.decode()
    assert not any(secret in text for secret in SECRETS)
    assert not any(secret[4:16] in text for secret in SECRETS)


@pytest.mark.parametrize("secret", SECRETS)
def test_a_secret_in_a_choice_or_an_unknown_key_is_not_echoed(reference_catalog, staff_client, secret):
    responses = [
        send(staff_client, "post", "/api/candidates/", candidate_body(adapter=secret)),
        send(staff_client, "post", "/api/candidates/", {**candidate_body(), secret: "x"}),
        send(staff_client, "post", "/api/candidates/", candidate_body(slotId=secret)),
        staff_client.get("/api/candidates/", {"tier": secret}),
        staff_client.get("/api/schedules/preview/", {"generated_at": secret}),
    ]

    for response in responses:
        assert response.status_code == 400
        assert secret not in response.content.decode()


def test_a_secret_refused_on_update_leaves_the_row_unchanged(reference_catalog, staff_client):
    response = send(staff_client, "patch", "/api/candidates/codex-luna/", {"model": SECRET})

    assert response.status_code == 400
    assert Candidate.objects.get(key="codex-luna").model == "gpt-5.6-luna"


# --- bodies: malformed, wrong type, unknown keys ------------------------------------------------


@pytest.mark.parametrize(
    ("body", "content_type", "status", "errors"),
    [
        ("not json", "application/json", 400, {"detail": "JSON parse error - Expecting value: line 1 column 1 (char 0)"}),
        ('{"id": ', "application/json", 400, {"detail": "JSON parse error - Expecting value: line 1 column 8 (char 7)"}),
        (b"\xff\xfe{}", "application/json", 400, None),
        ("[1, 2]", "application/json", 400, {"non_field_errors": ["Invalid data. Expected a dictionary, but got list."]}),
        ('"slot"', "application/json", 400, {"non_field_errors": ["Invalid data. Expected a dictionary, but got str."]}),
        ("7", "application/json", 400, {"non_field_errors": ["Invalid data. Expected a dictionary, but got int."]}),
        ("id=x", "application/x-www-form-urlencoded", 415, None),
    ],
)
def test_garbage_bodies_are_client_errors(staff_client, db, body, content_type, status, errors):
    response = staff_client.post("/api/slots/", data=body, content_type=content_type)

    assert response.status_code == status
    if errors is not None:
        assert response.json() == errors
    assert not Slot.objects.exists()


def test_an_empty_body_lists_the_required_fields(staff_client, db):
    response = staff_client.post("/api/budgets/", data="", content_type="application/json")

    assert_refused(
        response,
        {name: ["This field is required."] for name in ("name", "maxLatencyMs", "maxAttempts", "maxCostUsd", "maxTotalTokens")},
    )


def test_unknown_fields_are_refused_by_name(reference_catalog, staff_client):
    response = send(staff_client, "post", "/api/candidates/", {**candidate_body(), "modle": "x", "active": True})

    accepted = "id, slotId, adapter, provider, model, tier, reasoningEffort, qualification, budgetName, position"
    assert_refused(
        response,
        {"modle": [f"Unknown field. Accepted fields: {accepted}."], "active": [f"Unknown field. Accepted fields: {accepted}."]},
    )


def test_unknown_nested_fields_are_refused_by_name(reference_catalog, staff_client):
    body = candidate_body(qualification={"requiredEnvironment": ["OPENAI_API_KEY"], "profiles": "x"})

    assert_refused(
        send(staff_client, "post", "/api/candidates/", body),
        {"qualification": {"profiles": ["Unknown field. Accepted fields: requiredEnvironment, profile."]}},
    )


def test_read_only_fields_sent_back_are_ignored(reference_catalog, staff_client):
    response = send(staff_client, "patch", "/api/cases/final-response/", {"version": 99, "title": "Renamed"})

    assert response.status_code == 200
    assert WorkflowCase.objects.get(key="final-response").version == 1


def test_a_wrong_json_type_is_refused_not_coerced(reference_catalog, staff_client):
    response = send(staff_client, "post", "/api/chaos-scenarios/", chaos_body(fault=["restart"]))

    assert_refused(response, {"fault": ["Must be text."]})
    assert not ChaosScenario.objects.filter(key="chaos-new").exists()


@pytest.mark.parametrize(("field", "message"), [("slotId", "Must be a slot id."), ("budgetName", "Must be a budget name.")])
def test_a_nul_character_in_a_row_name_is_refused_before_the_lookup(reference_catalog, staff_client, field, message):
    # PostgreSQL refuses a NUL in a query: the slot and budget lookups were a 500 there.
    response = send(staff_client, "post", "/api/candidates/", candidate_body(**{field: "codex-strong\u0000"}))
    assert response.status_code == 400
    assert response.json()[field] == [message]
    response = send(staff_client, "patch", "/api/candidates/codex-luna/", {field: "x\u0000"})
    assert response.status_code == 400 and response.json()[field] == [message]
