"""``manage.py nightly``: build tonight's schedule, check coverage, save it, and with --execute run it.

Exit statuses, for CI (README "Exit statuses"): 0 when the schedule was saved and the run (if any)
finished; :data:`EXIT_REFUSED` when the night was refused (coverage fails, the schedule cannot be
built); with ``--fail-on``, :data:`EXIT_INFRASTRUCTURE`, :data:`EXIT_CANDIDATE` or
:data:`EXIT_ALERTS` or :data:`EXIT_UNMEASURED` — the first that applies, in that order; :data:`EXIT_UNFINISHED` when the run
ended without finishing (failed or cancelled); :data:`EXIT_IN_PROGRESS` when another process is
executing tonight's nightly; 1 for bad flags or configuration; 130 when
interrupted.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from typing import Any

from django.core.management.base import CommandError
from django.utils import timezone
from redis.exceptions import RedisError
from tqdm import tqdm

from evalhub.commands import DatabaseCommand
from evalhub.jsnum import json_number
from evalhub.secrets import redact
from runs.actions import RunActionError
from runs.creation import RunSummary
from runs.models import RunStatus
from runs.nightly import start_nightly
from runs.recovery import recover_before_executing
from schedules.building import ScheduleError, parse_timestamp, validate_rotation_day
from schedules.cli import add_selector_arguments, cost_ceiling, schedule_error_message, seed_from_options, selection_from_options
from schedules.services import CoverageError, SelectionError, apply_selection

#: The night was refused: coverage fails or the schedule cannot be built; nothing ran.
EXIT_REFUSED = 3
#: ``--fail-on infrastructure``: some execution was an infrastructure failure.
EXIT_INFRASTRUCTURE = 4
#: ``--fail-on candidate``: some scoreable execution did not pass.
EXIT_CANDIDATE = 5
#: ``--fail-on alerts``: the run's report raised alerts.
EXIT_ALERTS = 6
#: The run ended without finishing (failed, cancelled): its counts are not a night's.
EXIT_UNFINISHED = 7
#: ``--fail-on unmeasured``: the run finished with nothing scoreable (every execution skipped):
#: a 0/0 night measured nothing, and CI must not read it as green.
EXIT_UNMEASURED = 8
#: Tonight's nightly is being executed by another process (another delivery, another machine):
#: nothing ran here and its counts are not final — not a failure of the run.
EXIT_IN_PROGRESS = 9
#: The oldest night ``--execute`` or ``--queue`` runs (README "nightly"): a run of an older one
#: would enter the history and the leaderboard as a measurement of that night, made with
#: today's runtimes and models. Building and saving (previewing) an older night stays allowed.
OLDEST_EXECUTED_NIGHT = dt.timedelta(days=366)
#: What ``--fail-on`` accepts, in the order they are checked.
FAIL_ON = {"infrastructure": EXIT_INFRASTRUCTURE, "candidate": EXIT_CANDIDATE, "alerts": EXIT_ALERTS, "unmeasured": EXIT_UNMEASURED}


def fail_on_choices(value: str) -> set[str]:
    """``--fail-on`` values: a comma list of :data:`FAIL_ON` names, or ``any`` for all of them."""
    names = {part.strip() for part in value.split(",") if part.strip()}
    unknown = sorted(names - set(FAIL_ON) - {"any"})
    if unknown or not names:
        raise CommandError(f"--fail-on takes {', '.join(FAIL_ON)} or any (a comma list), not {value!r}")
    return set(FAIL_ON) if "any" in names else names


def exit_status(summary: RunSummary, fail_on: set[str]) -> int:
    """The exit status a finished run's ``summary`` gives under ``fail_on`` (see the module)."""
    if summary.status != RunStatus.FINISHED:
        return EXIT_UNFINISHED
    counts = summary.by_classification
    failing = {
        "infrastructure": counts.get("infrastructure_failure", 0) > 0,
        "candidate": (summary.scoreable or 0) > (summary.passed or 0)
        if summary.scoreable is not None
        else counts.get("candidate_failure", 0) > 0,
        "alerts": bool(summary.alerts),
        "unmeasured": not summary.scoreable,
    }
    for name, status in FAIL_ON.items():
        if name in fail_on and failing[name]:
            return status
    return 0


def summary_document(summary: RunSummary) -> dict[str, Any]:
    """A run's summary as JSON (``--json``): counts, USD as numbers, and the report's figures
    (``null`` until the run is reported)."""
    return {
        "id": summary.run_id,
        "status": summary.status,
        "executions": summary.executions,
        "byClassification": dict(sorted(summary.by_classification.items())),
        "byFailureCode": dict(sorted(summary.by_failure_code.items())),
        "spentUsd": json_number(summary.spent_usd),
        "costCeilingUsd": json_number(summary.cost_ceiling_usd),
        "hasUnpriced": summary.has_unpriced,
        "stoppedAtCeiling": summary.stopped_at_ceiling,
        "scoreable": summary.scoreable,
        "passed": summary.passed,
        "alerts": summary.alerts,
    }


def missing_variables(candidates, environ) -> list[str]:
    """The required variable names of these candidate documents that are unset or empty, sorted."""
    names = {name for candidate in candidates for name in candidate.get("qualification", {}).get("requiredEnvironment", [])}
    return sorted(name for name in names if not environ.get(name))


def run_candidates(run, candidates) -> list:
    """The candidate documents among ``candidates`` (a schedule's) that ``run`` executes."""
    in_run = set(run.executions.values_list("candidate_key", flat=True))
    return [candidate for candidate in candidates if candidate["id"] in in_run]


def missing_credentials_hint(run, candidates, environ) -> tuple[list[str], str]:
    """The required variables of ``run``'s candidates (among the schedule's ``candidates``) unset
    in ``environ``, and the line that says to set them (``""`` when none is missing)."""
    missing = missing_variables(run_candidates(run, candidates), environ)
    if not missing:
        return missing, ""
    return missing, (
        "skipped executions need provider credentials: set "
        + ", ".join(missing)
        + " in the environment (only names are configured; values are never stored)"
    )


class Command(DatabaseCommand):
    help = (
        "Build tonight's schedule, refuse it when coverage fails, save it, and with --execute run every entry "
        "(a progress bar, then a one-line summary)."
    )

    def add_arguments(self, parser) -> None:
        add_selector_arguments(parser)
        parser.add_argument("--execute", action="store_true", help="Run the entries (without it, only build and save).")
        parser.add_argument("--no-progress", action="store_true", help="No progress bar (the summary is still printed).")
        parser.add_argument(
            "--queue",
            action="store_true",
            help="With --execute: queue one task per execution for the django-q2 workers instead of running them here.",
        )
        parser.add_argument("--json", action="store_true", help="Print the outcome as one JSON document on stdout (for CI).")
        parser.add_argument(
            "--fail-on",
            default=None,
            metavar="WHAT",
            help="Exit non-zero when the run has infrastructure failures (4), candidate failures (5) or alerts (6): "
            "a comma list of infrastructure, candidate, alerts, unmeasured, or any.",
        )

    def handle(self, *args, **options) -> None:
        fail_on = fail_on_choices(options["fail_on"]) if options["fail_on"] is not None else set()
        selection = selection_from_options(options)
        ceiling = cost_ceiling()
        as_json = options["json"]
        # Bad flags exit 1 before anything is built; EXIT_REFUSED is for a night the catalog refuses.
        try:
            if options["rotation_day"] is not None:
                validate_rotation_day(options["rotation_day"])
            if options["generated_at"] is not None:
                night = parse_timestamp(options["generated_at"])
                # A night that has not begun has nothing to measure yet: executed, it would enter the
                # history and the leaderboard ahead of the nights before it.
                if (options["execute"] or options["queue"]) and night > timezone.now():
                    raise ScheduleError(
                        f"--generated-at {options['generated_at']} is in the future: only a night that has begun can be "
                        "executed or queued; preview a later night without --execute or --queue"
                    )
                if (options["execute"] or options["queue"]) and night < timezone.now() - OLDEST_EXECUTED_NIGHT:
                    raise ScheduleError(
                        f"--generated-at {options['generated_at']} is more than {OLDEST_EXECUTED_NIGHT.days} days ago: a night "
                        "that old is not executed or queued (its run would count as that night's measurement, made with "
                        "today's runtimes); preview it without --execute or --queue"
                    )
        except ScheduleError as exc:
            self._bad_flags(redact(str(exc)), as_json)
        bar = None
        lines: list[str] = []
        say = lines.append if as_json else self.stdout.write

        def progress(done: int, total: int, execution) -> None:
            nonlocal bar
            if options["no_progress"]:
                return
            if bar is None:
                # disable=None: no bar when stderr is not a terminal (a CI log, a pipe).
                bar = tqdm(total=total, desc="executions", unit="exec", file=sys.stderr, leave=True, disable=None)
            bar.set_postfix_str(f"{execution.case_key} × {execution.candidate_key}", refresh=False)
            bar.update(1)

        try:
            if options["execute"] and not options["queue"]:
                recover_before_executing(environ=os.environ)  # what a killed `nightly --execute` left
            outcome = start_nightly(
                seed=seed_from_options(options),
                cost_ceiling_usd=ceiling,
                now=timezone.now(),
                environ=os.environ,
                execute=options["execute"],
                rotation_day=options["rotation_day"],
                generated_at=options["generated_at"],
                selection=selection,
                progress=progress,
                dispatch=options["queue"],
            )
        except CoverageError as exc:
            self._refuse(
                f"{exc}. The catalog's seven rotation days must meet all four invariants before a nightly may run; "
                "see the coverage page or `manage.py schedule` to find the gap.",
                as_json,
            )
        except SelectionError as exc:
            self._bad_flags(schedule_error_message(exc), as_json)
        except RunActionError as exc:  # the same selection is already being executed
            self._refuse(str(exc), as_json)
        except ScheduleError as exc:
            self._refuse(schedule_error_message(exc), as_json)
        except RedisError as exc:  # --queue with Redis down: the run is saved, its executions pending
            message = redact(
                f"the task broker (REDIS_URL) cannot be reached ({type(exc).__name__}: {exc}): tonight's run is saved with its "
                "executions pending; once Redis answers, a worker's reaper queues them again (`manage.py worker`)"
            )
            if as_json:
                self.stdout.write(json.dumps({"error": message, "exitStatus": 1}))
            raise CommandError(message) from None
        finally:
            if bar is not None:
                bar.close()
        schedule = outcome.schedule
        document: dict[str, Any] = {
            "schedule": {
                "id": schedule.pk,
                "night": schedule.night.isoformat(),
                "rotationDay": schedule.rotation_day,
                "seed": schedule.seed,
                "expectedExecutions": schedule.expected_executions,
                "created": outcome.schedule_created,
            },
            "run": None,
            "executed": outcome.executed,
            "queued": bool(options["queue"] and outcome.executed),
            "missingEnvironment": [],
        }
        verb = "saved" if outcome.schedule_created else "already saved"
        say(
            f"schedule {schedule.pk} {verb}: night {schedule.night}, rotation day {schedule.rotation_day}, "
            f"seed {schedule.seed}, {schedule.expected_executions} executions"
        )
        status = 0
        if outcome.run is None:
            if not selection.is_empty:
                selected = apply_selection(schedule.to_document(), selection)
                say(
                    f"selection: {selected['expectedExecutions']} of {schedule.expected_executions} executions "
                    "(with --execute they run as a manual run beside the night's nightly)"
                )
            say("not executed (add --execute to run it)")
        elif options["queue"] and outcome.executed:
            document["run"] = summary_document(outcome.summary)
            say(
                f"run {outcome.run.pk}: {outcome.summary.executions} execution(s) queued for the workers (start one with `manage.py worker`)"
            )
        else:
            if not outcome.executed:
                say(f"tonight's nightly was already delivered as run {outcome.run.pk}: nothing executed, nothing spent")
            if outcome.summary.by_failure_code.get("qualification_environment_missing"):
                missing, hint = missing_credentials_hint(outcome.run, schedule.candidates, os.environ)
                document["missingEnvironment"] = missing
                if hint:
                    say(hint)
            say(outcome.summary.line())
            document["run"] = summary_document(outcome.summary)
            status = exit_status(outcome.summary, fail_on)
            if not outcome.executed and outcome.summary.status in (RunStatus.PENDING, RunStatus.RUNNING):
                status = EXIT_IN_PROGRESS
        document["exitStatus"] = status
        if as_json:
            self.stdout.write(json.dumps(document))
        if status:
            reasons = {
                EXIT_INFRASTRUCTURE: "--fail-on infrastructure: some executions are infrastructure failures",
                EXIT_CANDIDATE: "--fail-on candidate: some scoreable executions did not pass",
                EXIT_ALERTS: "--fail-on alerts: the run's report raised alerts",
                EXIT_UNMEASURED: "--fail-on unmeasured: no execution was scoreable (all skipped): the night measured nothing",
                EXIT_UNFINISHED: f"run {document['run']['id']} ended {document['run']['status']}, not finished: see its page for why",
                EXIT_IN_PROGRESS: f"run {document['run']['id']} is still {document['run']['status']} in another process: "
                "nothing ran here; its counts are not final (see its page, or wait and run this again)",
            }
            raise CommandError(reasons[status], returncode=status)

    def _bad_flags(self, message: str, as_json: bool) -> None:
        """Stop with exit status 1: a flag is at fault; with ``--json`` the reason is also the stdout document."""
        if as_json:
            self.stdout.write(json.dumps({"error": message, "exitStatus": 1}))
        raise CommandError(message)

    def _refuse(self, message: str, as_json: bool) -> None:
        """Stop with :data:`EXIT_REFUSED`; with ``--json`` the reason is also the stdout document."""
        if as_json:
            self.stdout.write(json.dumps({"refused": message, "exitStatus": EXIT_REFUSED}))
        raise CommandError(message, returncode=EXIT_REFUSED)
