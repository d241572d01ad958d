"""``manage.py report FILE [--format json|markdown|junit|github] [--compare PREVIOUS_REPORT_FILE]``.

Builds a reference report from FILE (``-``: standard input), a JSON object
``{source, bundle, generatedAt, results, traceability?, history?, baselineReady?}`` where
``results`` are ``{scenarioId, candidateId, observation, scorecard}`` rows and ``history`` the
earlier reports, oldest first. The workflow catalog and the operation catalog are
evalhub's (the stored cases and ``CoverageCatalog``; the shipped reference data when none).

* ``json`` (default): ``{"report", "alerts", "comparison"}`` as the nightly script's
  ``live-report.json``; alerts from ``history`` and ``baselineReady`` (default false) as the
  reference computes them; the comparison against the ``--compare`` report (compatible or not),
  or null;
* ``markdown``, ``junit``: the report's renderings;
* ``github``: the CI summary with those alerts, plus the "Previous compatible bundle" section
  when ``--compare`` is given.

A compared or history file may hold a report or a ``{report, alerts, comparison}`` export. FILE
may also be a report or such an export (a run page's JSON download): its ``source``, ``bundle``,
``generatedAt`` and ``results`` are the input, and one note says so. ``markdown`` and ``junit``
carry no comparison (as the reference's renderings): with ``--compare`` a note says to use
``github`` or ``json``.

As the reference's report builder, the command accepts and ignores unknown input keys, a blank
bundle id and whatever in a row's observation the reference scorer ignores (docs/scoring.md):
each gives one note on standard error; the report is the reference's, unchanged. It refuses
what could not be reported: results that are not rows, an observation that cannot be scored.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError
from django.utils import timezone

from evalhub import reference_data
from evalhub.commands import DatabaseCommand
from evalhub.secrets import redact, redact_data
from runs.evaluation.exports import EXPORT_FORMATS, export_document
from runs.evaluation.observation_schema import ObservationError, check_observation, scoring_problems
from runs.evaluation.renderers import render_github_summary
from runs.evaluation.reports import CANONICAL_OPERATION_IDS, CAPABILITY_CASES, build_report, compare_reports, compute_alerts
from runs.management.commands.score import read_json
from runs.models import CoverageCatalog
from schedules.services import catalog_cases, iso_timestamp

_INPUT_KEYS = {"source", "bundle", "generatedAt", "results", "traceability", "history", "baselineReady"}


def _unwrapped(document: Any) -> Any:
    """The ``report`` of a ``{report, alerts, comparison}`` export; anything else as it is."""
    if isinstance(document, dict) and "schema" not in document and isinstance(document.get("report"), dict):
        return document["report"]
    return document


def _is_report(document: Any) -> bool:
    return isinstance(document, dict) and isinstance(document.get("bundle"), dict) and "aggregate" in document


def _report_of(document: Any, what: str) -> dict[str, Any]:
    """A report document, or the ``report`` of a ``{report, alerts, comparison}`` export."""
    document = _unwrapped(document)
    if not _is_report(document):
        if isinstance(document, dict) and isinstance(document.get("results"), list):
            raise CommandError(
                f"{what} is a report input (results without an aggregate), not a report: build its report first "
                f"(`manage.py report {what} --format json > previous.json`) and compare with that"
            )
        raise CommandError(f"{what} is not a report (expected an object with bundle, aggregate and results)")
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


def build_outputs(
    document: Any, previous: dict[str, Any] | None, notes: list[str] | None = None
) -> tuple[dict[str, Any], list[dict[str, str]], dict[str, Any] | None]:
    """``(report, alerts, comparison)`` for a report input document; ``CommandError`` if malformed.

    What the reference accepts and ignores is appended to ``notes`` (when given) as sentences,
    redacted: a note may echo an input key.
    """
    notes = notes if notes is not None else []
    if not isinstance(document, dict):
        raise CommandError("the input must be a JSON object {source, bundle, generatedAt, results, ...}")
    unknown = sorted(str(key) for key in set(document) - _INPUT_KEYS)
    if unknown:
        notes.append(redact(f"unknown input key(s) ignored: {', '.join(unknown)}; the keys are {', '.join(sorted(_INPUT_KEYS))}"))
    results = document.get("results")
    if not isinstance(results, list):
        raise CommandError("results must be a list of {scenarioId, candidateId, observation, scorecard} rows")
    history = document.get("history", [])
    if not isinstance(history, list):
        raise CommandError("history must be a list of earlier reports, oldest first")
    baseline_ready = document.get("baselineReady", False)
    if not isinstance(baseline_ready, bool):
        raise CommandError("baselineReady must be true or false")
    bundle = document.get("bundle")
    if not isinstance(bundle, dict) or not isinstance(bundle.get("id"), str):
        raise CommandError('bundle must be an object with a text id, e.g. {"id": "runner-live-v2-…", ...}')
    if not bundle["id"].strip():
        notes.append("bundle.id is blank: the report carries it as given")
    if "generatedAt" in document and not isinstance(document["generatedAt"], str):
        raise CommandError("generatedAt must be an ISO 8601 timestamp string such as 2026-08-24T04:00:00.000Z")
    if document.get("traceability") is not None and not isinstance(document["traceability"], dict):
        raise CommandError("traceability must be an object (the reference traceability summary) or absent")
    for index, row in enumerate(results, start=1):
        if not isinstance(row, dict) or not isinstance(row.get("observation"), dict):
            raise CommandError(f"results item {index} must be an object with scenarioId, candidateId, observation, scorecard")
        try:
            row_notes = check_observation(row["observation"])
        except ObservationError:
            problems = scoring_problems(row["observation"])
            raise CommandError(redact(f"results item {index} has an invalid observation: {'; '.join(problems)}")) from None
        notes.extend(redact(f"results item {index}: {note}") for note in row_notes)
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
        earlier = [_report_of(item, f"history[{index}]") for index, item in enumerate(history)]
        alerts = compute_alerts(report, history=earlier, baseline_ready=baseline_ready)
        comparison = compare_reports(report, previous) if previous is not None else None
    except KeyError as exc:
        raise CommandError(f"the input lacks a field the report reads: {exc}") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise CommandError(f"the input is not a valid report input: {exc}") from None
    return report, alerts, comparison


class Command(DatabaseCommand):
    help = (
        "Build a reference report from {source, bundle, generatedAt, results, traceability?, history?, baselineReady?} "
        "and print it as json ({report, alerts, comparison}), markdown, junit or github."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", help="Path to the report input JSON file, or - for standard input.")
        parser.add_argument("--format", choices=list(EXPORT_FORMATS), default="json", help="Output format (default json).")
        parser.add_argument("--compare", metavar="PREVIOUS_REPORT_FILE", help="A previous report to compare with.")

    def handle(self, *args, **options) -> None:
        document = read_json(options["file"])
        previous = None
        if options["compare"]:
            previous = _report_of(read_json(options["compare"]), options["compare"])
        notes: list[str] = []
        document = report_input_of(document, notes)
        report, alerts, comparison = build_outputs(document, previous, notes)
        # The report echoes its input's ids (bundle, candidates): a secret-shaped one is redacted.
        report, alerts, comparison = redact_data(report), redact_data(alerts), redact_data(comparison)
        fmt = options["format"]
        if previous is not None and fmt in ("markdown", "junit"):
            notes.append(f"the {fmt} rendering carries no comparison (as the reference's): use --format github or json to see it")
        for note in notes:
            self.stderr.write(note)
        if fmt == "github" and previous is None:
            text = render_github_summary(report, alerts)
        else:
            text = export_document(report, fmt, alerts=alerts, comparison=comparison)
        self.stdout.write(text, ending="")
