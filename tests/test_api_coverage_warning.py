"""A catalog write through the API that breaks the week's coverage succeeds with the admin's
warning in its ``Evalhub-Coverage-Warning`` header (schedules/api.py ``CoverageWarningMixin``):
the failed invariant, its arithmetic, and that every nightly is refused until it is fixed. One
coverage computation per successful write; none for a refused write or a read."""

from __future__ import annotations

import pytest

from candidates.models import Candidate, Slot
from schedules.api import COVERAGE_WARNING_HEADER
from schedules.models import WorkflowCase
from tests.test_admin_coverage_warning import REFUSED, count_coverage_checks, fill_slot
from tests.test_api_catalog import new_candidate, send

pytestmark = pytest.mark.django_db


@pytest.fixture
def counted_checks(monkeypatch) -> list[str]:
    """Every coverage check the API makes (the seed of each)."""
    from schedules import api as schedules_api

    return count_coverage_checks(monkeypatch, schedules_api)


def test_an_eighth_candidate_in_a_slot_is_created_with_the_warning_in_a_header(reference_catalog, staff_client, counted_checks):
    fill_slot(Slot.objects.get(key="codex-strong"), 7)

    response = send(staff_client, "post", "/api/candidates/", new_candidate())

    assert response.status_code == 201, response.json()
    assert Candidate.objects.filter(key="codex-nova").exists()
    assert response[COVERAGE_WARNING_HEADER] == (
        "live schedule coverage failed: everyConcreteCandidateInRotation is false: slot codex-strong has 8 candidates, "
        "but a slot plays one candidate a rotation day and the rotation has 7 days, so codex-nova is never played; keep at most "
        "7 candidates in a slot (move the others to another slot or remove them). " + REFUSED + "; the coverage page shows the gap."
    )
    # The body is still the candidate document, which a client may send back as it is.
    assert response.json()["id"] == "codex-nova"
    assert counted_checks == ["runner-live-seven-week-v1"]


def test_a_write_that_keeps_the_coverage_has_no_warning(reference_catalog, staff_client, counted_checks):
    response = send(staff_client, "patch", "/api/candidates/codex-luna/", {"model": "gpt-5.6-luna-2"})

    assert response.status_code == 200
    assert COVERAGE_WARNING_HEADER not in response
    assert counted_checks == ["runner-live-seven-week-v1"]


def test_a_refused_write_and_reads_check_nothing(reference_catalog, staff_client, counted_checks):
    fill_slot(Slot.objects.get(key="codex-strong"), 8)

    refused = send(staff_client, "post", "/api/candidates/", new_candidate(model=""))
    listed = staff_client.get("/api/candidates/")
    read = staff_client.get("/api/candidates/codex-luna/")

    assert refused.status_code == 400
    assert listed.status_code == read.status_code == 200
    assert all(COVERAGE_WARNING_HEADER not in response for response in (refused, listed, read))
    assert counted_checks == []


def test_a_patch_that_leaves_a_night_without_an_inexpensive_candidate_warns_until_it_is_undone(reference_catalog, staff_client):
    key = Candidate.objects.filter(tier="inexpensive").order_by("pk").values_list("key", flat=True)[0]

    broken = send(staff_client, "patch", f"/api/candidates/{key}/", {"tier": "strong"})
    undone = send(staff_client, "patch", f"/api/candidates/{key}/", {"tier": "inexpensive"})

    assert broken.status_code == undone.status_code == 200
    assert broken[COVERAGE_WARNING_HEADER] == (
        "live schedule coverage failed: strongAndInexpensiveNightly is false. " + REFUSED + "; the coverage page shows the gap."
    )
    assert COVERAGE_WARNING_HEADER not in undone


def test_deleting_a_candidate_warns_while_its_slot_is_still_too_full(reference_catalog, staff_client):
    fill_slot(Slot.objects.get(key="codex-strong"), 9)

    still_full = staff_client.delete("/api/candidates/codex-extra-8/")
    fixed = staff_client.delete("/api/candidates/codex-extra-7/")

    assert still_full.status_code == fixed.status_code == 204
    assert "slot codex-strong has 8 candidates" in still_full[COVERAGE_WARNING_HEADER]
    assert "so codex-extra-7 is never played" in still_full[COVERAGE_WARNING_HEADER]
    assert COVERAGE_WARNING_HEADER not in fixed


def test_a_slot_that_holds_candidates_is_not_deleted_and_an_emptied_one_warns_when_coverage_needed_it(reference_catalog, staff_client):
    held = list(Candidate.objects.filter(slot__key="opencode-inexpensive").order_by("key").values_list("key", flat=True))
    refused = staff_client.delete("/api/slots/opencode-inexpensive/")

    assert refused.status_code == 409
    assert refused.json()["detail"] == (
        "Cannot delete: still used by " + ", ".join(f"candidate {key}" for key in held) + ". Move or delete those first."
    )
    assert Candidate.objects.filter(slot__key="opencode-inexpensive").count() == len(held)
    for key in held:
        assert staff_client.delete(f"/api/candidates/{key}/").status_code == 204
    broken = staff_client.delete("/api/slots/opencode-inexpensive/")
    assert broken.status_code == 204
    assert not Slot.objects.filter(key="opencode-inexpensive").exists()
    assert broken[COVERAGE_WARNING_HEADER].startswith("live schedule coverage failed: ")
    assert "strongAndInexpensiveNightly is false" in broken[COVERAGE_WARNING_HEADER]
    assert broken[COVERAGE_WARNING_HEADER].endswith(REFUSED + "; the coverage page shows the gap.")


def test_deleting_workflow_cases_warns_once_a_workflow_is_no_longer_covered(reference_catalog, staff_client):
    keys = list(WorkflowCase.objects.order_by("position").values_list("key", flat=True))
    responses = [staff_client.delete(f"/api/cases/{key}/") for key in keys[1:]]

    assert {response.status_code for response in responses} == {204}
    assert WorkflowCase.objects.count() == 1
    warned = [response[COVERAGE_WARNING_HEADER] for response in responses if COVERAGE_WARNING_HEADER in response]
    assert warned, "deleting all but one workflow case must break the week's coverage"
    assert all(text.startswith("live schedule coverage failed: ") and REFUSED in text for text in warned)


def test_the_schema_documents_the_header_on_the_catalog_writes_only(staff_client):
    schema = staff_client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()

    def headers(path: str, method: str) -> set[str]:
        return {name for response in schema["paths"][path][method]["responses"].values() for name in response.get("headers", {})}

    for path in ("/api/candidates/", "/api/slots/", "/api/cases/"):
        assert COVERAGE_WARNING_HEADER in headers(path, "post")
        assert COVERAGE_WARNING_HEADER not in headers(path, "get")
    for path in ("/api/candidates/{id}/", "/api/slots/{id}/", "/api/cases/{id}/"):
        for method in ("put", "patch", "delete"):
            assert COVERAGE_WARNING_HEADER in headers(path, method)
    assert COVERAGE_WARNING_HEADER not in headers("/api/budgets/", "post")
