"""The schedule arithmetic: rotation, the nightly line-up, building and selecting a schedule.

Pure functions over plain data (JSON-shaped dicts and lists). Nothing here touches the
database, the clock or the environment, so services load rows, call these and save the result.

The behaviour follows the reference ``live-workflow-matrix.ts`` (``runnerLiveRotationWeek``,
``resolvedNightlyCandidates``, ``buildRunnerLiveEvalSchedule``,
``selectRunnerLiveEvalSchedule``, ``parseRunnerLiveCampaignCostLimit``) and reproduces its
golden vectors exactly, except where DESIGN.md ("Reference quirks and evalhub's decisions")
says evalhub rejects an input the reference mishandles.

Documents keep the reference's camelCase keys: a *slot* is ``{"id", "candidates": [...]}``
(the shape of ``candidate-manifest.json``'s ``"slots"``), a *candidate* is the reference
candidate document (``id``, ``slotId``, ``tier``, ``budget``, ...), a *case* is a mapping with
at least ``id`` and ``repetitions``.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

from candidates.secrets import secret_kinds


class ScheduleError(ValueError):
    """A schedule input is invalid; the message says which value and how to fix it."""


DEFAULT_SEED = "runner-live-seven-week-v1"
SCHEDULE_SCHEMA = "paperclip.runner.live-eval-schedule.v1"
CANDIDATE_SCHEMA = "paperclip.runner.live-eval-candidate.v1"
WEEK_MS = 7 * 86_400_000
ROTATION_DAYS = 7
DEFAULT_CAMPAIGN_COST_LIMIT_USD = Decimal("12")
# Far above any real nightly; a bigger value is almost certainly a typo (extra zeros).
MAX_CAMPAIGN_COST_LIMIT_USD = Decimal("1000000")
MAX_SEED_LENGTH = 200
# The catalog uses 1 or 3; a bigger number is a typo that would multiply the paid executions.
MAX_REPETITIONS = 100

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_ONE_MS = timedelta(milliseconds=1)
_TIMESTAMP = re.compile(
    r"(?P<year>[0-9]{4})-(?P<month>[0-9]{2})-(?P<day>[0-9]{2})"
    r"(?:T(?P<hour>[0-9]{2}):(?P<minute>[0-9]{2})"
    r"(?::(?P<second>[0-9]{2})(?:\.(?P<fraction>[0-9]+))?)?"
    r"(?P<offset>Z|[+-][0-9]{2}:?[0-9]{2})?)?"
)
_OFFSET = re.compile(r"(?P<sign>[+-])(?P<hours>[0-9]{2}):?(?P<minutes>[0-9]{2})")
_DECIMAL_DOLLARS = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_DIGITS = re.compile(r"[0-9]+")


def parse_timestamp(value: str, *, name: str = "generated-at time") -> datetime:
    """Parse an ISO 8601 timestamp into an aware UTC ``datetime``.

    Accepted: ``YYYY-MM-DDTHH:MM[:SS[.fraction]]`` followed by ``Z``, ``+hh:mm`` or ``+hhmm``
    (``-`` offsets too), and a bare date ``YYYY-MM-DD``, which means midnight UTC as in JS
    ``Date.parse``. Fractions are truncated to microseconds.

    evalhub decision: JS reads a date-time *without* an offset as local time of whatever machine
    runs it; evalhub refuses it instead, so the rotation never depends on a server's time zone.

    ``name`` only words the error message. Raises :class:`ScheduleError` naming the bad value
    for anything else (blank, garbage, ``2026-13-01``, ``24:00``, leap seconds, a naive
    date-time, a non-string).
    """
    if not isinstance(value, str):
        raise ScheduleError(f"{name} must be an ISO 8601 timestamp string, not {value!r}")
    match = _TIMESTAMP.fullmatch(value)
    if match is None:
        raise ScheduleError(
            f"{name} {value!r} is not an ISO 8601 timestamp such as "
            "2026-08-24T00:00:00Z, 2026-08-24T02:00:00+02:00 or 2026-08-24"
        )
    parts = match.groupdict()
    if parts["hour"] is not None and parts["offset"] is None:
        raise ScheduleError(f"{name} {value!r} needs a UTC offset such as Z or +02:00")
    fraction = (parts["fraction"] or "")[:6].ljust(6, "0")
    try:
        parsed = datetime(
            int(parts["year"]),
            int(parts["month"]),
            int(parts["day"]),
            int(parts["hour"] or 0),
            int(parts["minute"] or 0),
            int(parts["second"] or 0),
            int(fraction),
            tzinfo=_parse_offset(parts["offset"] or "Z", value=value, name=name),
        )
        return parsed.astimezone(timezone.utc)
    except (ValueError, OverflowError) as exc:
        raise ScheduleError(f"{name} {value!r} is not a real date and time: {exc}") from None


def _parse_offset(offset: str, *, value: str, name: str) -> timezone:
    if offset == "Z":
        return timezone.utc
    match = _OFFSET.fullmatch(offset)
    assert match is not None  # the timestamp pattern only lets well-formed offsets through
    hours, minutes = int(match["hours"]), int(match["minutes"])
    if hours > 23 or minutes > 59:
        raise ScheduleError(f"{name} {value!r} has an impossible UTC offset {offset!r}")
    delta = timedelta(hours=hours, minutes=minutes)
    return timezone(-delta if match["sign"] == "-" else delta)


def epoch_ms(moment: datetime) -> int:
    """Whole milliseconds since 1970-01-01T00:00Z, floored (exact integer arithmetic)."""
    return (moment - _EPOCH) // _ONE_MS


def rotation_day(generated_at: str) -> int:
    """The rotation day 0..6 of a timestamp: ``floor(epoch_ms / WEEK_MS) mod 7``.

    Follows ``runnerLiveRotationWeek``: weeks roll on Thursday 00:00 UTC. Python's ``//`` and
    ``%`` floor, so times before 1970 come out the same as in the reference. Raises
    :class:`ScheduleError` when ``generated_at`` is not accepted by :func:`parse_timestamp`.
    """
    epoch_week = epoch_ms(parse_timestamp(generated_at)) // WEEK_MS
    return epoch_week % ROTATION_DAYS


def validate_rotation_day(value: object) -> int:
    """Return ``value`` as a rotation day 0..6.

    Accepts an ``int`` from 0 to 6 or a string of ASCII digits (from a CLI or an API query).
    evalhub decision: the reference crashes on negative days and builds a mixed-up schedule for
    days >= 7; evalhub refuses both. Booleans, floats and anything else raise
    :class:`ScheduleError`.
    """
    day: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        day = value
    elif isinstance(value, str) and _DIGITS.fullmatch(value):
        day = int(value)
    if day is None or not 0 <= day < ROTATION_DAYS:
        raise ScheduleError(f"rotation day must be a whole number from 0 to 6, not {value!r}")
    return day


def parse_campaign_cost_limit(
    value: str | None, *, variable: str = "EVALHUB_MAX_CAMPAIGN_COST_USD"
) -> Decimal:
    """The campaign cost ceiling in US dollars, from the raw text of an environment variable.

    Follows ``parseRunnerLiveCampaignCostLimit``: unset (``None``) means 12; the value must be
    greater than 0. evalhub decision: only plain decimal notation is read (``12``, ``0.25``,
    surrounding whitespace allowed), so JS ``Number`` spellings such as ``"0x10"``, ``"1e2"``,
    ``"Infinity"`` or ``"+5"`` are refused, and so is anything above 1 000 000. ``variable``
    names the setting in the error. Raises :class:`ScheduleError`.
    """
    if value is None:
        return DEFAULT_CAMPAIGN_COST_LIMIT_USD
    text = value.strip() if isinstance(value, str) else ""
    if not _DECIMAL_DOLLARS.fullmatch(text) or Decimal(text) <= 0:
        raise ScheduleError(
            f"{variable} must be a positive decimal number of US dollars such as 12 or 0.25, "
            f"not {value!r}"
        )
    limit = Decimal(text)
    if limit > MAX_CAMPAIGN_COST_LIMIT_USD:
        raise ScheduleError(
            f"{variable} must be at most {MAX_CAMPAIGN_COST_LIMIT_USD} US dollars, not {value!r}"
        )
    return limit


def execution_id(
    seed: str, rotation_day: int, case_id: str, candidate_id: str, repetition: int
) -> str:
    """The stable id of one scheduled execution, as the reference computes it.

    ``rwe-`` + the first 16 hex digits of SHA-256 over ``seed:day:case:candidate:repetition``
    (UTF-8). No validation: callers pass already validated values.
    """
    identity = f"{seed}:{rotation_day}:{case_id}:{candidate_id}:{repetition}"
    return "rwe-" + hashlib.sha256(identity.encode("utf-8")).hexdigest()[:16]


def second_slot_offset(slot_count: int) -> int:
    """How many slots after its first slot a case's second slot sits: ``ceil(N / 2)``.

    3 for the reference's five slots, so schedules are bit-exact with it. evalhub decision: the
    reference refuses any other slot count; evalhub allows it. With one slot the offset lands on
    the same slot, and :func:`build_schedule` then plays each case in that one slot only.
    Raises :class:`ScheduleError` for fewer than one slot.
    """
    if isinstance(slot_count, bool) or not isinstance(slot_count, int) or slot_count < 1:
        raise ScheduleError(f"a schedule needs at least one slot, not {slot_count!r}")
    return (slot_count + 1) // 2


def nightly_candidates(slots: Sequence[Mapping[str, Any]], rotation_day: int) -> list[dict]:
    """The week's line-up: one candidate document per slot, in slot order.

    Follows ``resolvedNightlyCandidates``: slot ``s`` plays ``candidates[day % len]``.
    ``slots`` is ``[{"id": str, "candidates": [candidate, ...]}, ...]``. Returns deep copies of
    the chosen candidate documents. Raises :class:`ScheduleError` for a bad rotation day, no
    slots, a slot without candidates, duplicate slot or candidate ids, or a candidate whose
    ``slotId`` is not its slot's id.
    """
    day = validate_rotation_day(rotation_day)
    _check_slots(slots)
    return [
        copy.deepcopy(slot["candidates"][day % len(slot["candidates"])]) for slot in slots
    ]


def _check_slots(slots: Sequence[Mapping[str, Any]]) -> None:
    """The structure the arithmetic relies on; the candidates app validates everything else."""
    if isinstance(slots, (str, bytes)) or not isinstance(slots, Sequence) or not slots:
        raise ScheduleError("the candidate manifest has no slots: add at least one slot")
    slot_ids: set[str] = set()
    candidate_ids: set[str] = set()
    for position, slot in enumerate(slots, start=1):
        slot_id = slot.get("id") if isinstance(slot, Mapping) else None
        if not isinstance(slot_id, str) or not slot_id.strip():
            raise ScheduleError(f"slot number {position} has no id")
        if slot_id in slot_ids:
            raise ScheduleError(f"slot {slot_id!r} appears twice in the candidate manifest")
        slot_ids.add(slot_id)
        candidates = slot.get("candidates")
        if not isinstance(candidates, Sequence) or isinstance(candidates, str) or not candidates:
            raise ScheduleError(f"slot {slot_id!r} has no candidates: add at least one")
        for candidate in candidates:
            candidate_id = candidate.get("id") if isinstance(candidate, Mapping) else None
            if not isinstance(candidate_id, str) or not candidate_id.strip():
                raise ScheduleError(f"slot {slot_id!r} has a candidate without an id")
            if candidate_id in candidate_ids:
                raise ScheduleError(
                    f"candidate {candidate_id!r} appears twice in the candidate manifest"
                )
            candidate_ids.add(candidate_id)
            if candidate.get("slotId") != slot_id:
                raise ScheduleError(
                    f"candidate {candidate_id!r} has slotId {candidate.get('slotId')!r} "
                    f"but sits in slot {slot_id!r}"
                )
            if not isinstance(candidate.get("budget"), Mapping):
                raise ScheduleError(f"candidate {candidate_id!r} has no budget")


def _check_seed(seed: str) -> None:
    if not isinstance(seed, str) or not seed.strip():
        raise ScheduleError(f"schedule seed must be a non-blank string, not {seed!r}")
    if len(seed) > MAX_SEED_LENGTH:
        raise ScheduleError(
            f"schedule seed must be at most {MAX_SEED_LENGTH} characters, not {len(seed)}"
        )
    kinds = secret_kinds(seed)
    if kinds or "\x00" in seed:
        # The seed is stored, shown and hashed into execution ids: it must never carry a secret.
        what = f"looks like a secret ({', '.join(kinds)})" if kinds else "contains a NUL character"
        raise ScheduleError(f"schedule seed {what}; use a plain name such as {DEFAULT_SEED}")


def _check_cases(cases: Sequence[Mapping[str, Any]]) -> None:
    if isinstance(cases, (str, bytes)) or not isinstance(cases, Sequence) or not cases:
        raise ScheduleError("a schedule needs at least one workflow case")
    case_ids: set[str] = set()
    for position, case in enumerate(cases, start=1):
        case_id = case.get("id") if isinstance(case, Mapping) else None
        if not isinstance(case_id, str) or not case_id.strip():
            raise ScheduleError(f"workflow case number {position} has no id")
        if case_id in case_ids:
            raise ScheduleError(f"workflow case {case_id!r} appears twice")
        case_ids.add(case_id)
        repetitions = case.get("repetitions")
        if (
            isinstance(repetitions, bool)
            or not isinstance(repetitions, int)
            or not 1 <= repetitions <= MAX_REPETITIONS
        ):
            raise ScheduleError(
                f"workflow case {case_id!r} repetitions must be a whole number from 1 to "
                f"{MAX_REPETITIONS}, not {repetitions!r}"
            )


def build_schedule(
    *,
    seed: str,
    rotation_day: int,
    generated_at: str,
    slots: Sequence[Mapping[str, Any]],
    cases: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """Build the schedule document for one night.

    Follows ``buildRunnerLiveEvalSchedule``: the case at catalog index ``c`` meets the slot at
    ``first = (c + day) mod N`` and the one at ``(first + ceil(N/2)) mod N`` (only ``first``
    when N = 1), in that order, with ``repetitions`` entries (1-based) for each.
    ``cases`` come in catalog order, each with ``id`` and ``repetitions``.

    Returns ``{schema, seed, rotationDay, generatedAt, candidates, entries,
    expectedExecutions}``; each entry is ``{executionId, caseId, candidateId, slotId,
    repetition, providerTrace: "raw", budget}``. ``generated_at`` must parse with
    :func:`parse_timestamp` but is echoed unchanged; candidate documents and budgets are copied
    as given. Raises :class:`ScheduleError` for a blank or over-long seed, a bad rotation day or
    timestamp, bad slots (see :func:`nightly_candidates`), or no, duplicate or malformed cases.
    """
    _check_seed(seed)
    day = validate_rotation_day(rotation_day)
    parse_timestamp(generated_at)
    _check_cases(cases)
    candidates = nightly_candidates(slots, day)
    slot_count = len(candidates)
    offset = second_slot_offset(slot_count)

    entries: list[dict[str, Any]] = []
    for case_index, case in enumerate(cases):
        first = (case_index + day) % slot_count
        slot_indexes = [first] if slot_count == 1 else [first, (first + offset) % slot_count]
        for slot_index in slot_indexes:
            candidate = candidates[slot_index]
            for repetition in range(1, case["repetitions"] + 1):
                entries.append(
                    {
                        "executionId": execution_id(
                            seed, day, case["id"], candidate["id"], repetition
                        ),
                        "caseId": case["id"],
                        "candidateId": candidate["id"],
                        "slotId": candidate["slotId"],
                        "repetition": repetition,
                        "providerTrace": "raw",
                        "budget": copy.deepcopy(candidate["budget"]),
                    }
                )
    return {
        "schema": SCHEDULE_SCHEMA,
        "seed": seed,
        "rotationDay": day,
        "generatedAt": generated_at,
        "candidates": candidates,
        "entries": entries,
        "expectedExecutions": len(entries),
    }


def select_schedule(
    schedule: Mapping[str, Any],
    *,
    candidate_ids: Sequence[str] = (),
    case_ids: Sequence[str] = (),
    limit: int | None = None,
) -> dict[str, Any]:
    """A paid subset of a schedule, as ``selectRunnerLiveEvalSchedule`` makes it.

    Keeps the entries whose candidate is in ``candidate_ids`` and whose case is in ``case_ids``
    (an empty list means no filter; duplicates are harmless), in schedule order, then the first
    ``limit`` of them. The result is a copy of the schedule with those entries, only the
    candidates that still have entries, and ``expectedExecutions`` updated.

    Checks run in the reference's order with its messages, raising :class:`ScheduleError`:
    a candidate not in this week's line-up ("unknown Runner live eval candidate: X", followed
    by the rotation day and its line-up), a case with no entries ("unknown Runner live eval
    case: X"), a limit that is not an int above 0 ("Runner live eval selection limit must be
    a positive integer"), and an empty result ("Runner live eval selection matched no scheduled
    executions"). A single string instead of a list of ids is refused too.
    """
    for label, ids in (("candidate ids", candidate_ids), ("case ids", case_ids)):
        if isinstance(ids, str):
            raise ScheduleError(f"{label} must be a list of ids, not the single string {ids!r}")
    wanted_candidates = dict.fromkeys(candidate_ids)
    wanted_cases = dict.fromkeys(case_ids)

    line_up = [candidate["id"] for candidate in schedule["candidates"]]
    for candidate_id in wanted_candidates:
        if candidate_id not in line_up:
            raise ScheduleError(
                f"unknown Runner live eval candidate: {candidate_id} (not in rotation day "
                f"{schedule['rotationDay']}'s line-up: {', '.join(line_up)})"
            )
    scheduled_cases = {entry["caseId"] for entry in schedule["entries"]}
    for case_id in wanted_cases:
        if case_id not in scheduled_cases:
            raise ScheduleError(f"unknown Runner live eval case: {case_id}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0):
        raise ScheduleError("Runner live eval selection limit must be a positive integer")

    entries = [
        entry
        for entry in schedule["entries"]
        if (not wanted_candidates or entry["candidateId"] in wanted_candidates)
        and (not wanted_cases or entry["caseId"] in wanted_cases)
    ]
    if limit is not None:
        entries = entries[:limit]
    if not entries:
        raise ScheduleError("Runner live eval selection matched no scheduled executions")

    selected = {entry["candidateId"] for entry in entries}
    return copy.deepcopy(
        {
            **schedule,
            "candidates": [c for c in schedule["candidates"] if c["id"] in selected],
            "entries": entries,
            "expectedExecutions": len(entries),
        }
    )
