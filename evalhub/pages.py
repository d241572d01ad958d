"""The server-rendered pages (namespace ``pages``); every one needs sign-in."""

from django.urls import path

from candidates.views import candidates_view
from runs.views import run_detail_view, run_history_view
from schedules.views import coverage_view, tonight_view

app_name = "pages"
urlpatterns = [
    path("", run_history_view, name="runs"),
    path("runs/<int:pk>/", run_detail_view, name="run"),
    path("tonight/", tonight_view, name="tonight"),
    path("coverage/", coverage_view, name="coverage"),
    path("candidates/", candidates_view, name="candidates"),
]
