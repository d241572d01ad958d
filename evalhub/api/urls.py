"""The REST API under ``/api/``: the catalog (read, staff write), schedules, coverage, runs, executions,
scorecards, reports, alerts and comparisons; scoring observations without storing them."""

from __future__ import annotations

from django.urls import path
from rest_framework.routers import DefaultRouter

from candidates.api import BudgetViewSet, CandidateViewSet, SlotViewSet
from runs.api import (
    AlertViewSet,
    ComparisonView,
    ExecutionViewSet,
    ReportViewSet,
    RunViewSet,
    ScorecardViewSet,
    ScoreView,
)
from schedules.api import ChaosScenarioViewSet, CoverageView, ScheduleViewSet, SchedulePreviewView, WorkflowCaseViewSet


class ApiRouter(DefaultRouter):
    """The default router (with the browsable API root) without ``.json`` format-suffix routes:
    ids may contain dots ("gpt-5.6"), and a suffix route would read them as a format."""

    include_format_suffixes = False


router = ApiRouter()
router.register("slots", SlotViewSet, basename="slot")
router.register("candidates", CandidateViewSet, basename="candidate")
router.register("budgets", BudgetViewSet, basename="budget")
router.register("cases", WorkflowCaseViewSet, basename="case")
router.register("chaos-scenarios", ChaosScenarioViewSet, basename="chaos-scenario")
router.register("schedules", ScheduleViewSet, basename="schedule")
router.register("runs", RunViewSet, basename="run")
router.register("executions", ExecutionViewSet, basename="execution")
router.register("scorecards", ScorecardViewSet, basename="scorecard")
router.register("reports", ReportViewSet, basename="report")
router.register("alerts", AlertViewSet, basename="alert")

urlpatterns = [
    # Before the router, so "preview" is never read as a schedule id.
    path("schedules/preview/", SchedulePreviewView.as_view(), name="schedule-preview"),
    path("coverage/", CoverageView.as_view(), name="coverage"),
    path("comparisons/", ComparisonView.as_view(), name="comparison"),
    path("score/", ScoreView.as_view(), name="score"),
    *router.urls,
]
