"""The stored form of an observation an executor returned, and whether it may be stored.

An observation is stored redacted (secret shapes and the run's secret values), with non-finite
numbers as null (docs/failure-modes.md B9), and checked once against the reference schema in the
form the scorer reads it (:func:`checked_stored_form`); an observation the schema refuses becomes
an ``invalid_observation`` infrastructure failure (``runs.execution``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from evalhub.fields import EncodedDocument
from evalhub.secrets import redact_data, redactor
from runs.evaluation.observation_schema import (
    MAX_JSON_INTEGER,
    remember_valid_observation,
    validate_observation,
    validate_plain_observation,
)
from runs.evaluation.observations import finite_json
from runs.reporting import scoreable_observation


def stored_form(observation: Any, secrets: list[str]) -> Any:
    """The observation as it is stored: redacted, non-finite numbers as null (docs/failure-modes.md B9).

    ``finite_json(redact_data(observation, extra_values=secrets))``, in one walk for a document
    of plain JSON values (what executors return); anything else — a tuple, a key that is not
    text, two keys redacted to the same text (``redact_data`` tells them apart), a value of a
    subclass, an int beyond ±1e308, a document nested deeper than ``_PLAIN_DEPTH`` — takes the
    two walks."""
    return _plain_or_stored_form(observation, secrets)[0]


def _plain_or_stored_form(observation: Any, secrets: list[str]) -> tuple[Any, bool]:
    """``(stored form, plain)``: :func:`stored_form`, and whether the one walk made it, so that
    it holds plain JSON values only (``validate_plain_observation`` need not walk it again)."""
    try:
        return _plain_stored_form(observation, redactor(extra_values=secrets), 0), True
    except _NotPlain:
        return finite_json(redact_data(observation, extra_values=secrets)), False


#: How deep :func:`_plain_stored_form` goes before leaving a document to the two walks.
_PLAIN_DEPTH = 64


class _NotPlain(Exception):
    """A value :func:`_plain_stored_form` leaves to ``redact_data`` and ``finite_json``."""


def _plain_stored_form(value: Any, scrub: Callable[[str], str], depth: int) -> Any:
    kind = type(value)
    if kind is str:
        return scrub(value)
    if kind is float:
        return value if math.isfinite(value) else None
    if kind is int:
        # A larger one is no JSON number: the two walks keep it for validate_observation to say so.
        if -MAX_JSON_INTEGER <= value <= MAX_JSON_INTEGER:
            return value
        raise _NotPlain
    if kind is bool or value is None:
        return value
    if depth >= _PLAIN_DEPTH:
        raise _NotPlain
    if kind is list:
        return [_plain_stored_form(child, scrub, depth + 1) for child in value]
    if kind is not dict:
        raise _NotPlain
    stored: dict[str, Any] = {}
    for key, child in value.items():
        if type(key) is not str:
            raise _NotPlain
        clean = scrub(key)
        if clean in stored:
            raise _NotPlain
        stored[clean] = _plain_stored_form(child, scrub, depth + 1)
    return stored


def stored_observation_problems(observation: Any, *, secrets: Sequence[str] = (), case_ids: Sequence[str] | None = None) -> list[str]:
    """Every problem with an observation an executor returned, against the reference schema
    (``validate_observation``); empty when it may be stored.

    Checked in its stored form (redacted, non-finite numbers as null) as the scorer reads it
    (``scoreable_observation``: unknown metrics and an unusable cost left out), so a NaN cost
    or latency is an unknown value, not a reason to lose the execution (B5, B9), while
    anything else the schema refuses is an invalid observation. ``case_ids``: the catalog's own
    workflow cases, known besides the reference's twelve.
    """
    return checked_stored_form(observation, list(secrets), case_ids=case_ids)[1]


def checked_stored_form(
    observation: Any, secrets: list[str], *, case_ids: Sequence[str] | None = None
) -> tuple[Any, list[str], EncodedDocument | None]:
    """``(stored form, problems, its text)`` of an observation an executor returned: redacted
    once, checked once (see :func:`stored_observation_problems`; ``case_ids``: the catalog's own
    cases, as ``validate_observation`` takes them); the stored form is None when there are
    problems. Its text, when not None, is the stored form's JSON text as its column holds it."""
    if not isinstance(observation, dict):
        return None, ["observation must be a JSON object"], None
    try:
        stored, plain = _plain_or_stored_form(observation, secrets)
    except Exception:  # a value redaction cannot walk: report it as validation would
        return None, validate_observation(observation, case_ids=case_ids), None
    scoreable = scoreable_observation(stored)
    # The scorer's copy of plain JSON is plain JSON: the one walk found that out already.
    problems = (validate_plain_observation if plain else validate_observation)(scoreable, case_ids=case_ids)
    if problems:
        return None, problems, None
    # The report scores the row read back: the same document is not checked twice (by its content).
    text = remember_valid_observation(scoreable)
    # The scorer's copy only leaves keys out, keeping every other value and the order: equal, it
    # left none out and its text is the stored form's, which the column is written with.
    return stored, problems, EncodedDocument(text) if text is not None and scoreable == stored else None
