"""A reference report built from a report-input document (``manage.py report``'s input).

The input is a JSON object ``{source, bundle, generatedAt, results, traceability?, history?,
baselineReady?}`` where ``results`` are ``{scenarioId, candidateId, observation, scorecard}`` rows
and ``history`` the earlier reports, oldest first. The workflow catalog and the operation catalog
are evalhub's (the stored cases and ``CoverageCatalog``; the shipped reference data when none).

As the reference's report builder, this accepts and ignores unknown input keys, a blank bundle id
and whatever in a row's observation the reference scorer ignores (docs/scoring.md): each gives one
note; the report is the reference's, unchanged. It refuses what could not be reported
(:class:`ReportInputError`): results that are not rows, an observation that cannot be scored.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from evalhub import reference_data
from evalhub.secrets import redact
from runs.evaluation.observation_schema import ObservationError, check_observation, scoring_problems
from runs.evaluation.reports import CANONICAL_OPERATION_IDS, CAPABILITY_CASES, build_report, compare_reports, compute_alerts
from runs.models import CoverageCatalog
from schedules.services import catalog_cases, iso_timestamp

INPUT_KEYS = {"source", "bundle", "generatedAt", "results", "traceability", "history", "baselineReady"}


class ReportInputError(Exception):
    """A document that cannot be reported; the message says what is wrong, one sentence.

    Not a ``ValueError``: the report builder's own ``ValueError`` is reworded as "not a valid report
    input", and this must pass through that unchanged."""


def _unwrapped(document: Any) -> Any:
    """The ``report`` of a ``{report, alerts, comparison}`` export; anything else as it is."""
    if isinstance(document, dict) and "schema" not in document and isinstance(document.get("report"), dict):
        return document["report"]
    return document


def _is_report(document: Any) -> bool:
    return isinstance(document, dict) and isinstance(document.get("bundle"), dict) and "aggregate" in document


def report_of(document: Any, what: str) -> dict[str, Any]:
    """A report document, or the ``report`` of a ``{report, alerts, comparison}`` export.

    ``what`` names the document in the :class:`ReportInputError` raised for anything else (a file
    name, ``history[0]``)."""
    document = _unwrapped(document)
    if not _is_report(document):
        if isinstance(document, dict) and isinstance(document.get("results"), list):
            raise ReportInputError(
                f"{what} is a report input (results without an aggregate), not a report: build its report first "
                f"(`manage.py report {what} --format json > previous.json`) and compare with that"
            )
        raise ReportInputError(f"{what} is not a report (expected an object with bundle, aggregate and results)")
    return document


def report_input_of(document: Any, notes: list[str]) -> Any:
    """A report input for ``document``: the input itself, or — for a report or an export of one —
    its ``source``, ``bundle``, ``generatedAt`` and ``results`` (with a note in ``notes``)."""
    report = _unwrapped(document)
    if not _is_report(report) or "results" not in report:
        return document
    notes.append("the input is a report (or its export): re-built from its source, bundle, generatedAt and results")
    return {key: report[key] for key in ("source", "bundle", "generatedAt", "results") if key in report}


def _catalogs() -> tuple[list[dict[str, Any]], list[str], int]:
    cases = catalog_cases() or reference_data.load("workflow-cases.json")["cases"]
    row = CoverageCatalog.objects.order_by("pk").first()
    if row is None:
        return cases, list(CANONICAL_OPERATION_IDS), CAPABILITY_CASES
    return cases, list(row.operation_ids), row.capability_cases


def _check_input(document: Any, notes: list[str]) -> None:
    """Refuse a document whose top-level fields cannot be reported; note what is ignored."""
    if not isinstance(document, dict):
        raise ReportInputError("the input must be a JSON object {source, bundle, generatedAt, results, ...}")
    unknown = sorted(str(key) for key in set(document) - INPUT_KEYS)
    if unknown:
        notes.append(redact(f"unknown input key(s) ignored: {', '.join(unknown)}; the keys are {', '.join(sorted(INPUT_KEYS))}"))
    if not isinstance(document.get("results"), list):
        raise ReportInputError("results must be a list of {scenarioId, candidateId, observation, scorecard} rows")
    if not isinstance(document.get("history", []), list):
        raise ReportInputError("history must be a list of earlier reports, oldest first")
    if not isinstance(document.get("baselineReady", False), bool):
        raise ReportInputError("baselineReady must be true or false")
    bundle = document.get("bundle")
    if not isinstance(bundle, dict) or not isinstance(bundle.get("id"), str):
        raise ReportInputError('bundle must be an object with a text id, e.g. {"id": "runner-live-v2-…", ...}')
    if not bundle["id"].strip():
        notes.append("bundle.id is blank: the report carries it as given")
    if "generatedAt" in document and not isinstance(document["generatedAt"], str):
        raise ReportInputError("generatedAt must be an ISO 8601 timestamp string such as 2026-08-24T04:00:00.000Z")
    if document.get("traceability") is not None and not isinstance(document["traceability"], dict):
        raise ReportInputError("traceability must be an object (the reference traceability summary) or absent")


def _check_rows(results: list[Any], notes: list[str]) -> None:
    """Refuse a results row that is not an object or whose observation cannot be scored; note
    what the reference scorer ignores in the others."""
    for index, row in enumerate(results, start=1):
        if not isinstance(row, dict) or not isinstance(row.get("observation"), dict):
            raise ReportInputError(f"results item {index} must be an object with scenarioId, candidateId, observation, scorecard")
        try:
            row_notes = check_observation(row["observation"])
        except ObservationError:
            problems = scoring_problems(row["observation"])
            raise ReportInputError(redact(f"results item {index} has an invalid observation: {'; '.join(problems)}")) from None
        notes.extend(redact(f"results item {index}: {note}") for note in row_notes)


def build_outputs(
    document: Any, previous: dict[str, Any] | None, notes: list[str] | None = None
) -> tuple[dict[str, Any], list[dict[str, str]], dict[str, Any] | None]:
    """``(report, alerts, comparison)`` for a report input document; :class:`ReportInputError` if malformed.

    ``previous`` is the report to compare with (``comparison`` is ``None`` without one). What the
    reference accepts and ignores is appended to ``notes`` (when given) as sentences, redacted: a
    note may echo an input key.
    """
    notes = notes if notes is not None else []
    _check_input(document, notes)
    results = document["results"]
    _check_rows(results, notes)
    generated_at = document.get("generatedAt") or iso_timestamp(timezone.now())
    cases, operation_ids, capability_cases = _catalogs()
    try:
        report = build_report(
            source=document.get("source", "live"),
            bundle=document["bundle"],
            generated_at=generated_at,
            results=results,
            workflow_cases=cases,
            traceability=document.get("traceability"),
            operation_ids=operation_ids,
            capability_cases=capability_cases,
        )
        earlier = [report_of(item, f"history[{index}]") for index, item in enumerate(document.get("history", []))]
        alerts = compute_alerts(report, history=earlier, baseline_ready=document.get("baselineReady", False))
        comparison = compare_reports(report, previous) if previous is not None else None
    except KeyError as exc:
        raise ReportInputError(f"the input lacks a field the report reads: {exc}") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise ReportInputError(f"the input is not a valid report input: {exc}") from None
    return report, alerts, comparison
