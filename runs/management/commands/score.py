"""``manage.py score FILE``: score observations into reference scorecards.

FILE (or ``-`` for standard input) holds a JSON array of ``{"observation": ..., "options": ...}``;
the command prints a JSON array of scorecards in the same order, as ``JSON.stringify(.., null, 2)``
prints it. An invalid observation (or invalid options) gives ``{"error": "<message>"}`` in its
place, and the command exits non-zero after printing everything. What the reference scorer accepts
and ignores (a weight on a gate dimension, an unknown option, a field scoring does not read that
breaks the reference schema; docs/scoring.md) is scored as the reference scores it, with one
``item N: <note>`` line per note on standard error; the printed scorecards never change.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from evalhub.commands import read_json
from evalhub.secrets import redact, redact_data
from runs.evaluation.renderers import render_json
from runs.evaluation.scoring import score_observation_noted


def score_items(items: list[Any]) -> tuple[list[dict[str, Any]], int, list[str]]:
    """``(scorecards or {"error": message} in order, number of errors, notes)``.

    ``notes`` are ``"item <index>: <note>"`` lines, redacted (a note may echo an option's name).
    """
    outputs: list[dict[str, Any]] = []
    errors = 0
    notes: list[str] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict) or "observation" not in item:
            outputs.append({"error": f"item {index} must be an object with observation and options"})
            errors += 1
            continue
        try:
            scorecard, item_notes = score_observation_noted(item["observation"], item.get("options", {}))
        except ValueError as exc:  # ObservationError is one: the reference's message
            outputs.append({"error": redact(str(exc))})
            errors += 1
            continue
        outputs.append(scorecard)
        notes.extend(redact(f"item {index}: {note}") for note in item_notes)
    return outputs, errors, notes


class Command(BaseCommand):
    help = (
        "Score a JSON array of {observation, options} into a JSON array of reference scorecards, in order. "
        'An invalid observation gives {"error": "<message>"} in its place and a non-zero exit status.'
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", help="Path to a JSON file, or - for standard input.")

    def handle(self, *args, **options) -> None:
        path = options["file"]
        items = read_json(path)
        if not isinstance(items, list):
            raise CommandError(f"{path} must hold a JSON array of {{observation, options}} objects")
        outputs, errors, notes = score_items(items)
        # A scorecard echoes the observation's ids: a secret-shaped one is redacted, as everywhere.
        self.stdout.write(render_json(redact_data(outputs)), ending="")
        for note in notes:
            self.stderr.write(note)
        if errors:
            raise CommandError(f"{errors} of {len(items)} observation(s) could not be scored")
