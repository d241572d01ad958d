"""A candidate's required environment never names a variable a runtime under test must not be
handed: evalhub's own settings (its secret key, its database password), dynamic-loader and
interpreter variables, and the process basics the harness sets itself.

Refused by every writer (the model's ``clean()``: admin, API, manifest import, shell), and — for
a row written around validation (``objects.update``, ``loaddata``) — never copied into the
runtime's environment and named when its executions are refused.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from candidates.models import Candidate
from candidates.services import ManifestError, export_manifest, import_manifest
from evalhub.credentials import reserved_name_reason
from runs.executors.live.session import runtime_environment
from tests.builders import make_budget, make_slot

RESERVED = [
    ("DJANGO_SECRET_KEY", "evalhub's own settings read DJANGO_* variables"),
    ("DJANGO_SETTINGS_MODULE", "evalhub's own settings read DJANGO_* variables"),
    ("EVALHUB_EMAIL_PASSWORD", "evalhub's own settings read EVALHUB_* variables"),
    ("EVALHUB_MODEL_PROVIDERS", "evalhub's own settings read EVALHUB_* variables"),
    ("DATABASE_URL", "evalhub's own settings read it"),
    ("REDIS_URL", "evalhub's own settings read it"),
    ("LD_PRELOAD", "LD_* variables change how the dynamic loader starts every program"),
    ("LD_LIBRARY_PATH", "LD_* variables change how the dynamic loader starts every program"),
    ("DYLD_INSERT_LIBRARIES", "DYLD_* variables change how the dynamic loader starts every program"),
    ("PYTHONPATH", "PYTHON* variables change how the Python interpreter starts"),
    ("PYTHONSTARTUP", "PYTHON* variables change how the Python interpreter starts"),
    ("NODE_OPTIONS", "it changes how the runtime's interpreter starts"),
    ("PATH", "the harness sets it itself"),
    ("HOME", "the harness sets it itself"),
    ("TMPDIR", "the harness sets it itself"),
    ("XDG_CONFIG_HOME", "the harness sets the XDG_* folders itself"),
    ("LC_ALL", "the harness sets the LC_* locale variables itself"),
    ("SSL_CERT_FILE", "the harness sets it itself"),
]
#: Names a candidate really needs; none is reserved (a prefix must not catch them).
ALLOWED = [
    "OPENAI_API_KEY",
    "OPENROUTER_API_KEY",
    "ANTHROPIC_API_KEY",
    "AWS_SECRET_ACCESS_KEY",
    "GITHUB_TOKEN",
    "HOMEBREW_TOKEN",
    "PATHWAY_KEY",
]


def refusal(index: int, name: str, reason: str) -> str:
    return f"Required environment item {index} ({name}) cannot be a candidate's: {reason}"


@pytest.mark.parametrize(("name", "reason"), RESERVED)
def test_every_reserved_name_has_a_reason(name: str, reason: str) -> None:
    assert reason in (reserved_name_reason(name) or "")


@pytest.mark.parametrize("name", ALLOWED)
def test_a_candidate_s_own_keys_are_not_reserved(name: str) -> None:
    assert reserved_name_reason(name) is None


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "reason"), RESERVED)
def test_the_model_refuses_a_reserved_name_and_says_why(name: str, reason: str) -> None:
    candidate = Candidate(
        key="codex-new", slot=make_slot(), position=0, adapter="codex_app_server", provider="codex", model="gpt-5.6-luna",
        tier="strong", required_environment=["OPENAI_API_KEY", name], budget=make_budget(),
    )  # fmt: skip
    with pytest.raises(ValidationError) as caught:
        candidate.full_clean()
    (message,) = caught.value.message_dict["required_environment"]
    assert message.startswith(refusal(2, name, reason)), message
    assert message.endswith("remove it and list only the candidate's own keys (for example OPENAI_API_KEY).")


@pytest.mark.django_db
def test_the_admin_form_refuses_a_reserved_name(staff_client) -> None:
    from tests.test_admin_candidates import assert_form_error, candidate_post

    response = staff_client.post(reverse("admin:candidates_candidate_add"), candidate_post(required_environment="DJANGO_SECRET_KEY"))
    assert_form_error(response, "(DJANGO_SECRET_KEY) cannot be a candidate&#x27;s: evalhub&#x27;s own settings read DJANGO_*")
    assert not Candidate.objects.filter(key="codex-new").exists()


@pytest.mark.django_db
def test_the_api_refuses_a_reserved_name(reference_catalog, staff_client) -> None:
    from tests.test_api_validation import candidate_body, send

    body = candidate_body(qualification={"requiredEnvironment": ["OPENAI_API_KEY", "EVALHUB_EMAIL_PASSWORD"]})
    response = send(staff_client, "post", "/api/candidates/", body)
    assert response.status_code == 400, response.content
    (message,) = response.json()["qualification"]["requiredEnvironment"]
    assert message.startswith(refusal(2, "EVALHUB_EMAIL_PASSWORD", "evalhub's own settings read EVALHUB_* variables"))
    assert not Candidate.objects.filter(key="codex-nova").exists()


@pytest.mark.django_db
def test_a_manifest_import_refuses_a_reserved_name_and_changes_nothing(reference_catalog) -> None:
    document = export_manifest()
    before = json.dumps(document)
    document["slots"][0]["candidates"][0]["qualification"]["requiredEnvironment"] = ["LD_PRELOAD"]
    with pytest.raises(ManifestError) as caught:
        import_manifest(document)
    (problem,) = caught.value.problems
    assert "(LD_PRELOAD) cannot be a candidate's: LD_* variables change how the dynamic loader" in problem
    assert json.dumps(export_manifest()) == before


def test_the_runtime_is_never_handed_a_reserved_variable_even_when_required(tmp_path: Path) -> None:
    """The second line: a row written around validation still hands nothing reserved over, and
    the host's PATH is not replaced by a candidate's."""
    host = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    required = {
        "OPENAI_API_KEY": "x-candidate-value",
        "DJANGO_SECRET_KEY": "x-evalhub-secret-key",
        "DATABASE_URL": "postgres://evalhub:x-db-password@db/evalhub",
        "LD_PRELOAD": "/tmp/evil.so",
        "PATH": "/tmp/evil-bin",
        "HOME": "/root",
        "XDG_CONFIG_HOME": "/tmp/evil-config",
    }
    environment = runtime_environment(host, required, ("PATH", "LANG"), home=tmp_path)
    assert environment == {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "OPENAI_API_KEY": "x-candidate-value",
        "HOME": str(tmp_path),
        "TMPDIR": str(tmp_path),
    }


@pytest.mark.django_db
def test_a_row_written_around_validation_is_refused_by_name(reference_catalog) -> None:
    from schedules.services import preview_schedule, unsafe_candidate_problem

    Candidate.objects.filter(key="codex-luna").update(required_environment=["OPENAI_API_KEY", "DJANGO_SECRET_KEY", "PATH"])
    document = preview_schedule(seed="runner-live-seven-week-v1", now=dt.datetime(2026, 8, 24, tzinfo=dt.UTC))
    (luna,) = [candidate for candidate in document["candidates"] if candidate["id"] == "codex-luna"]
    assert unsafe_candidate_problem(luna) == (
        "the candidate's required environment names DJANGO_SECRET_KEY, PATH, which evalhub never hands to a runtime "
        "under test (its own settings, loader and interpreter variables, or what the harness sets itself); "
        "remove them from the catalog, then run it again"
    )
