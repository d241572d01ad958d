"""The API's contract, fuzzed: schemathesis generates requests for every operation of ``/api/schema/``
(bounded examples, derandomized) and sends them through the Django WSGI app in this process, as
staff and as a reader, over a catalog with a finished run, its report, alerts and a trace. No
response may be a 5xx or contradict the schema (status, content type, headers, body); what the
schema calls invalid must be refused and what it calls valid accepted."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, settings
from knox.models import AuthToken
from schemathesis.specs.openapi.checks import positive_data_acceptance

from runs.creation import create_run
from runs.dispatch import execute_run
from runs.executors.replay import REPLAY_STORE
from schedules.services import Selection, schedule_for_night
from tests.builders import completed_observation

pytestmark = [pytest.mark.django_db, pytest.mark.fuzz]

#: schemathesis's pytest plugin (it makes one test per operation of ``schema.parametrize()``), which
#: ``pyproject.toml`` keeps out of pytest (``-p no:schemathesis``, and Hypothesis's ``-p
#: no:hypothesispytest``) for every other module: importing them costs seconds, and only this
#: module uses them. Hypothesis's plugin adds statistics and options, nothing these tests read.
pytest_plugins = ["schemathesis.pytest.plugin"]

#: Examples per operation and user (derandomized, so every run sends the same requests): enough
#: for each parameter's edge cases, about two CPU-minutes for the whole module.
EXAMPLES = 5

SEED = "runner-live-seven-week-v1"
NOW = dt.datetime(2026, 8, 19, 4, 0, tzinfo=dt.UTC)

schema = schemathesis.openapi.from_dict(SchemaGenerator().get_schema(request=None, public=True))
schema.app = WSGIHandler()

#: The signed-in user's API token, set by the ``signed_in`` fixture for the test being run.
TOKEN: dict[str, str] = {}


@schema.auth(refresh_interval=None)
class SignedInToken:
    """The token of the user the test signs in as (``Authorization: Token <key>``, the schema's
    ``knoxApiToken``): given as the schema's auth, the fuzzer also checks that the API refuses a
    request without it or with a wrong one."""

    def get(self, case, context) -> str:
        return TOKEN.get("key", "")

    def set(self, case, data: str, context) -> None:
        case.headers = {**(case.headers or {}), "Authorization": f"Token {data}"}


@pytest.fixture
def history(reference_catalog, replay_executors) -> None:
    """Two measured runs of one night (so reports, a comparison and alerts exist)."""
    scheduled, _ = schedule_for_night(seed=SEED, now=NOW, generated_at="2026-08-19T04:00:00.000Z")
    for _ in range(2):
        run, _ = create_run(schedule=scheduled, cost_ceiling_usd=Decimal("12"), selection=Selection(candidate_ids=("codex-luna",)))
        for execution in run.executions.select_related("entry"):
            REPLAY_STORE[execution.execution_id] = completed_observation(execution.entry.to_document())
        execute_run(run, environ={"OPENAI_API_KEY": "x-openai-value-123"})


@pytest.fixture
def in_process_requests():
    """Requests through the WSGI handler share the test's transaction: Django's test client
    disconnects the same signal, which would otherwise close the connection mid-test."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture(params=["staff", "reader"])
def signed_in(request, history, in_process_requests, django_user_model):
    user = django_user_model.objects.create_user(request.param, password="pw-fuzz-123", is_staff=request.param == "staff")
    TOKEN["key"] = AuthToken.objects.create(user=user)[1]
    yield
    TOKEN.clear()


#: The operations whose valid input JSON Schema cannot fully describe, so a request the schema
#: allows may rightly be a 400 naming the problem: a new candidate names its slot and budget by
#: the id of a stored row (``slotId``, ``budgetName``), a preview's ``candidate``/``case``
#: selection names entries of the week's line-up, and an observation to score obeys cross-field
#: rules of runs/evaluation/observation_schema.py. Every other check runs on them.
STORED_ROW_OR_CROSS_FIELD_BODIES = {
    ("POST", "/api/candidates/"),
    ("GET", "/api/schedules/preview/"),
    ("POST", "/api/score/"),
    # A seed is identity text (evalhub/validation.py: NFC, no control or invisible characters),
    # which the schema's plain string cannot state.
    ("GET", "/api/coverage/"),
    # The long lists take page numbers or a cursor, not both (a 400 saying so): OpenAPI 3.0 has
    # no way to state that two query parameters exclude each other.
    ("GET", "/api/executions/"),
    ("GET", "/api/scorecards/"),
}


@schema.parametrize()
@settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck))
def test_the_api_keeps_its_schema(case, signed_in) -> None:
    excluded = [positive_data_acceptance] if (case.method, case.path) in STORED_ROW_OR_CROSS_FIELD_BODIES else []
    case.call_and_validate(excluded_checks=excluded)
