"""``manage.py chaos [SCENARIO ...]``: run the chaos lane and report each invariant."""

from __future__ import annotations

from django.core.management.base import CommandError

from evalhub.commands import DatabaseCommand
from runs.chaos import ChaosError, run_chaos_lane


class Command(DatabaseCommand):
    help = (
        "Inject each chaos scenario's fault (all eight, or those named by id or fault: restart, duplicate_delivery, "
        "trace_interruption, trace_truncation, stale_checkpoint, retry_exhaustion, interaction_timeout, wake_race) "
        "into evalhub's own pipeline and check its invariant. The results are a chaos-lane run (never history); "
        "the exit status is non-zero when an invariant failed."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("scenarios", nargs="*", help="Scenario ids (chaos-restart) or faults (restart); all when omitted.")

    def handle(self, *args, **options) -> None:
        # The injected faults make evalhub log what it logs for real ones (a trace not stored, a
        # late result): said first, so a warning naming a run the pages no longer show is not
        # taken for a failure of the lane.
        self.stderr.write(
            "each scenario runs in a scratch chaos-lane run of its own, deleted afterwards: "
            "warnings below that name such a run are its injected fault at work"
        )
        try:
            run = run_chaos_lane(keys=options["scenarios"])
        except ChaosError as exc:
            raise CommandError(str(exc)) from None
        failed = 0
        for execution in run.executions.order_by("position"):
            document = execution.chaos or {}
            held = bool(document.get("held"))
            failed += not held
            self.stdout.write(f"{'held  ' if held else 'FAILED'} {document.get('scenario')}: {document.get('expectedInvariant')}")
            for check in document.get("checks", []):
                if not check.get("held"):
                    self.stdout.write(f"       ✗ {check['check']}: expected {check['expected']!r}, got {check['actual']!r}")
        total = run.executions.count()
        self.stdout.write(f"chaos run {run.pk}: {total - failed} of {total} invariants held")
        if failed:
            raise CommandError(f"{failed} chaos invariant(s) failed; see chaos run {run.pk}")
