"""``manage.py schedule``: print a schedule without saving it."""

from __future__ import annotations

import json

from django.core.management.base import CommandError
from django.utils import timezone

from evalhub.commands import DatabaseCommand
from evalhub.templatetags.evalhub_format import duration, format_usd
from schedules.building import ScheduleError
from schedules.cli import add_selector_arguments, schedule_error_message, seed_from_options, selection_from_options
from schedules.services import preview_schedule


class Command(DatabaseCommand):
    help = "Print tonight's (or any night's) schedule without saving it: a table, or the reference JSON with --json."

    def add_arguments(self, parser) -> None:
        add_selector_arguments(parser)
        parser.add_argument("--json", action="store_true", help="Print the reference schedule document as JSON.")

    def handle(self, *args, **options) -> None:
        try:
            document = preview_schedule(
                seed=seed_from_options(options),
                now=timezone.now(),
                rotation_day=options["rotation_day"],
                generated_at=options["generated_at"],
                selection=selection_from_options(options),
            )
        except ScheduleError as exc:
            raise CommandError(schedule_error_message(exc)) from None
        if options["json"]:
            self.stdout.write(json.dumps(document, indent=2))
            return
        self.stdout.write(render_table(document))


def render_table(document: dict) -> str:
    """A readable table of a schedule document: one line per entry, then the totals.

    An entry's budget reads as Tonight's page shows it: ``3 min 00 s a turn, $1.50, 100,000 tokens``
    (the latency per turn, the cost ceiling in USD, the token ceiling)."""
    lines = [
        f"seed {document['seed']} · rotation day {document['rotationDay']} · generated {document['generatedAt']}",
        "line-up: " + ", ".join(f"{c['slotId']}={c['id']}" for c in document["candidates"]),
        "",
        f"{'#':>3}  {'execution id':<20}  {'case':<26}  {'candidate':<20}  {'slot':<22}  rep  budget",
    ]
    for number, entry in enumerate(document["entries"], start=1):
        budget = entry["budget"]
        lines.append(
            f"{number:>3}  {entry['executionId']:<20}  {entry['caseId']:<26}  {entry['candidateId']:<20}  "
            f"{entry['slotId']:<22}  {entry['repetition']:>3}  {duration(budget['maxLatencyMs'])} a turn, "
            f"{format_usd(budget['maxCostUsd'])}, {budget['maxTotalTokens']:,} tokens"
        )
    lines.append("")
    lines.append(f"{document['expectedExecutions']} executions")
    return "\n".join(lines)
