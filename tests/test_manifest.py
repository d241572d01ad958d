"""Loading the reference data, and importing and exporting the candidate manifest.

An import makes the catalog equal to the document, all or nothing: a document that fails
validation changes nothing and every problem names its slot, candidate and field. Secrets are
synthetic and assembled by concatenation.
"""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from candidates.models import Budget, Candidate, Slot
from candidates.services import ManifestError, export_manifest, import_manifest
from schedules.models import ChaosScenario, WorkflowCase
from tests.reference import reference_manifest_path

pytestmark = pytest.mark.django_db

B8_OPENAI = "sk-" + "proj-" + "FAKE0123456789abcdefghij"
KEY_SHAPED = "sk-" + "abcdefghijklmnop1234"
AWS = "AKIA" + "IOSFODNN7EXAMPLE"
REFERENCE_MANIFEST = reference_manifest_path()


def reference_document() -> dict[str, Any]:
    return json.loads(REFERENCE_MANIFEST.read_text(encoding="utf-8"))


def run(*args: Any) -> str:
    """Call a management command and return what it printed."""
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def catalog_counts() -> dict[str, int]:
    return {
        "budgets": Budget.objects.count(),
        "slots": Slot.objects.count(),
        "candidates": Candidate.objects.count(),
        "cases": WorkflowCase.objects.count(),
        "scenarios": ChaosScenario.objects.count(),
    }


def candidate(document: dict[str, Any], candidate_id: str) -> dict[str, Any]:
    for slot in document["slots"]:
        for item in slot["candidates"]:
            if item["id"] == candidate_id:
                return item
    raise KeyError(candidate_id)


def slot(document: dict[str, Any], slot_id: str) -> dict[str, Any]:
    return next(item for item in document["slots"] if item["id"] == slot_id)


def problems_of(document: Any) -> list[str]:
    with pytest.raises(ManifestError) as caught:
        import_manifest(document)
    return caught.value.problems


# --- load_reference ---------------------------------------------------------------------------------


def test_load_reference_fills_the_catalog() -> None:
    output = run("load_reference")
    assert output == ("reference data loaded: 5 slots, 7 candidates, 3 new budgets, 12 new workflow cases, 8 new chaos scenarios\n")
    assert catalog_counts() == {"budgets": 3, "slots": 5, "candidates": 7, "cases": 12, "scenarios": 8}


def test_load_reference_twice_changes_nothing() -> None:
    run("load_reference")
    rows_before = {
        "slots": list(Slot.objects.values_list("pk", "key", "position")),
        "candidates": list(Candidate.objects.values_list("pk", "key", "slot__key", "position", "budget__name")),
        "budgets": list(Budget.objects.values_list("pk", "name")),
        "cases": list(WorkflowCase.objects.values_list("pk", "key", "position", "version")),
        "scenarios": list(ChaosScenario.objects.values_list("pk", "key", "position")),
    }
    output = run("load_reference")
    assert output == ("reference data loaded: 5 slots, 7 candidates, 0 new budgets, 0 new workflow cases, 0 new chaos scenarios\n")
    assert catalog_counts() == {"budgets": 3, "slots": 5, "candidates": 7, "cases": 12, "scenarios": 8}
    assert rows_before == {
        "slots": list(Slot.objects.values_list("pk", "key", "position")),
        "candidates": list(Candidate.objects.values_list("pk", "key", "slot__key", "position", "budget__name")),
        "budgets": list(Budget.objects.values_list("pk", "name")),
        "cases": list(WorkflowCase.objects.values_list("pk", "key", "position", "version")),
        "scenarios": list(ChaosScenario.objects.values_list("pk", "key", "position")),
    }


def test_reference_candidates_use_the_named_reference_budgets() -> None:
    run("load_reference")
    assert dict(Candidate.objects.values_list("key", "budget__name")) == {
        "codex-luna": "strong-premium",
        "opencode-kimi": "strong-standard",
        "opencode-glm": "strong-standard",
        "opencode-gpt-oss": "inexpensive",
        "opencode-glm-flash": "inexpensive",
        "acpx-claude-sonnet": "strong-premium",
        "acpx-codex-sol": "strong-premium",
    }


# --- export -------------------------------------------------------------------------------------------


def test_export_after_load_equals_the_reference_manifest_exactly() -> None:
    run("load_reference")
    reference = reference_document()
    exported = export_manifest()
    assert exported == reference
    # Same keys in the same order at every level, and the same number spellings.
    assert json.dumps(exported) == json.dumps(reference)


def test_the_export_command_prints_the_reference_manifest() -> None:
    run("load_reference")
    printed = run("export_manifest")
    assert json.dumps(json.loads(printed)) == json.dumps(reference_document())
    assert printed == json.dumps(reference_document(), indent=2, ensure_ascii=False) + "\n"


def test_export_of_an_empty_catalog_has_no_slots() -> None:
    assert export_manifest()["slots"] == []


# --- round trips ------------------------------------------------------------------------------------------


def edited_manifest() -> dict[str, Any]:
    """The reference manifest with every kind of edit an admin makes in one file."""
    document = reference_document()
    slots = {item["id"]: item for item in document["slots"]}
    # Swap the two alternates of a slot (changes which one plays on even weeks).
    strong = slots["opencode-strong"]
    strong["candidates"].reverse()
    # Move acpx-codex-sol into acpx-claude and drop the now empty acpx-codex slot.
    sol = slots["acpx-codex"]["candidates"][0]
    sol["slotId"] = "acpx-claude"
    slots["acpx-claude"]["candidates"].append(sol)
    # A budget combination no budget has yet.
    slots["codex-strong"]["candidates"][0]["budget"] = {
        "maxLatencyMs": 120000,
        "maxAttempts": 2,
        "maxCostUsd": 2.25,
        "maxTotalTokens": 50000,
    }
    # Reorder the slots.
    document["slots"] = [slots["acpx-claude"], slots["opencode-inexpensive"], slots["codex-strong"], strong]
    return document


def test_import_then_export_round_trips_an_edited_manifest() -> None:
    run("load_reference")
    ids_before = dict(Candidate.objects.values_list("key", "pk"))
    edited = edited_manifest()
    summary = import_manifest(copy.deepcopy(edited))
    exported = export_manifest()
    assert exported == edited
    assert json.dumps(exported) == json.dumps(edited)
    assert (summary.slots, summary.candidates, summary.removed_slots, summary.removed_candidates) == (4, 7, 1, 0)
    assert summary.created_budgets == 1
    # Candidates are updated in place, not recreated, so their history links survive.
    assert dict(Candidate.objects.values_list("key", "pk")) == ids_before
    assert list(Slot.objects.values_list("key", "position")) == [
        ("acpx-claude", 0),
        ("opencode-inexpensive", 1),
        ("codex-strong", 2),
        ("opencode-strong", 3),
    ]
    assert list(Candidate.objects.filter(slot__key="acpx-claude").values_list("key", "position")) == [
        ("acpx-claude-sonnet", 0),
        ("acpx-codex-sol", 1),
    ]
    assert list(Candidate.objects.filter(slot__key="opencode-strong").values_list("key", flat=True)) == [
        "opencode-glm",
        "opencode-kimi",
    ]
    new_budget = Candidate.objects.get(key="codex-luna").budget
    assert new_budget.name == "budget-120000ms-2x-2.25usd-50000tok"


def test_importing_the_same_edit_twice_creates_nothing_more() -> None:
    run("load_reference")
    import_manifest(edited_manifest())
    counts = catalog_counts()
    summary = import_manifest(edited_manifest())
    assert summary.created_budgets == 0
    assert (summary.removed_slots, summary.removed_candidates) == (0, 0)
    assert catalog_counts() == counts
    assert export_manifest() == edited_manifest()


def test_importing_back_the_reference_restores_it() -> None:
    run("load_reference")
    import_manifest(edited_manifest())
    import_manifest(reference_document())
    assert json.dumps(export_manifest()) == json.dumps(reference_document())


def test_a_candidate_left_out_is_removed() -> None:
    run("load_reference")
    document = reference_document()
    slot(document, "opencode-strong")["candidates"].pop()
    summary = import_manifest(document)
    assert summary.removed_candidates == 1
    assert not Candidate.objects.filter(key="opencode-glm").exists()
    assert export_manifest() == document


def test_a_generated_budget_name_taken_by_another_budget_gets_a_suffix() -> None:
    run("load_reference")
    Budget.objects.create(name="budget-120000ms-2x-2.25usd-50000tok", max_latency_ms=1, max_attempts=1, max_cost_usd=1, max_total_tokens=1)
    import_manifest(edited_manifest())
    assert Candidate.objects.get(key="codex-luna").budget.name == "budget-120000ms-2x-2.25usd-50000tok-2"
    assert export_manifest() == edited_manifest()


# --- a failed import changes nothing -------------------------------------------------------------------------


def test_a_failed_import_changes_nothing_and_names_slot_candidate_and_field() -> None:
    run("load_reference")
    before = json.dumps(export_manifest())
    budgets = list(Budget.objects.values_list("pk", "name"))
    document = edited_manifest()  # many valid changes ...
    candidate(document, "codex-luna")["model"] = "   "  # ... and one bad field
    assert problems_of(document) == ["slot codex-strong, candidate codex-luna, field model: Model must not be blank."]
    assert json.dumps(export_manifest()) == before
    assert list(Budget.objects.values_list("pk", "name")) == budgets


def test_every_problem_is_listed_at_once() -> None:
    run("load_reference")
    document = reference_document()
    candidate(document, "codex-luna")["provider"] = "acpx"
    candidate(document, "opencode-glm")["tier"] = "medium"
    candidate(document, "acpx-codex-sol")["qualification"]["requiredEnvironment"] = "OPENAI_API_KEY"
    candidate(document, "opencode-gpt-oss")["budget"]["maxCostUsd"] = 0
    assert problems_of(document) == [
        "slot codex-strong, candidate codex-luna, field provider: Adapter and provider do not belong together: "
        "codex_app_server runs codex, opencode_server runs opencode, acpx_runtime runs acpx.",
        "slot opencode-strong, candidate opencode-glm, field tier: Value 'medium' is not a valid choice.",
        "slot opencode-inexpensive, candidate opencode-gpt-oss, field budget.maxCostUsd: must be a positive number of US dollars",
        "slot acpx-codex, candidate acpx-codex-sol, field qualification.requiredEnvironment: Required environment "
        'must be a list of environment variable names such as ["OPENAI_API_KEY"].',
    ]


def test_duplicate_slot_ids_in_a_file_are_refused() -> None:
    document = reference_document()
    twin = copy.deepcopy(document["slots"][0])
    twin["candidates"][0]["id"] = "codex-luna-2"
    document["slots"].append(twin)
    assert problems_of(document) == ["slot codex-strong: the id is used by slot 1 too; slot ids must be unique"]
    assert Slot.objects.count() == 0


def test_duplicate_candidate_ids_across_slots_are_refused() -> None:
    document = reference_document()
    candidate(document, "acpx-codex-sol")["id"] = "codex-luna"
    assert problems_of(document) == [
        "slot acpx-codex, candidate codex-luna, field id: already used in slot codex-strong; candidate ids must be unique across all slots"
    ]


def test_duplicate_candidate_ids_inside_a_slot_are_refused() -> None:
    document = reference_document()
    candidate(document, "opencode-glm")["id"] = "opencode-kimi"
    assert problems_of(document) == [
        "slot opencode-strong, candidate opencode-kimi, field id: already used in slot opencode-strong; "
        "candidate ids must be unique across all slots"
    ]


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        pytest.param(lambda d: d.update(schema="v2"), "schema must be paperclip.runner.live-eval-candidate-slots.v1", id="schema"),
        pytest.param(lambda d: d.update(slots=[]), "slots must be a non-empty list", id="no slots"),
        pytest.param(
            lambda d: d["slots"][0].update(candidates=[]),
            "slot codex-strong, field candidates: must be a non-empty list",
            id="empty slot",
        ),
        pytest.param(
            lambda d: d["slots"][0]["candidates"][0].update(slotId="acpx-codex"),
            "slot codex-strong, candidate codex-luna, field slotId: must be codex-strong, the slot it is listed in",
            id="slotId",
        ),
        pytest.param(
            lambda d: d["slots"][0]["candidates"][0]["budget"].update(maxLatencyMs=2**40),
            "slot codex-strong, candidate codex-luna, field budget.maxLatencyMs: must be a whole number from 1 to 2147483647",
            id="latency too big",
        ),
        pytest.param(
            lambda d: d["slots"][0]["candidates"][0]["budget"].update(maxAttempts=True),
            "slot codex-strong, candidate codex-luna, field budget.maxAttempts: must be a whole number from 1 to 2147483647",
            id="attempts boolean",
        ),
        pytest.param(
            lambda d: d["slots"][0]["candidates"][0]["budget"].update(maxTotalTokens=1.5),
            "slot codex-strong, candidate codex-luna, field budget.maxTotalTokens: must be a whole number from 1 to 2147483647",
            id="tokens fraction",
        ),
        pytest.param(
            lambda d: d["slots"][0]["candidates"][0]["budget"].update(maxCostUsd="1.5"),
            "slot codex-strong, candidate codex-luna, field budget.maxCostUsd: must be a positive number of US dollars",
            id="cost as text",
        ),
        pytest.param(
            lambda d: d["slots"][0]["candidates"][0]["budget"].update(maxCostUsd=float("nan")),
            "slot codex-strong, candidate codex-luna, field budget.maxCostUsd: must be a positive number of US dollars",
            id="cost NaN",
        ),
        pytest.param(
            lambda d: d["slots"][0]["candidates"][0]["budget"].update(maxCostUsd=float("inf")),
            "slot codex-strong, candidate codex-luna, field budget.maxCostUsd: must be a positive number of US dollars",
            id="cost infinite",
        ),
        pytest.param(
            lambda d: d["slots"][0]["candidates"][0]["budget"].update(maxCostUsd=1234567),
            "slot codex-strong, candidate codex-luna, field budget.maxCostUsd: "
            "Ensure that there are no more than 6 digits before the decimal point.",
            id="cost too big for the column",
        ),
        pytest.param(
            lambda d: d["slots"][0]["candidates"][0]["budget"].update(maxCostUsd=0.0000001),
            "slot codex-strong, candidate codex-luna, field budget.maxCostUsd: Ensure this value is greater than or equal to 0.000001.",
            id="cost below a millionth",
        ),
        pytest.param(
            lambda d: d["slots"][0]["candidates"][0].pop("budget"),
            "slot codex-strong, candidate codex-luna, field budget: must be an object with maxLatencyMs, maxAttempts, "
            "maxCostUsd, maxTotalTokens",
            id="no budget",
        ),
        pytest.param(
            lambda d: d["slots"][0]["candidates"][0].update(model=7),
            "slot codex-strong, candidate codex-luna, field model: must be text",
            id="model not text",
        ),
        pytest.param(
            lambda d: d["slots"][0]["candidates"][0].update(id=None),
            "slot codex-strong, candidate 1, field id: This field cannot be blank.",
            id="no candidate id",
        ),
    ],
)
def test_bad_documents_are_refused_with_a_located_problem(edit: Any, problem: str) -> None:
    document = reference_document()
    edit(document)
    assert problem in problems_of(document)
    assert Slot.objects.count() == 0 and Budget.objects.count() == 0


def test_a_document_that_is_not_an_object_is_refused() -> None:
    assert problems_of([1, 2]) == ["the manifest must be a JSON object with schema and slots"]


# --- secrets anywhere in the document ---------------------------------------------------------------------

SECRET_EDITS = [
    pytest.param(lambda d: d.update(note="token " + B8_OPENAI), "note looks like it contains a secret", id="note"),
    pytest.param(lambda d: d["slots"][0].update(id=KEY_SHAPED), "slot [REDACTED], field id: Id looks like", id="slot id"),
    pytest.param(
        lambda d: d["slots"][0]["candidates"][0].update(id=KEY_SHAPED),
        "slot codex-strong, candidate [REDACTED], field id: Id looks like",
        id="candidate id",
    ),
    pytest.param(
        lambda d: d["slots"][0]["candidates"][0].update(model=B8_OPENAI),
        "slot codex-strong, candidate codex-luna, field model: Model looks like",
        id="model",
    ),
    pytest.param(
        lambda d: d["slots"][0]["candidates"][0].update(reasoningEffort=AWS),
        "slot codex-strong, candidate codex-luna, field reasoningEffort: Reasoning effort looks like",
        id="reasoningEffort",
    ),
    pytest.param(
        lambda d: d["slots"][0]["candidates"][0].update(tier=B8_OPENAI),
        "slot codex-strong, candidate codex-luna, field tier: Tier looks like",
        id="tier",
    ),
    pytest.param(
        lambda d: d["slots"][0]["candidates"][0].update(adapter=B8_OPENAI),
        "slot codex-strong, candidate codex-luna, field adapter: Adapter looks like",
        id="adapter",
    ),
    pytest.param(
        lambda d: d["slots"][0]["candidates"][0]["qualification"].update(requiredEnvironment=[B8_OPENAI]),
        "slot codex-strong, candidate codex-luna, field qualification.requiredEnvironment: Required environment looks like",
        id="requiredEnvironment",
    ),
    pytest.param(
        lambda d: d["slots"][0]["candidates"][0]["qualification"].update(profile=B8_OPENAI),
        "slot codex-strong, candidate codex-luna, field qualification.profile: Profile looks like",
        id="profile",
    ),
    pytest.param(lambda d: d.update({B8_OPENAI: 1}), "unknown top-level field [REDACTED]", id="top-level key"),
    pytest.param(lambda d: d["slots"][0].update({B8_OPENAI: 1}), "slot codex-strong: unknown field [REDACTED]", id="slot key"),
    pytest.param(
        lambda d: d["slots"][0]["candidates"][0].update({B8_OPENAI: 1}),
        "slot codex-strong, candidate codex-luna: unknown field [REDACTED]",
        id="candidate key",
    ),
    pytest.param(
        lambda d: d["slots"][0]["candidates"][0]["qualification"].update({B8_OPENAI: "x"}),
        "slot codex-strong, candidate codex-luna, field qualification: unknown field [REDACTED]",
        id="qualification key",
    ),
    pytest.param(
        lambda d: d["slots"][0]["candidates"][0]["budget"].update({AWS: 1}),
        "slot codex-strong, candidate codex-luna, field budget: unknown field [REDACTED]",
        id="budget key",
    ),
]


@pytest.mark.parametrize(("edit", "problem"), SECRET_EDITS)
def test_a_secret_anywhere_is_refused_and_never_echoed(edit: Any, problem: str) -> None:
    document = reference_document()
    edit(document)
    with pytest.raises(ManifestError) as caught:
        import_manifest(document)
    text = str(caught.value) + repr(caught.value.problems)
    assert problem in text
    for secret in (B8_OPENAI, KEY_SHAPED, AWS):
        assert secret not in text
    assert Candidate.objects.count() == 0


# --- the import_manifest command ---------------------------------------------------------------------------


def write(tmp_path: Path, text: str, name: str = "manifest.json") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_command_imports_a_file_and_says_what_it_did(tmp_path: Path) -> None:
    run("load_reference")
    path = write(tmp_path, json.dumps(edited_manifest()))
    assert run("import_manifest", str(path)) == (
        f"imported {path}: 4 slots, 7 candidates (0 candidates and 1 slot removed, 1 budget created)\n"
    )
    assert export_manifest() == edited_manifest()


def test_the_command_reads_standard_input_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(REFERENCE_MANIFEST.read_text(encoding="utf-8")))
    assert run("import_manifest", "-") == ("imported -: 5 slots, 7 candidates (0 candidates and 0 slots removed, 3 budgets created)\n")
    assert json.dumps(export_manifest()) == json.dumps(reference_document())


def test_the_command_reports_a_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.json"
    with pytest.raises(CommandError, match=rf"^cannot read {missing}: No such file or directory$"):
        run("import_manifest", str(missing))


def test_the_command_reports_a_directory(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match=r"^cannot read .*: Is a directory$"):
        run("import_manifest", str(tmp_path))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", r"is not valid JSON: Expecting property name enclosed in double quotes: line 1 column 2"),
        ("", r"is not valid JSON: Expecting value: line 1 column 1"),
        ('{"slots": NaN}', r"is not valid JSON: NaN is not allowed in JSON: use a finite number"),
        ('{"slots": -Infinity}', r"is not valid JSON: -Infinity is not allowed in JSON: use a finite number"),
        ('{"slots": 1e309}', r"is not valid JSON: 1e309 is too large: use a finite number"),
    ],
)
def test_the_command_refuses_invalid_or_non_finite_json(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(CommandError, match=message):
        run("import_manifest", str(path))
    assert Slot.objects.count() == 0


@pytest.mark.parametrize("number", ["NaN", "Infinity", "1e309", "-1e309"])
def test_a_non_finite_budget_in_a_file_is_refused(tmp_path: Path, number: str) -> None:
    text = REFERENCE_MANIFEST.read_text(encoding="utf-8").replace('"maxCostUsd": 1.5', f'"maxCostUsd": {number}', 1)
    assert number in text
    path = write(tmp_path, text)
    with pytest.raises(CommandError, match=rf"^{path} is not valid JSON: "):
        run("import_manifest", str(path))
    assert Budget.objects.count() == 0


def test_the_command_refuses_non_utf8_bytes(tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"note": "caf\xe9"}')
    with pytest.raises(CommandError, match=r"is not valid JSON: 'utf-8' codec can't decode"):
        run("import_manifest", str(path))


def test_the_command_lists_every_problem_and_says_nothing_changed(tmp_path: Path) -> None:
    run("load_reference")
    before = json.dumps(export_manifest())
    document = reference_document()
    candidate(document, "codex-luna")["model"] = ""
    candidate(document, "acpx-claude-sonnet")["qualification"]["requiredEnvironment"] = [B8_OPENAI]
    path = write(tmp_path, json.dumps(document))
    with pytest.raises(CommandError) as caught:
        run("import_manifest", str(path))
    message = str(caught.value)
    assert message.startswith(f"{path} was not imported; nothing changed. Fix these problems:\n  - slot codex-strong, ")
    assert "  - slot codex-strong, candidate codex-luna, field model: " in message
    assert (
        "  - slot acpx-claude, candidate acpx-claude-sonnet, field qualification.requiredEnvironment: "
        "Required environment looks like it contains a secret (OpenAI API key)."
    ) in message
    assert B8_OPENAI not in message
    assert json.dumps(export_manifest()) == before


def test_an_import_with_two_candidates_running_one_model_in_a_slot_names_both(reference_catalog) -> None:
    from candidates.services import ManifestError, export_manifest, import_manifest

    document = export_manifest()
    before = json.dumps(document)
    twin = dict(document["slots"][1]["candidates"][0], id="opencode-kimi-twin")
    twin["model"] = twin["model"].upper()
    document["slots"][1]["candidates"].append(twin)
    with pytest.raises(ManifestError) as caught:
        import_manifest(document)
    assert (
        "slot opencode-strong, candidate opencode-kimi-twin, field model: candidate opencode-kimi in this slot already "
        "runs this model (names compared ignoring case) with this adapter and reasoning effort"
    ) in caught.value.problems
    assert json.dumps(export_manifest()) == before


def test_an_import_of_a_file_nested_too_deeply_is_a_clear_error(tmp_path) -> None:
    from django.core.management import CommandError, call_command

    path = tmp_path / "deep.json"
    path.write_text("[" * 2000 + "]" * 2000)
    with pytest.raises(CommandError, match="nested too deeply"):
        call_command("import_manifest", str(path))
