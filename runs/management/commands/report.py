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

The report is built by ``runs.report_input``. As the reference's report builder, the command accepts and ignores unknown input keys, a blank
bundle id and whatever in a row's observation the reference scorer ignores (docs/scoring.md):
each gives one note on standard error; the report is the reference's, unchanged. It refuses
what could not be reported: results that are not rows, an observation that cannot be scored.
"""

from __future__ import annotations

from django.core.management.base import CommandError

from evalhub.commands import DatabaseCommand, read_json
from evalhub.secrets import redact_data
from runs.evaluation.exports import EXPORT_FORMATS, export_document
from runs.evaluation.renderers import render_github_summary
from runs.report_input import ReportInputError, build_outputs, report_input_of, report_of


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
        notes: list[str] = []
        try:
            previous = report_of(read_json(options["compare"]), options["compare"]) if options["compare"] else None
            report, alerts, comparison = build_outputs(report_input_of(document, notes), previous, notes)
        except ReportInputError as exc:
            raise CommandError(str(exc)) from None
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
