"""Look-alike identities are refused by every writer: keys, model names, seeds.

Keys (slot, candidate, budget, case, scenario ids) and model names decide uniqueness and feed
execution ids. A value that differs from a stored one only by a trailing newline, an invisible
character, a compatibility form or another Unicode normalisation form would be a second thing
that reads like the first ("codex-luna\\n" beside "codex-luna" pushed it out of the line-up). The
model validates it once (``full_clean``), so the admin, the API, the manifest import and the
shell all refuse it with the same words.
"""

from __future__ import annotations

import copy
import hashlib
import json
import unicodedata
from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from candidates.models import Candidate, ModelPrice
from candidates.services import ManifestError, import_manifest
from schedules.building import ScheduleError, build_schedule, execution_id
from tests.builders import load_reference_catalog, make_budget, make_candidate, make_slot
from tests.test_api_validation import candidate_body, send
from tests.test_manifest import reference_document

pytestmark = pytest.mark.django_db

MODEL = "gpt-5.6-luna"
FULLWIDTH = {ord(char): ord(char) + 0xFEE0 for char in "abcdefghijklmnopqrstuvwxyz0123456789-."}

# (what it is, the look-alike of MODEL or of a model with an accent, what the error says)
MODEL_TWINS: list[tuple[str, str, str]] = [
    ("trailing newline", MODEL + "\n", "control character (U+000A"),
    ("tab inside", "gpt-5.6\t-luna", "control character (U+0009"),
    ("zero-width space", "gpt-5.6\u200b-luna", "invisible character (U+200B ZERO WIDTH SPACE)"),
    ("zero-width joiner", "gpt\u200d-5.6-luna", "invisible character (U+200D"),
    ("soft hyphen", "gpt-5.6-lu\u00adna", "invisible character (U+00AD SOFT HYPHEN)"),
    ("byte order mark", "\ufeff" + MODEL, "invisible character (U+FEFF"),
    ("left-to-right mark", MODEL + "\u200e", "invisible character (U+200E"),
    ("variation selector", "gpt-5.6-lun\ufe0fa", "invisible character (U+FE0F"),
    ("full-width letters", MODEL.translate(FULLWIDTH), f"write '{MODEL}' instead"),
    ("full-width hyphen only", "gpt\uff0d5.6-luna", f"write '{MODEL}' instead"),
    ("ligature", "gpt-5.6-\ufb02una", "write 'gpt-5.6-fluna' instead"),
    ("non-breaking hyphen", "gpt\u20115.6-luna", "U+2011 NON-BREAKING HYPHEN at position 4, which looks like '-'"),
    ("hyphen", "gpt\u20105.6-luna", "U+2010 HYPHEN at position 4, which looks like '-'"),
    ("minus sign", "gpt\u22125.6-luna", "U+2212 MINUS SIGN"),
    ("decomposed accent (NFD)", unicodedata.normalize("NFD", "gpt-5.6-lunä"), "write 'gpt-5.6-lunä' instead"),
    ("superscript digit", "gpt-5.\u2076-luna", f"write '{MODEL}' instead"),
]

KEY_TWINS = ["codex-luna\n", "codex-luna\r\n", "codex-luna\u200b", "ｃｏｄｅｘ-luna", " codex-luna", "codex-luna "]


def _errors(instance: Any) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as caught:
        instance.full_clean()
    return caught.value.message_dict


# --- keys ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", KEY_TWINS, ids=repr)
def test_a_key_with_a_trailing_newline_or_a_look_alike_is_refused_beside_the_real_one(key: str) -> None:
    original = make_candidate(key="codex-luna", model=MODEL)
    twin = Candidate(
        key=key,
        slot=original.slot,
        position=1,
        adapter="codex_app_server",
        provider="codex",
        model="gpt-5.6-nova",
        tier="strong",
        required_environment=["OPENAI_API_KEY"],
        budget=original.budget,
    )

    assert "Use lowercase letters, digits" in _errors(twin)["key"][0]


@pytest.mark.parametrize("factory", ["slot", "budget"])
def test_slot_and_budget_names_refuse_a_trailing_newline(factory: str) -> None:
    if factory == "slot":
        instance = make_slot(key="codex-strong")
        instance.key = "codex-strong\n"
        field = "key"
    else:
        instance = make_budget(name="strong-premium")
        instance.name = "strong-premium\n"
        field = "name"
    assert "Use lowercase letters, digits" in _errors(instance)[field][0]


def test_case_and_scenario_ids_refuse_a_trailing_newline() -> None:
    from tests.test_models_validation import new_case, new_scenario

    assert "Use lowercase letters" in _errors(new_case(key="final-response\n"))["key"][0]
    assert "Use lowercase letters" in _errors(new_scenario(key="chaos-restart\n"))["key"][0]


def test_a_key_with_a_trailing_newline_is_refused_by_the_api(staff_client) -> None:
    load_reference_catalog()

    response = send(staff_client, "post", "/api/candidates/", candidate_body(id="codex-luna\n"))

    assert response.status_code == 400, response.content
    assert "Use lowercase letters, digits" in json.dumps(response.json())
    assert Candidate.objects.filter(key__startswith="codex-luna").count() == 1


def test_a_key_with_a_trailing_newline_is_refused_by_the_manifest_import() -> None:
    document = reference_document()
    twin = copy.deepcopy(document["slots"][0]["candidates"][0])
    twin["id"] += "\n"
    twin["model"] = "gpt-5.6-nova"
    document["slots"][0]["candidates"].append(twin)

    with pytest.raises(ManifestError) as caught:
        import_manifest(document)

    assert any("Use lowercase letters, digits" in problem for problem in caught.value.problems)
    assert not Candidate.objects.exists()


# --- model names --------------------------------------------------------------------------------


@pytest.mark.parametrize(("what", "model", "message"), MODEL_TWINS, ids=[what for what, _, _ in MODEL_TWINS])
def test_a_look_alike_model_name_is_refused_with_what_to_fix(what: str, model: str, message: str) -> None:
    original = make_candidate(key="codex-luna", model=MODEL)
    twin = Candidate(
        key="codex-luna-twin",
        slot=original.slot,
        position=1,
        adapter="codex_app_server",
        provider="codex",
        model=model,
        tier="strong",
        required_environment=["OPENAI_API_KEY"],
        budget=original.budget,
    )

    errors = _errors(twin)

    assert list(errors) == ["model"]
    assert message in errors["model"][0], errors


@pytest.mark.parametrize(("what", "model", "message"), MODEL_TWINS, ids=[what for what, _, _ in MODEL_TWINS])
def test_a_look_alike_model_name_is_refused_by_the_api_and_the_import(staff_client, what: str, model: str, message: str) -> None:
    load_reference_catalog()

    response = send(staff_client, "post", "/api/candidates/", candidate_body(id="codex-twin", model=model))

    assert response.status_code == 400, response.content
    assert message in json.dumps(response.json(), ensure_ascii=False), response.json()
    document = reference_document()
    document["slots"][0]["candidates"][0]["model"] = model
    with pytest.raises(ManifestError) as caught:
        import_manifest(document)
    assert any(message in problem for problem in caught.value.problems), caught.value.problems


def test_a_look_alike_price_model_is_refused() -> None:
    ModelPrice.objects.create(
        model=MODEL, input_usd=Decimal(1), cached_input_usd=Decimal(0), output_usd=Decimal(2), reasoning_usd=Decimal(2)
    )
    twin = ModelPrice(
        model="gpt-5.6\u200b-luna", input_usd=Decimal(1), cached_input_usd=Decimal(0), output_usd=Decimal(2), reasoning_usd=Decimal(2)
    )

    assert "invisible character (U+200B" in _errors(twin)["model"][0]


def test_reasoning_effort_and_profile_refuse_invisible_characters() -> None:
    candidate = make_candidate(key="codex-luna", model=MODEL)
    candidate.reasoning_effort = "high\u200b"
    candidate.profile = "openai\u00ad"

    errors = _errors(candidate)

    assert "invisible character (U+200B" in errors["reasoning_effort"][0]
    assert "invisible character (U+00AD" in errors["profile"][0]


def test_plain_model_names_with_accents_slashes_and_dots_are_accepted() -> None:
    slot = make_slot(key="opencode-strong")
    budget = make_budget()
    for position, model in enumerate(["openrouter/moonshotai/kimi-k2.5", "glm-4.6", "modèle-été", "claude-sonnet-5@2026-01-01"]):
        make_candidate(
            key=f"c{position}", slot=slot, budget=budget, position=position, model=model, adapter="opencode_server", provider="opencode"
        )
    assert Candidate.objects.filter(slot=slot).count() == 4


# --- seeds --------------------------------------------------------------------------------------

SLOTS = [
    {
        "id": "codex-strong",
        "candidates": [
            {"id": "codex-luna", "slotId": "codex-strong", "adapter": "codex_app_server", "model": MODEL, "budget": {"maxAttempts": 1}}
        ],
    }
]
CASES = [{"id": "final-response", "providers": ["codex"], "repetitions": 1}]


def _schedule(seed: str) -> dict[str, Any]:
    return build_schedule(seed=seed, rotation_day=0, generated_at="2026-08-24T00:00:00.000Z", slots=SLOTS, cases=CASES)


@pytest.mark.parametrize(
    ("seed", "message"),
    [
        (unicodedata.normalize("NFD", "café-week"), "is not in its plain Unicode form (NFC); write 'café-week' instead"),
        ("runner-live\u200b-seven-week-v1", "invisible character (U+200B ZERO WIDTH SPACE) at position 12"),
        ("runner-live-seven-week-v1\n", "control character (U+000A"),
        ("runner-live-seven-week-v1 ", "has spaces around it"),
        ("runner\u2011live", "looks like '-'"),
    ],
    ids=["nfd", "zero-width", "newline", "space", "hyphen-look-alike"],
)
def test_a_seed_that_differs_from_its_visible_twin_is_refused(seed: str, message: str) -> None:
    with pytest.raises(ScheduleError, match="schedule seed") as caught:
        _schedule(seed)
    assert message in str(caught.value)
    assert "execution id" in str(caught.value)


def test_a_plain_nfc_seed_hashes_exactly_what_the_reference_hashes() -> None:
    seed = "café-week-ünïcode"  # NFC, not ASCII: the reference hashes its UTF-8 bytes as given

    schedule = _schedule(seed)

    identity = f"{seed}:0:final-response:codex-luna:1".encode()
    assert schedule["entries"][0]["executionId"] == "rwe-" + hashlib.sha256(identity).hexdigest()[:16]
    assert execution_id(seed, 0, "final-response", "codex-luna", 1) == schedule["entries"][0]["executionId"]


def test_an_execution_id_of_a_decomposed_seed_is_its_visible_twins() -> None:
    nfd, nfc = unicodedata.normalize("NFD", "café-week"), "café-week"

    assert nfd != nfc
    assert execution_id(nfd, 3, "final-response", "codex-luna", 2) == execution_id(nfc, 3, "final-response", "codex-luna", 2)


def test_the_api_preview_refuses_a_decomposed_seed_with_a_400(reader_client) -> None:
    load_reference_catalog()

    response = reader_client.get("/api/schedules/preview/", {"seed": unicodedata.normalize("NFD", "café"), "rotation_day": 0})

    assert response.status_code == 400, response.content
    assert "plain Unicode form (NFC)" in json.dumps(response.json(), ensure_ascii=False)
