"""The server-rendered pages (namespace ``pages``); every one needs sign-in."""

from django.urls import path

from candidates.views import candidate_view, candidates_view
from runs.views import (
    alerts_view,
    compare_view,
    execution_detail_view,
    execution_trace_view,
    run_detail_view,
    run_export_view,
    run_history_view,
)
from schedules.views import coverage_view, tonight_view

app_name = "pages"
urlpatterns = [
    path("", run_history_view, name="runs"),
    path("runs/<int:pk>/", run_detail_view, name="run"),
    path("runs/<int:pk>/export/<str:fmt>/", run_export_view, name="run-export"),
    path("executions/<int:pk>/", execution_detail_view, name="execution"),
    path("executions/<int:pk>/trace/<int:attempt>/", execution_trace_view, name="execution-trace"),
    path("compare/", compare_view, name="compare"),
    path("alerts/", alerts_view, name="alerts"),
    path("tonight/", tonight_view, name="tonight"),
    path("coverage/", coverage_view, name="coverage"),
    path("candidates/", candidates_view, name="candidates"),
    path("candidates/<str:key>/", candidate_view, name="candidate"),
]
