"""Command-line options shared by ``manage.py schedule`` and ``manage.py nightly``."""

from __future__ import annotations

import argparse
import re
from typing import Any

from django.core.management.base import CommandError

from evalhub.conf import evalhub_setting
from evalhub.secrets import redact
from schedules.building import ScheduleError, parse_campaign_cost_limit, validate_seed
from schedules.services import Selection


def add_selector_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", help="Schedule seed (default: EVALHUB_SCHEDULE_SEED or runner-live-seven-week-v1).")
    parser.add_argument("--rotation-day", help="Rotation day 0..6 (default: derived from --generated-at or now).")
    parser.add_argument("--generated-at", help="ISO 8601 timestamp such as 2026-08-24T00:00:00.000Z (default: now).")
    parser.add_argument("--candidate", action="append", default=[], metavar="ID", help="Only this candidate (repeatable, or a comma list).")
    parser.add_argument("--case", action="append", default=[], metavar="ID", help="Only this case (repeatable, or a comma list).")
    parser.add_argument("--limit", help="At most this many executions (a positive whole number).")


def _ids(values: list[str], flag: str) -> tuple[str, ...]:
    ids: list[str] = []
    for value in values:
        parts = [part.strip() for part in value.split(",")]
        if not any(parts):
            raise CommandError(f"{flag} needs an id, for example {flag} codex-luna")
        ids.extend(part for part in parts if part and part not in ids)
    return tuple(ids)


def selection_from_options(options: dict[str, Any]) -> Selection:
    """The selection named by ``--candidate``, ``--case`` and ``--limit``; CommandError when malformed."""
    limit = options.get("limit")
    if limit is not None:
        text = str(limit).strip()
        if not re.fullmatch(r"[0-9]+", text) or int(text) <= 0:
            raise CommandError(f"--limit must be a positive whole number, not {limit!r}")
        limit = int(text)
    return Selection(
        candidate_ids=_ids(options.get("candidate") or [], "--candidate"),
        case_ids=_ids(options.get("case") or [], "--case"),
        limit=limit,
    )


def seed_from_options(options: dict[str, Any]) -> str:
    seed = options.get("seed")
    if seed is None:
        seed = evalhub_setting("SCHEDULE_SEED")
    seed = str(seed).strip()
    if not seed:
        raise CommandError("--seed must not be blank")
    try:
        seed.encode("utf-8")
    except UnicodeEncodeError:  # bytes the terminal could not decode (surrogate escapes)
        raise CommandError(
            "--seed must be UTF-8 text (it holds bytes that are not): use a plain name such as runner-live-seven-week-v1"
        ) from None
    # A bad flag (exit status 1), not a night the catalog refuses: checked before anything is built.
    try:
        validate_seed(seed)
    except ScheduleError as exc:
        name = "--seed" if options.get("seed") is not None else "EVALHUB_SCHEDULE_SEED"
        raise CommandError(redact(str(exc)).replace("schedule seed", name, 1)) from None
    return seed


def schedule_error_message(exc: ScheduleError) -> str:
    """``exc``'s message, redacted, for the command line: a candidate asked for on a day it rests
    is told the flag that asks for one of the days it plays."""
    message = redact(str(exc))
    if exc.plays_on:
        message += f" (add --rotation-day {exc.plays_on[0]})"
    return message


def cost_ceiling() -> Any:
    """The campaign cost ceiling from EVALHUB_MAX_CAMPAIGN_COST_USD, or CommandError saying what to fix."""
    try:
        return parse_campaign_cost_limit(evalhub_setting("MAX_CAMPAIGN_COST_USD"))
    except ScheduleError as exc:
        raise CommandError(redact(str(exc))) from None
