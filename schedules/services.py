"""Schedule services: load the catalog, call the pure core, save.

The arithmetic lives in ``schedules.building`` and ``schedules.coverage``; this module only
reads rows, passes plain documents to those functions and stores what they return.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F

from candidates.models import Candidate
from candidates.services import catalog_slots
from evalhub.conf import evalhub_setting
from evalhub.credentials import reserved_name_reason
from evalhub.secrets import REDACTION, redact, redact_data, secret_kinds
from evalhub.validation import REORDER_OFFSET, env_name_errors
from schedules.building import (
    DEFAULT_CAMPAIGN_COST_LIMIT_USD,
    ROTATION_DAYS,
    ScheduleError,
    build_schedule,
    parse_campaign_cost_limit,
    parse_timestamp,
    playing_days,
    select_schedule,
    validate_rotation_day,
)
from schedules.building import (
    rotation_day as rotation_day_of,
)
from schedules.coverage import SLOTS_A_CASE_MEETS_A_WEEK, coverage_matrix, failed_invariants, schedule_coverage
from schedules.models import ChaosScenario, Schedule, ScheduleEntry, WorkflowCase


class CoverageError(ScheduleError):
    """The week's schedules do not meet the coverage invariants; ``failed`` names them, and
    ``detail`` (in the message) says why when no catalog of this shape could pass."""

    def __init__(self, failed: list[str], coverage: Mapping[str, bool], *, detail: str = "") -> None:
        super().__init__(f"live schedule coverage failed: {', '.join(failed)} is false" + (f": {detail}" if detail else ""))
        self.failed = failed
        self.coverage = dict(coverage)


class SelectionError(ScheduleError):
    """A selection (candidate ids, case ids, a limit) that this schedule cannot satisfy: the
    caller's flags or request body are at fault, not the catalog."""


@dataclass(frozen=True)
class Selection:
    """A paid subset of a schedule: candidate ids, case ids and a limit (all optional)."""

    candidate_ids: tuple[str, ...] = ()
    case_ids: tuple[str, ...] = ()
    limit: int | None = None

    @property
    def is_empty(self) -> bool:
        return not self.candidate_ids and not self.case_ids and self.limit is None

    def to_document(self) -> dict[str, Any] | None:
        """``{"candidateIds", "caseIds", "limit"}`` or ``None`` for the whole schedule."""
        if self.is_empty:
            return None
        return {"candidateIds": list(self.candidate_ids), "caseIds": list(self.case_ids), "limit": self.limit}


def iso_timestamp(moment: dt.datetime) -> str:
    """An aware datetime as JavaScript's ``toISOString()`` prints it: ``2026-11-30T04:00:00.000Z``."""
    utc = moment.astimezone(dt.UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def catalog_cases() -> list[dict[str, Any]]:
    """The workflow cases in catalog order, as documents."""
    return [case.to_document() for case in WorkflowCase.objects.order_by("position", "id")]


def resolve_timing(*, rotation_day: Any = None, generated_at: str | None = None, now: dt.datetime) -> tuple[int, str]:
    """The (rotation day, generatedAt) pair a schedule is built with.

    Both given: both used as given (as the reference does). Only a timestamp: the day is derived
    from it. Neither: ``now`` as the timestamp. Only a day: ``now`` as the timestamp with that day.
    Raises :class:`ScheduleError` for a bad day or timestamp.
    """
    if generated_at is not None:
        parse_timestamp(generated_at)
    else:
        generated_at = iso_timestamp(now)
    if rotation_day is None:
        return rotation_day_of(generated_at), generated_at
    return validate_rotation_day(rotation_day), generated_at


def preview_schedule(
    *,
    seed: str,
    now: dt.datetime,
    rotation_day: Any = None,
    generated_at: str | None = None,
    selection: Selection = Selection(),
    slots: list[dict[str, Any]] | None = None,
    cases: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The reference schedule document (selected when a selection is given), built, not saved.

    ``slots`` is the catalog's scheduled slots when the caller has loaded them already
    (:func:`candidates.services.catalog_lineup`), else they are loaded here; ``cases`` likewise
    the workflow cases (:func:`catalog_cases`).
    Raises :class:`ScheduleError` for bad timing, an empty catalog or a bad selection.
    """
    day, timestamp = resolve_timing(rotation_day=rotation_day, generated_at=generated_at, now=now)
    slots = catalog_slots() if slots is None else slots
    cases = catalog_cases() if cases is None else cases
    document = build_schedule(seed=seed, rotation_day=day, generated_at=timestamp, slots=slots, cases=cases)
    document = _quarantine_unsafe_candidates(document)
    if selection.is_empty:
        return document
    return apply_selection(document, selection, catalog_ids=playing_days(slots))


def apply_selection(
    document: Mapping[str, Any], selection: Selection, *, catalog_ids: Collection[str] | Mapping[str, list[int]] | None = None
) -> dict[str, Any]:
    """``selection`` applied to a schedule document (:func:`select_schedule`), telling a catalog
    candidate that rests this week apart from an unknown id, with the days it plays
    (``catalog_ids``: the catalog's candidate ids, or each one's playing days,
    :func:`schedules.building.playing_days`; when not given and a selected candidate is not in the
    line-up, the catalog's are read). Raises :class:`SelectionError` (a :class:`ScheduleError`)."""
    if catalog_ids is None:
        line_up = {str(candidate.get("id")) for candidate in document.get("candidates", []) if isinstance(candidate, Mapping)}
        catalog_ids = {}
        if not line_up.issuperset(selection.candidate_ids):
            # Every candidate of the catalog, scheduled or not ("does not play", not "unknown").
            known = Candidate.objects.filter(key__in=list(selection.candidate_ids)).values_list("key", flat=True)
            catalog_ids = {**dict.fromkeys(known, []), **playing_days(catalog_slots())}
    try:
        return select_schedule(
            document,
            candidate_ids=selection.candidate_ids,
            case_ids=selection.case_ids,
            limit=selection.limit,
            catalog_ids=catalog_ids,
        )
    except SelectionError:
        raise
    except ScheduleError as exc:
        raise SelectionError(str(exc), plays_on=exc.plays_on) from None


def unsafe_candidate_problem(candidate: Mapping[str, Any]) -> str | None:
    """Why a line-up candidate document must not run, or ``None``: a row saved around
    ``full_clean()`` (``loaddata``, ``objects.update``) whose required environment is not a list
    of variable names, or that holds secret-shaped data (still there, or already replaced by
    :data:`evalhub.secrets.REDACTION` when its schedule was built). The message names no value
    (docs/failure-modes.md B8, B12)."""
    names = candidate.get("qualification", {}).get("requiredEnvironment") if isinstance(candidate.get("qualification"), Mapping) else None
    reserved = sorted({name for name in names if isinstance(name, str) and reserved_name_reason(name)}) if isinstance(names, list) else []
    if reserved:
        return (
            f"the candidate's required environment names {', '.join(reserved)}, which evalhub never hands to a runtime "
            "under test (its own settings, loader and interpreter variables, or what the harness sets itself); "
            "remove them from the catalog, then run it again"
        )
    if env_name_errors(names, label="required environment"):
        return (
            "the candidate's required environment is not a list of environment variable names; "
            "fix it in the catalog (for example OPENAI_API_KEY), then run it again"
        )
    kinds = secret_kinds(candidate)
    if kinds or contains_redaction(candidate):
        what = f" ({', '.join(kinds)})" if kinds else ""
        return (
            f"the candidate's configuration holds secret-shaped data{what}; "
            "store environment variable names only in the catalog, then run it again"
        )
    return None


def _quarantine_unsafe_candidates(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with every secret-shaped string replaced (a schedule is stored and shown).

    A candidate saved around validation does not stop the night: it stays in the line-up (so the
    rotation and every other execution are as they would be) and only its own executions are
    refused when they run, by :func:`unsafe_candidate_problem`.
    """
    if not any(unsafe_candidate_problem(candidate) for candidate in document["candidates"]):
        return document
    return redact_data(document)


def contains_redaction(value: Any) -> bool:
    """Whether any string in ``value`` (walked through dicts and lists) holds the redaction marker."""
    if isinstance(value, str):
        return REDACTION in value
    if isinstance(value, Mapping):
        return any(contains_redaction(key) or contains_redaction(item) for key, item in value.items())
    if isinstance(value, list | tuple):
        return any(contains_redaction(item) for item in value)
    return False


def catalog_coverage(*, seed: str, slots: list[dict[str, Any]] | None = None, cases: list[dict[str, Any]] | None = None) -> dict[str, bool]:
    """The four coverage invariants of the current catalog for ``seed`` (``COVERAGE_CASE_SLOTS``
    says whether a case must meet every slot or the slots a week can reach). ``slots`` and
    ``cases``: the catalog's, when the caller has read them (:func:`catalog_slots`, :func:`catalog_cases`)."""
    reachable = evalhub_setting("COVERAGE_CASE_SLOTS") == "reachable"
    slots = catalog_slots() if slots is None else slots
    cases = catalog_cases() if cases is None else cases
    return schedule_coverage(seed=seed, slots=slots, cases=cases, reachable=reachable)


def catalog_coverage_matrix(*, seed: str) -> dict[str, list[list[str]]]:
    """For each case id, the slot ids it meets on each rotation day 0..6."""
    return coverage_matrix(seed=seed, slots=catalog_slots(), cases=catalog_cases())


def require_coverage(*, seed: str, slots: list[dict[str, Any]] | None = None, cases: list[dict[str, Any]] | None = None) -> dict[str, bool]:
    """The coverage, or :class:`CoverageError` naming each failed invariant with the arithmetic
    that breaks it (``slots`` and ``cases`` as :func:`catalog_coverage` takes them)."""
    slots = catalog_slots() if slots is None else slots
    cases = catalog_cases() if cases is None else cases
    coverage = catalog_coverage(seed=seed, slots=slots, cases=cases)
    failed = failed_invariants(coverage)
    if failed:
        raise CoverageError(failed, coverage, detail=_coverage_detail(failed, slots=slots, cases=cases))
    return coverage


def _coverage_detail(failed: list[str], *, slots: list[dict[str, Any]], cases: list[dict[str, Any]]) -> str:
    """Why the ``failed`` invariants fail, when the catalog's sizes alone say so ("" otherwise)."""
    details = []
    slot_count, case_count = len(slots), len(cases)
    if "everySlotNightly" in failed and 0 < 2 * case_count < slot_count:
        details.append(
            f"a night plays each of the {case_count} workflow case(s) against 2 slots, at most 2 × {case_count} = "
            f"{2 * case_count} slots, and the catalog has {slot_count} slots; add workflow cases or remove slots"
        )
    if "everyConcreteCandidateInRotation" in failed:
        for slot in slots:
            crowded = slot["candidates"][ROTATION_DAYS:]
            if crowded:
                details.append(
                    f"slot {slot['id']} has {len(slot['candidates'])} candidates, but a slot plays one candidate a rotation day "
                    f"and the rotation has {ROTATION_DAYS} days, so {', '.join(str(c['id']) for c in crowded)} "
                    f"{'is' if len(crowded) == 1 else 'are'} never played; "
                    f"keep at most {ROTATION_DAYS} candidates in a slot (move the others to another slot or remove them)"
                )
    reachable = evalhub_setting("COVERAGE_CASE_SLOTS") == "reachable"
    if "everyWorkflowCoversEverySlot" in failed and slot_count > SLOTS_A_CASE_MEETS_A_WEEK and not reachable:
        details.append(
            f"a workflow case meets 2 slots a night, at most 2 × 7 = {SLOTS_A_CASE_MEETS_A_WEEK} in a week, and the "
            f"catalog has {slot_count} slots, so no week can cover every slot; use at most {SLOTS_A_CASE_MEETS_A_WEEK} "
            f"slots, or set EVALHUB_COVERAGE_CASE_SLOTS=reachable (each case must then meet {SLOTS_A_CASE_MEETS_A_WEEK} "
            "distinct slots a week)"
        )
    return "; ".join(details)


def coverage_warning(*, seed: str) -> str | None:
    """What an editor must hear after changing the catalog when the week's coverage no longer
    holds for ``seed`` (one coverage computation), or ``None`` when it holds: the failed
    invariants, their arithmetic, and that every nightly is refused until the catalog is fixed
    (``nightly`` calls :func:`require_coverage` before it builds anything)."""
    try:
        require_coverage(seed=seed)
    except CoverageError as exc:
        problem = str(exc)
    except ScheduleError as exc:
        problem = f"the week's schedules cannot be built: {exc}"
    else:
        return None
    return (
        f"{redact(problem)}. Every nightly (seed {seed}) will be refused until the catalog meets all four coverage "
        "invariants again; the coverage page shows the gap."
    )


def save_schedule(document: Mapping[str, Any], *, night: dt.date, versions: Mapping[str, int] | None = None) -> tuple[Schedule, bool]:
    """Store a full schedule document for ``night``; one per (seed, rotation day, night).

    Returns ``(schedule, created)``. When that night's schedule already exists it is returned
    unchanged (building tonight twice gives back the same schedule), even when two processes
    race: the unique constraint decides and the loser reads the winner's row. ``versions``: each
    workflow case's version by id, when the caller read the cases the document was built from.
    """
    key = {"seed": document["seed"], "rotation_day": document["rotationDay"], "night": night}
    existing = Schedule.objects.filter(**key).first()
    if existing is not None:
        return existing, False
    candidates = {candidate["id"]: candidate for candidate in document["candidates"]}
    if versions is None:
        versions = dict(WorkflowCase.objects.values_list("key", "version"))
    try:
        with transaction.atomic():
            schedule = Schedule.objects.create(
                **key,
                generated_at=document["generatedAt"],
                candidates=document["candidates"],
                expected_executions=document["expectedExecutions"],
            )
            ScheduleEntry.objects.bulk_create(
                ScheduleEntry(
                    schedule=schedule,
                    position=position,
                    execution_id=entry["executionId"],
                    case_key=entry["caseId"],
                    case_version=versions.get(entry["caseId"], 1),
                    candidate_key=entry["candidateId"],
                    slot_key=entry["slotId"],
                    repetition=entry["repetition"],
                    candidate=candidates[entry["candidateId"]],
                    budget=entry["budget"],
                )
                for position, entry in enumerate(document["entries"])
            )
    except IntegrityError:
        return Schedule.objects.get(**key), False
    return schedule, True


def schedule_for_night(*, seed: str, now: dt.datetime, rotation_day: Any = None, generated_at: str | None = None) -> tuple[Schedule, bool]:
    """Build (after the coverage check) and save the schedule for ``now``'s UTC night.

    Raises :class:`CoverageError` when coverage fails and :class:`ScheduleError` for bad input.
    """
    # The catalog is read once, for the coverage, the build and the entries' case versions.
    slots = catalog_slots()
    rows = list(WorkflowCase.objects.order_by("position", "id"))
    cases = [row.to_document() for row in rows]
    require_coverage(seed=seed, slots=slots, cases=cases)
    document = preview_schedule(seed=seed, now=now, rotation_day=rotation_day, generated_at=generated_at, slots=slots, cases=cases)
    night = parse_timestamp(document["generatedAt"]).date() if generated_at else now.astimezone(dt.UTC).date()
    return save_schedule(document, night=night, versions={row.key: row.version for row in rows})


def load_cases(documents: Sequence[Mapping[str, Any]], *, prompts: Mapping[str, str] | None = None) -> int:
    """Create or update workflow cases by id, in the given catalog order; returns how many were created.

    ``prompts`` maps case ids to their task prompts (``case-prompts.json``); a case it does not
    name keeps its prompt (a new one gets none). A case whose steps, assertions or prompt change
    gets its ``version`` bumped (schedule entries keep the version they were built with). Cases
    not in ``documents`` are left alone. Every row goes through ``full_clean()``; a
    ``ValidationError`` rolls the whole load back; so does a prompt for a case that neither
    ``documents`` nor the catalog holds, or a prompt that is not text.
    """
    prompts = prompts or {}
    created = 0
    with transaction.atomic():
        existing = {case.key: case for case in WorkflowCase.objects.all()}
        unknown = sorted(set(prompts) - {document["id"] for document in documents} - set(existing))
        if unknown:
            raise ValidationError({"prompt": [f"Prompts given for unknown workflow cases: {', '.join(unknown)}."]})
        not_text = sorted(key for key, prompt in prompts.items() if not isinstance(prompt, str))
        if not_text:
            raise ValidationError({"prompt": [f"Prompts must be text; not for: {', '.join(not_text)}."]})
        WorkflowCase.objects.update(position=F("position") + REORDER_OFFSET)
        for position, document in enumerate(documents):
            case = existing.get(document["id"]) or WorkflowCase(key=document["id"])
            scenario = {"steps": document["steps"], "assertions": document.get("assertions", {})}
            if document["id"] in prompts:
                scenario["prompt"] = prompts[document["id"]]
            if case.pk is not None and case.changes_version(scenario):
                case.version += 1
            created += case.pk is None
            case.title = document["title"]
            case.tags = list(document.get("tags", []))
            case.providers = list(document["providers"])
            case.steps = document["steps"]
            case.assertions = document.get("assertions", {})
            case.prompt = scenario.get("prompt", case.prompt)
            case.repetitions = document.get("repetitions", 1)
            case.position = position
            case.full_clean(validate_constraints=False)
            case.save()
        _compact_positions(WorkflowCase)
    return created


def load_chaos_scenarios(documents: Sequence[Mapping[str, Any]]) -> int:
    """Create or update chaos scenarios by id; returns how many were created."""
    created = 0
    with transaction.atomic():
        existing = {scenario.key: scenario for scenario in ChaosScenario.objects.all()}
        ChaosScenario.objects.update(position=F("position") + REORDER_OFFSET)
        for position, document in enumerate(documents):
            scenario = existing.get(document["id"]) or ChaosScenario(key=document["id"])
            created += scenario.pk is None
            scenario.lane = document.get("lane", "chaos")
            scenario.fault = document["fault"]
            scenario.expected_invariant = document["expectedInvariant"]
            scenario.position = position
            scenario.full_clean(validate_constraints=False)
            scenario.save()
        _compact_positions(ChaosScenario)
    return created


def _compact_positions(model) -> None:
    """Renumber rows left above the reorder offset (cases not in the loaded list) after the loaded ones."""
    rows = list(model.objects.filter(position__gte=REORDER_OFFSET).order_by("position"))
    if not rows:
        return
    start = (model.objects.filter(position__lt=REORDER_OFFSET).order_by("-position").values_list("position", flat=True).first() or 0) + 1
    for offset, row in enumerate(rows):
        row.position = start + offset
        row.save(update_fields=["position"])


def campaign_ceiling() -> Decimal:
    """The configured campaign cost ceiling (USD); the default when the setting is invalid
    (``manage.py check`` reports that one, and the nightly refuses to start)."""
    try:
        return parse_campaign_cost_limit(evalhub_setting("MAX_CAMPAIGN_COST_USD"))
    except ValueError:
        return DEFAULT_CAMPAIGN_COST_LIMIT_USD
