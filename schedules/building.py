"""The schedule arithmetic: rotation, the nightly line-up, building and selecting a schedule.

Pure functions over plain data (JSON-shaped dicts and lists). Nothing here touches the
database, the clock or the environment, so services load rows, call these and save the result.

The behaviour follows the reference ``live-workflow-matrix.ts`` (``runnerLiveRotationWeek``,
``resolvedNightlyCandidates``, ``buildRunnerLiveEvalSchedule``,
``selectRunnerLiveEvalSchedule``, ``parseRunnerLiveCampaignCostLimit``) and reproduces its
golden vectors exactly, except where docs/DESIGN.md ("Reference quirks and evalhub's decisions")
says evalhub rejects an input the reference mishandles.

Documents keep the reference's camelCase keys: a *slot* is ``{"id", "candidates": [...]}``
(the shape of ``candidate-manifest.json``'s ``"slots"``), a *candidate* is the reference
candidate document (``id``, ``slotId``, ``tier``, ``budget``, ...), a *case* is a mapping with
at least ``id`` and ``repetitions``.
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any, TypeVar

from evalhub import defaults
from evalhub.scan_views import identity_text_problem
from evalhub.secrets import secret_kinds

T = TypeVar("T")


class ScheduleError(ValueError):
    """A schedule input is invalid; the message says which value and how to fix it.

    ``plays_on``: for a catalog candidate asked for on a rotation day it rests, the rotation days
    it plays (an interface adds how to ask for one of them: ``schedules.cli.schedule_error_message``)."""

    def __init__(self, message: str, *, plays_on: Sequence[int] = ()) -> None:
        super().__init__(message)
        self.plays_on = tuple(plays_on)


DEFAULT_SEED = defaults.SCHEDULE_SEED
SCHEDULE_SCHEMA = "paperclip.runner.live-eval-schedule.v1"
CANDIDATE_SCHEMA = "paperclip.runner.live-eval-candidate.v1"
WEEK_MS = 7 * 86_400_000
ROTATION_DAYS = 7
DEFAULT_CAMPAIGN_COST_LIMIT_USD = Decimal(defaults.MAX_CAMPAIGN_COST_USD)
# The run's ``cost_ceiling_usd`` column holds these (runs/models.py builds it from them), so a
# ceiling the check accepts is one every nightly can store: 12 digits, 6 after the point.
CAMPAIGN_COST_DECIMAL_PLACES = 6
CAMPAIGN_COST_MAX_DIGITS = 12
# Far above any real nightly (a bigger value is almost certainly a typo, extra zeros); the column's largest.
MAX_CAMPAIGN_COST_LIMIT_USD = Decimal("999999.999999")
MAX_SEED_LENGTH = 200
# The catalog uses 1 or 3; a bigger number is a typo that would multiply the paid executions.
MAX_REPETITIONS = 100

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
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
    return _parsed_timestamp(value, name)


@functools.lru_cache(maxsize=1024)
def _parsed_timestamp(value: str, name: str) -> datetime:
    """:func:`parse_timestamp` of a string (remembered: a week's coverage parses the same seven
    times on every check; the result is an immutable ``datetime``, and errors are not cached)."""
    match = _TIMESTAMP.fullmatch(value)
    if match is None:
        raise ScheduleError(
            f"{name} {value!r} is not an ISO 8601 timestamp such as 2026-08-24T00:00:00Z, 2026-08-24T02:00:00+02:00 or 2026-08-24"
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
        return parsed.astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise ScheduleError(f"{name} {value!r} is not a real date and time: {exc}") from None


def _parse_offset(offset: str, *, value: str, name: str) -> timezone:
    if offset == "Z":
        return UTC
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


def _shown(value: object) -> str:
    """``repr(value)`` cut to 40 characters (a 4,301-digit integer has no repr at all)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**40:
        return "a number of more than 40 digits"
    text = repr(value)
    return text if len(text) <= 42 else f"{text[:40]}..."


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
    elif isinstance(value, str) and _DIGITS.fullmatch(value) and len(value.lstrip("0")) <= 1:
        # Past one significant digit it is out of range anyway; int() of 4,301 digits would raise.
        day = int(value)
    if day is None or not 0 <= day < ROTATION_DAYS:
        raise ScheduleError(f"rotation day must be a whole number from 0 to 6, not {_shown(value)}")
    return day


def parse_campaign_cost_limit(value: str | None, *, variable: str = "EVALHUB_MAX_CAMPAIGN_COST_USD") -> Decimal:
    """The campaign cost ceiling in US dollars, from the raw text of an environment variable.

    Follows ``parseRunnerLiveCampaignCostLimit``: unset (``None``) means 12; the value must be
    greater than 0. evalhub decision: only plain decimal notation is read (``12``, ``0.25``,
    surrounding whitespace allowed), so JS ``Number`` spellings such as ``"0x10"``, ``"1e2"``,
    ``"Infinity"`` or ``"+5"`` are refused, and so is what the run's column cannot hold: more
    than 6 decimal places, or above 999 999.999999. ``variable``
    names the setting in the error. Raises :class:`ScheduleError`.
    """
    if value is None:
        return DEFAULT_CAMPAIGN_COST_LIMIT_USD
    text = value.strip() if isinstance(value, str) else ""
    if not _DECIMAL_DOLLARS.fullmatch(text) or Decimal(text) <= 0:
        raise ScheduleError(f"{variable} must be a positive decimal number of US dollars such as 12 or 0.25, not {value!r}")
    limit = Decimal(text)
    if -limit.normalize().as_tuple().exponent > CAMPAIGN_COST_DECIMAL_PLACES:
        raise ScheduleError(
            f"{variable} has at most {CAMPAIGN_COST_DECIMAL_PLACES} decimal places (a millionth of a dollar), not {value!r}"
        )
    if limit > MAX_CAMPAIGN_COST_LIMIT_USD:
        raise ScheduleError(f"{variable} must be at most {MAX_CAMPAIGN_COST_LIMIT_USD} US dollars, not {value!r}")
    # Trailing zeros past the sixth place ("12.5000000") are not precision the column would refuse.
    return limit.quantize(Decimal(1).scaleb(-CAMPAIGN_COST_DECIMAL_PLACES))


def execution_id(seed: str, rotation_day: int, case_id: str, candidate_id: str, repetition: int) -> str:
    """The stable id of one scheduled execution, as the reference computes it.

    ``rwe-`` + the first 16 hex digits of SHA-256 over ``seed:day:case:candidate:repetition``
    (UTF-8 of its NFC form: text in another normalisation form — a decomposed "café" — hashes
    like its visible twin; NFC text, which is all the reference is given, hashes bit for bit as
    the reference does). No validation: callers pass already validated values (a schedule
    refuses a seed that is not NFC).
    """
    identity = f"{seed}:{rotation_day}:{case_id}:{candidate_id}:{repetition}"
    if not identity.isascii():  # ASCII is its own NFC form: only other text needs normalising
        identity = unicodedata.normalize("NFC", identity)
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


def playing_candidate(candidates: Sequence[T], rotation_day: int) -> T | None:
    """The candidate a slot plays in the week of ``rotation_day``: ``candidates[day mod len]``
    (the reference's ``resolvedNightlyCandidates``), or ``None`` for a slot without candidates."""
    return candidates[rotation_day % len(candidates)] if candidates else None


def playing_days(slots: Sequence[Mapping[str, Any]]) -> dict[str, list[int]]:
    """Each candidate id of ``slots`` (``[{"candidates": [candidate, ...]}, ...]``) → the rotation
    days 0..6 whose week it plays (:func:`playing_candidate`), ascending; slots and candidates
    that are not documents are passed over (the schedule's own checks refuse them)."""
    days: dict[str, list[int]] = {}
    for slot in slots:
        candidates = [c for c in slot.get("candidates", []) if isinstance(c, Mapping)] if isinstance(slot, Mapping) else []
        for day in range(ROTATION_DAYS):
            if (candidate := playing_candidate(candidates, day)) is not None:
                days.setdefault(str(candidate.get("id")), []).append(day)
        for candidate in candidates:
            days.setdefault(str(candidate.get("id")), [])
    return days


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
    return [json_copy(playing_candidate(slot["candidates"], day)) for slot in slots]


def json_copy(value: Any) -> Any:
    """A copy of JSON-like ``value``: its dicts, lists and tuples copied, other values shared
    (strings and numbers are immutable). Several times faster than
    ``copy.deepcopy``, which looks every object up in its memo and dispatch tables; documents are
    trees, so the memo buys nothing here."""
    if isinstance(value, dict):
        # Leaves are shared without a call each (a candidate document is mostly strings and numbers).
        return {key: child if type(child) in _JSON_LEAVES else json_copy(child) for key, child in value.items()}
    if isinstance(value, list):
        return [child if type(child) in _JSON_LEAVES else json_copy(child) for child in value]
    if isinstance(value, tuple):
        return tuple(json_copy(child) for child in value)
    return value


# Exact types (a subclass of str or dict goes through the checks of :func:`json_copy`).
_JSON_LEAVES = frozenset({str, int, float, bool, type(None)})


def _check_slots(slots: Sequence[Mapping[str, Any]]) -> None:
    """The structure the arithmetic relies on; the candidates app validates everything else.

    (``type(x) is dict or isinstance(x, Mapping)``: the exact type first, because an ABC's
    ``isinstance`` costs a microsecond a call and every build checks every candidate.)"""
    if isinstance(slots, (str, bytes)) or not isinstance(slots, Sequence) or not slots:
        raise ScheduleError("the candidate manifest has no slots: add at least one slot")
    slot_ids: set[str] = set()
    candidate_ids: set[str] = set()
    for position, slot in enumerate(slots, start=1):
        slot_id = slot.get("id") if type(slot) is dict or isinstance(slot, Mapping) else None
        if not isinstance(slot_id, str) or not slot_id.strip():
            raise ScheduleError(f"slot number {position} has no id")
        if slot_id in slot_ids:
            raise ScheduleError(f"slot {slot_id!r} appears twice in the candidate manifest")
        slot_ids.add(slot_id)
        candidates = slot.get("candidates")
        if type(candidates) is not list and (not isinstance(candidates, Sequence) or isinstance(candidates, str)) or not candidates:
            raise ScheduleError(f"slot {slot_id!r} has no candidates: add at least one")
        for candidate in candidates:
            candidate_id = candidate.get("id") if type(candidate) is dict or isinstance(candidate, Mapping) else None
            if not isinstance(candidate_id, str) or not candidate_id.strip():
                raise ScheduleError(f"slot {slot_id!r} has a candidate without an id")
            if candidate_id in candidate_ids:
                raise ScheduleError(f"candidate {candidate_id!r} appears twice in the candidate manifest")
            candidate_ids.add(candidate_id)
            if candidate.get("slotId") != slot_id:
                raise ScheduleError(f"candidate {candidate_id!r} has slotId {candidate.get('slotId')!r} but sits in slot {slot_id!r}")
            budget = candidate.get("budget")
            if type(budget) is not dict and not isinstance(budget, Mapping):
                raise ScheduleError(f"candidate {candidate_id!r} has no budget")


def validate_seed(seed: str) -> None:
    """Raise ``ScheduleError`` saying what is wrong with ``seed``: blank, longer than
    :data:`MAX_SEED_LENGTH`, secret-shaped, or holding a NUL or a look-alike character."""
    if not isinstance(seed, str) or not seed.strip():
        raise ScheduleError(f"schedule seed must be a non-blank string, not {seed!r}")
    _check_seed_text(seed)


@functools.lru_cache(maxsize=256)
def _check_seed_text(seed: str) -> None:
    """The checks of a text seed (remembered: every build of a week checks the same seed)."""
    if len(seed) > MAX_SEED_LENGTH:
        raise ScheduleError(f"schedule seed must be at most {MAX_SEED_LENGTH} characters, not {len(seed)}")
    kinds = secret_kinds(seed)
    if kinds or "\x00" in seed:
        # The seed is stored, shown and hashed into execution ids: it must never carry a secret.
        what = f"looks like a secret ({', '.join(kinds)})" if kinds else "contains a NUL character"
        raise ScheduleError(f"schedule seed {what}; use a plain name such as {DEFAULT_SEED}")
    # The seed is hashed into every execution id: a seed that differs from its visible twin only
    # by an invisible character, a control character, surrounding spaces or another Unicode
    # normalisation form (NFD "café") would silently give other ids. Refused; seeds the
    # reference hashes (plain NFC text) keep its ids bit for bit.
    problem = identity_text_problem(seed, form="NFC")
    if problem is not None:
        raise ScheduleError(f"schedule seed {problem} (it would change every execution id)")
    if seed != seed.strip():
        raise ScheduleError(f"schedule seed {seed!r} has spaces around it; remove them (they would change every execution id)")


def _check_cases(cases: Sequence[Mapping[str, Any]]) -> None:
    if isinstance(cases, (str, bytes)) or not isinstance(cases, Sequence) or not cases:
        raise ScheduleError("a schedule needs at least one workflow case")
    case_ids: set[str] = set()
    for position, case in enumerate(cases, start=1):
        case_id = case.get("id") if type(case) is dict or isinstance(case, Mapping) else None
        if not isinstance(case_id, str) or not case_id.strip():
            raise ScheduleError(f"workflow case number {position} has no id")
        if case_id in case_ids:
            raise ScheduleError(f"workflow case {case_id!r} appears twice")
        case_ids.add(case_id)
        repetitions = case.get("repetitions")
        if (
            type(repetitions) is not int
            and (isinstance(repetitions, bool) or not isinstance(repetitions, int))
            or not 1 <= repetitions <= MAX_REPETITIONS
        ):
            raise ScheduleError(
                f"workflow case {case_id!r} repetitions must be a whole number from 1 to {MAX_REPETITIONS}, not {repetitions!r}"
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
    :func:`parse_timestamp` but is echoed unchanged; candidate documents are copied as given (the
    document never shares anything with ``slots``), and an entry's ``budget`` is its line-up
    candidate's copy, shared by that candidate's entries as in the reference (the document is
    read-only data: it is serialised when saved, and :func:`select_schedule` copies it). Raises :class:`ScheduleError` for a blank or over-long seed, a bad rotation day or
    timestamp, bad slots (see :func:`nightly_candidates`), or no, duplicate or malformed cases.
    """
    validate_seed(seed)
    day = validate_rotation_day(rotation_day)
    parse_timestamp(generated_at)
    _check_cases(cases)
    return _built(seed=seed, day=day, generated_at=generated_at, candidates=nightly_candidates(slots, day), cases=cases)


def build_week(
    *, seed: str, generated_at: Sequence[str], slots: Sequence[Mapping[str, Any]], cases: Sequence[Mapping[str, Any]]
) -> list[dict]:
    """The schedules of rotation days 0..6 (``generated_at[d]`` for day ``d``), as seven
    :func:`build_schedule` calls would build them, for reading only (the coverage check): the
    inputs are checked once, and the line-ups are the manifest's own candidate documents, not
    copies. Raises :class:`ScheduleError` as :func:`build_schedule` does."""
    check_week_inputs(seed=seed, generated_at=generated_at, slots=slots, cases=cases)
    return [
        _built(
            seed=seed,
            day=day,
            generated_at=generated_at[day],
            candidates=[playing_candidate(slot["candidates"], day) for slot in slots],
            cases=cases,
        )
        for day in range(ROTATION_DAYS)
    ]


# ``b"1"`` .. ``b"100"``: the repetition's part of an execution id's identity text.
_REPETITION_TEXT = [str(repetition).encode("ascii") for repetition in range(MAX_REPETITIONS + 1)]


def check_week_inputs(
    *, seed: str, generated_at: Sequence[str], slots: Sequence[Mapping[str, Any]], cases: Sequence[Mapping[str, Any]]
) -> None:
    """Check a week's inputs as :func:`build_week` does, raising :class:`ScheduleError` as
    :func:`build_schedule` would."""
    validate_seed(seed)
    for text in generated_at:
        parse_timestamp(text)
    _check_cases(cases)
    _check_slots(slots)


def _built(*, seed: str, day: int, generated_at: str, candidates: list[Any], cases: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The schedule document of checked inputs (see :func:`build_schedule`).

    The hot loop of every build (and seven times over in the coverage check): what repeats is
    worked out once — the line-up's ids and budgets per slot, and SHA-256 over the
    ``seed:day:case:candidate:`` prefix, copied for each repetition (hashlib's ``copy``) instead
    of hashing the whole identity again. Ids come out as :func:`execution_id` makes them (a test compares the
    two over identities in other Unicode forms).
    """
    slot_count = len(candidates)
    offset = second_slot_offset(slot_count)
    prefix = f"{seed}:{day}:"
    ascii_prefix = prefix.isascii()
    prefix_hash = hashlib.sha256(prefix.encode("utf-8"))
    line_up = [(candidate["id"], candidate["slotId"], candidate["budget"]) for candidate in candidates]
    entries: list[dict[str, Any]] = []
    append = entries.append
    for case_index, case in enumerate(cases):
        case_id = case["id"]
        first = (case_index + day) % slot_count
        slot_indexes = (first,) if slot_count == 1 else (first, (first + offset) % slot_count)
        for slot_index in slot_indexes:
            candidate_id, slot_id, budget = line_up[slot_index]
            pair = f"{case_id}:{candidate_id}:"
            pair_hash = None
            if ascii_prefix and pair.isascii():
                pair_hash = prefix_hash.copy()
                pair_hash.update(pair.encode("ascii"))
            for repetition in range(1, case["repetitions"] + 1):
                if pair_hash is not None:
                    digest = pair_hash.copy()
                    digest.update(_REPETITION_TEXT[repetition])
                    identity = "rwe-" + digest.hexdigest()[:16]
                else:  # the whole identity's NFC form, as execution_id() hashes it
                    identity = execution_id(seed, day, case_id, candidate_id, repetition)
                append(
                    {
                        "executionId": identity,
                        "caseId": case_id,
                        "candidateId": candidate_id,
                        "slotId": slot_id,
                        "repetition": repetition,
                        "providerTrace": "raw",
                        "budget": budget,
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
    catalog_ids: Collection[str] = (),
) -> dict[str, Any]:
    """A paid subset of a schedule, as ``selectRunnerLiveEvalSchedule`` makes it.

    Keeps the entries whose candidate is in ``candidate_ids`` and whose case is in ``case_ids``
    (an empty list means no filter; duplicates are harmless), in schedule order, then the first
    ``limit`` of them. The result is a copy of the schedule with those entries, only the
    candidates that still have entries, and ``expectedExecutions`` updated.

    Checks run in the reference's order with its messages, raising :class:`ScheduleError`:
    a candidate not in this week's line-up ("unknown Runner live eval candidate: X", followed
    by the rotation day and its line-up; a candidate in ``catalog_ids`` that rests this week is
    told so instead: "candidate X does not play on rotation day D: ...", naming the days it plays
    when ``catalog_ids`` maps each id to them), a case with no entries ("unknown Runner live eval
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
        if candidate_id not in line_up and candidate_id in catalog_ids:
            # evalhub decision: a catalog candidate resting this week is not "unknown" (the
            # reference's message for both); say that it exists and who plays instead.
            days = catalog_ids.get(candidate_id) if isinstance(catalog_ids, Mapping) else None
            raise ScheduleError(
                f"candidate {candidate_id} does not play on rotation day {schedule['rotationDay']}: "
                f"its slot plays another of its candidates this week (the line-up: {', '.join(line_up)}); "
                + (
                    f"it plays on rotation day{'s' if len(days) > 1 else ''} {', '.join(map(str, days))}: "
                    "select one of this week's, or preview or run one of those days"
                    if days
                    else "select one of those, or preview another rotation day"
                ),
                plays_on=days or (),
            )
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
        if (not wanted_candidates or entry["candidateId"] in wanted_candidates) and (not wanted_cases or entry["caseId"] in wanted_cases)
    ]
    if limit is not None:
        entries = entries[:limit]
    if not entries:
        raise ScheduleError("Runner live eval selection matched no scheduled executions")

    selected = {entry["candidateId"] for entry in entries}
    return json_copy(
        {
            **schedule,
            "candidates": [c for c in schedule["candidates"] if c["id"] in selected],
            "entries": entries,
            "expectedExecutions": len(entries),
        }
    )


@dataclass(frozen=True)
class CeilingProjection:
    """What a schedule may spend against a campaign cost ceiling (USD), entries in order.

    ``worst_case_usd`` is the sum of the entries' ``budget.maxCostUsd`` (every execution spending
    its whole budget). When that is over ``ceiling_usd``, ``first_refused`` is the 0-based index of
    the first entry whose worst case no longer fits beside the ones before it: with every
    execution spending its budget, the night stops there and that entry and the rest are skipped
    (``campaign_cost_ceiling_reached``). ``None`` when the whole schedule fits.
    """

    worst_case_usd: Decimal
    ceiling_usd: Decimal
    first_refused: int | None
    entries: int

    @property
    def stops_early(self) -> bool:
        return self.first_refused is not None

    @property
    def refused(self) -> int:
        """How many entries would be skipped in the worst case."""
        return 0 if self.first_refused is None else self.entries - self.first_refused


def ceiling_projection(entries: Sequence[Mapping[str, Any]], ceiling_usd: Decimal) -> CeilingProjection:
    """Project ``entries`` (schedule entry documents, in order) against ``ceiling_usd``; see
    :class:`CeilingProjection`. Raises ``KeyError`` or ``decimal.InvalidOperation`` for an entry
    without a numeric ``budget.maxCostUsd``."""
    total = Decimal(0)
    first_refused = None
    for index, entry in enumerate(entries):
        cost = Decimal(str(entry["budget"]["maxCostUsd"]))
        if first_refused is None and total + cost > ceiling_usd:
            first_refused = index
        total += cost
    return CeilingProjection(total, ceiling_usd, first_refused, len(entries))
