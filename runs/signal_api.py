"""``GET /api/signal/``: the heat map's data — every case × candidate of one bundle over its newest
measured nights, with pass@k, pass^k, the Wilson interval, the flaky flag and significant changes
(docs/signal.md) — and what moved since the bundle's previous night."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evalhub.api.params import WholeNumberParam, reject_unknown_params
from evalhub.api.views import ApiViewMixin
from runs.evaluation.signal import CHANGE_VERDICTS, VERDICTS, Signal, Window
from runs.models import CHAOS_RUN, Run, RunLane
from runs.signal import BundleSignal, Cell, bundle_signal, latest_history_report, night_changes, not_a_history

RUN_PARAM = WholeNumberParam(
    "run",
    description="The history as of this run (its bundle, up to its report); default: the newest measured night.",
    message="Give a run id: 1, 2, ...",
)


class SignalWindowSerializer(serializers.Serializer):
    nights = serializers.IntegerField()
    passed = serializers.IntegerField()
    trials = serializers.IntegerField()
    rate = serializers.FloatField(allow_null=True, help_text="passed / trials, in [0, 1].")
    interval = serializers.ListField(child=serializers.FloatField(), allow_null=True, help_text="The 95% Wilson interval [low, high].")


class SignalCellSerializer(serializers.Serializer):
    passed = serializers.IntegerField()
    trials = serializers.IntegerField()


class PairSignalSerializer(serializers.Serializer):
    verdict = serializers.ChoiceField(choices=VERDICTS)
    tested = serializers.BooleanField(help_text="Both windows were full, so the exact test was made.")
    reason = serializers.CharField(help_text="Why it was not tested; blank when it was.")
    overall = SignalWindowSerializer(help_text="The assessed nights pooled (recent and baseline).")
    recent = SignalWindowSerializer(allow_null=True)
    baseline = SignalWindowSerializer(allow_null=True)
    k = serializers.IntegerField(help_text="Repetitions a night (the most any assessed night had).")
    passAtK = serializers.FloatField(source="pass_at_k", allow_null=True, help_text="Estimated chance that at least one of k passes.")
    passHatK = serializers.FloatField(source="pass_hat_k", allow_null=True, help_text="Estimated chance that all k pass (pass^k).")
    nightsAllPassed = serializers.IntegerField(source="nights_all_passed")
    varies = serializers.BooleanField(help_text="Outcomes varied within a night or across nights.")
    mixedNights = serializers.IntegerField(source="mixed_nights", help_text="Nights that mixed passes and failures.")
    effect = serializers.FloatField(allow_null=True, help_text="Recent rate minus baseline rate (a fraction; negative: a drop).")
    pValue = serializers.FloatField(
        source="p_value", allow_null=True, help_text="One-sided exact test (Boschloo) in the effect's direction."
    )
    dispersionP = serializers.FloatField(source="dispersion_p", allow_null=True, help_text="Nights clustering beyond binomial chance.")


def _window(window: Window | None) -> dict[str, Any] | None:
    if window is None:
        return None
    return {"nights": window.nights, "passed": window.passed, "trials": window.trials, "rate": window.rate, "interval": window.interval}


def _cell(cell: Cell | None) -> dict[str, int] | None:
    return None if cell is None else {"passed": cell.passed, "trials": cell.trials}


def _signal(signal: Signal) -> dict[str, Any]:
    return {
        "verdict": signal.verdict,
        "tested": signal.tested,
        "reason": signal.reason,
        "overall": _window(signal.overall),
        "recent": _window(signal.recent),
        "baseline": _window(signal.baseline),
        "k": signal.k,
        "passAtK": signal.pass_at_k,
        "passHatK": signal.pass_hat_k,
        "nightsAllPassed": signal.nights_all_passed,
        "varies": signal.varies,
        "mixedNights": signal.mixed_nights,
        "effect": signal.effect,
        "pValue": signal.p_value,
        "dispersionP": signal.dispersion_p,
    }


def signal_document(signal: BundleSignal) -> dict[str, Any]:
    """The endpoint's body for ``signal`` (the shape its schema documents)."""
    return {
        "bundleId": signal.bundle_id,
        "scoringVersion": signal.scoring_version,
        "runId": signal.run_id,
        "reportId": signal.report_id,
        "windows": {
            "recentNights": signal.config.recent_nights,
            "baselineNights": signal.config.baseline_nights,
            "alpha": signal.config.alpha,
        },
        "nights": [{"runId": night.run_id, "reportId": night.report_id, "night": night.night.isoformat()} for night in signal.nights],
        "counts": signal.counts(),
        "rows": [
            {
                "caseId": row.case_key,
                "candidateId": row.candidate_key,
                "caseVersion": row.case_version,
                "cells": [_cell(cell) for cell in row.cells],
                "signal": _signal(row.signal),
            }
            for row in signal.rows
        ],
        "changes": [
            {
                "caseId": change.history.case_key,
                "candidateId": change.history.candidate_key,
                "direction": change.direction,
                "verdict": change.verdict,
                "previous": _cell(change.previous),
                "current": _cell(change.current),
            }
            for change in night_changes(signal)
        ],
    }


SIGNAL_RESPONSE = inline_serializer(
    "Signal",
    {
        "bundleId": serializers.CharField(),
        "scoringVersion": serializers.CharField(),
        "runId": serializers.IntegerField(help_text="The run the history is as of (its newest night)."),
        "reportId": serializers.IntegerField(),
        "windows": inline_serializer(
            "SignalWindows",
            {"recentNights": serializers.IntegerField(), "baselineNights": serializers.IntegerField(), "alpha": serializers.FloatField()},
        ),
        "nights": inline_serializer(
            "SignalNight",
            {"runId": serializers.IntegerField(), "reportId": serializers.IntegerField(), "night": serializers.DateField()},
            many=True,
        ),
        "counts": inline_serializer("SignalCounts", {verdict: serializers.IntegerField() for verdict in VERDICTS}),
        "rows": inline_serializer(
            "SignalRow",
            {
                "caseId": serializers.CharField(),
                "candidateId": serializers.CharField(),
                "caseVersion": serializers.IntegerField(),
                "cells": serializers.ListField(
                    child=SignalCellSerializer(allow_null=True),
                    help_text="One per night, in the order of nights; null: not scored that night.",
                ),
                "signal": PairSignalSerializer(),
            },
            many=True,
        ),
        "changes": inline_serializer(
            "SignalChange",
            {
                "caseId": serializers.CharField(),
                "candidateId": serializers.CharField(),
                "direction": serializers.ChoiceField(choices=["regression", "improvement"]),
                "verdict": serializers.ChoiceField(choices=CHANGE_VERDICTS),
                "previous": SignalCellSerializer(),
                "current": SignalCellSerializer(),
            },
            many=True,
        ),
    },
)


class SignalView(ApiViewMixin, APIView):
    """``GET /api/signal/?run=<id>``: the signal across nights of the run's bundle as of its report
    (default: the newest measured night). 400 for a bad or unknown parameter or a run that is not
    history (no report, a refresh, a scripted run, a re-run); 404 for a run that does not exist or
    when nothing was measured yet."""

    @extend_schema(
        operation_id="signal",
        parameters=[RUN_PARAM.openapi],
        responses={
            200: SIGNAL_RESPONSE,
            400: OpenApiResponse(description='{"run": ["..."]} or {"detail": "..."}: a bad parameter, or a run that is not history.'),
            404: OpenApiResponse(description="The run does not exist, or nothing was measured yet."),
        },
    )
    def get(self, request: Request) -> Response:
        reject_unknown_params(request, (RUN_PARAM.name,))
        run_id = RUN_PARAM.parse(request)
        report = latest_history_report(run_id=run_id)
        if report is None:
            if run_id is None:
                raise exceptions.NotFound("Nothing was measured yet: no live report to read a history from.")
            lane = Run.objects.filter(pk=run_id).values_list("lane", flat=True).first()
            if lane is None:
                raise exceptions.NotFound(f"There is no run {run_id}.")
            if lane == RunLane.CHAOS:
                raise exceptions.ValidationError({"detail": f"Run {run_id} is {CHAOS_RUN}, so it has no history."})
            raise exceptions.ValidationError({"detail": f"Run {run_id} has no report yet, so it has no history."})
        if reason := not_a_history(report):
            raise exceptions.ValidationError({"detail": f"Run {report.run_id} is {reason}: it has no history."})
        signal = bundle_signal(report)
        assert signal is not None  # not_a_history said it is one
        return Response(signal_document(signal))
