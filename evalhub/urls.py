"""evalhub's URLs: the admin, the REST API with its OpenAPI schema, and the server-rendered pages.

The project level of the import stack (docs/DESIGN.md): the only module besides ``evalhub.checks`` that
imports every app, so each app's views stay where they belong and nothing below routes upward.
"""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

from candidates.api import BudgetViewSet
from evalhub.signin import SignInForm
from runs.api import (
    AlertViewSet,
    ComparisonView,
    ExecutionViewSet,
    LeaderboardView,
    ReportViewSet,
    RunViewSet,
    ScorecardViewSet,
    ScoreView,
)
from runs.health import CHECKS as HEALTH_CHECKS
from runs.health import HealthView
from runs.signal_api import SignalView
from runs.views import (
    alerts_view,
    candidate_view,
    compare_view,
    execution_detail_view,
    execution_trace_view,
    leaderboard_view,
    run_detail_view,
    run_export_view,
    run_history_view,
    run_progress_view,
    signal_view,
)
from schedules.api import (
    ChaosScenarioViewSet,
    CoverageCheckedCandidateViewSet,
    CoverageCheckedSlotViewSet,
    CoverageView,
    SchedulePreviewView,
    ScheduleViewSet,
    TonightView,
    WorkflowCaseViewSet,
)
from schedules.views import candidates_view, coverage_view, tonight_view

# The admin's pages need the width of a 1366 px window for their lists (the candidate list with its
# filters); the app list is one click away on the admin's home page.
admin.site.enable_nav_sidebar = False


# The docstring is plain text, one sentence a line: the browsable API prints it as written (no
# Markdown package is installed), each line break a <br>, backticks as backticks.
class ApiRootView(DefaultRouter.APIRootView):
    """evalhub's REST API: the catalog, schedules, coverage, runs, executions, scorecards, reports, alerts and comparisons.
    Sign in (the browsable API's "Log in") or send the header "Authorization: Token <token>" (tokens: manage.py api_token create USER, or the admin).
    Every endpoint, its parameters and its errors: the OpenAPI schema ("schema") and its readable docs ("docs")."""


class ApiRouter(DefaultRouter):
    """The default router (with the browsable API root) without ``.json`` format-suffix routes:
    ids may contain dots ("gpt-5.6"), and a suffix route would read them as a format. The API
    root lists the endpoints outside the router too (``extra_root``: name → URL name)."""

    include_format_suffixes = False
    APIRootView = ApiRootView
    extra_root = {
        "tonight": "tonight",
        "schedules/preview": "schedule-preview",
        "coverage": "coverage",
        "comparisons": "comparison",
        "leaderboard": "leaderboard",
        "signal": "signal",
        "score": "score",
        "schema": "api-schema",
        "docs": "api-docs",
    }

    def get_api_root_view(self, api_urls=None):
        list_name = self.routes[0].name
        api_root_dict = {prefix: list_name.format(basename=basename) for prefix, _viewset, basename in self.registry}
        return self.APIRootView.as_view(api_root_dict={**api_root_dict, **self.extra_root})


router = ApiRouter()
router.register("slots", CoverageCheckedSlotViewSet, basename="slot")
router.register("candidates", CoverageCheckedCandidateViewSet, basename="candidate")
router.register("budgets", BudgetViewSet, basename="budget")
router.register("cases", WorkflowCaseViewSet, basename="case")
router.register("chaos-scenarios", ChaosScenarioViewSet, basename="chaos-scenario")
router.register("schedules", ScheduleViewSet, basename="schedule")
router.register("runs", RunViewSet, basename="run")
router.register("executions", ExecutionViewSet, basename="execution")
router.register("scorecards", ScorecardViewSet, basename="scorecard")
router.register("reports", ReportViewSet, basename="report")
router.register("alerts", AlertViewSet, basename="alert")

#: The REST API under ``/api/``: the catalog (read, staff write), schedules, coverage, runs,
#: executions, scorecards, reports, alerts and comparisons; scoring observations without storing them.
api_patterns = [
    # Before the router, so "preview" is never read as a schedule id.
    path("schedules/preview/", SchedulePreviewView.as_view(), name="schedule-preview"),
    path("tonight/", TonightView.as_view(), name="tonight"),
    path("leaderboard/", LeaderboardView.as_view(), name="leaderboard"),
    path("signal/", SignalView.as_view(), name="signal"),
    path("coverage/", CoverageView.as_view(), name="coverage"),
    path("comparisons/", ComparisonView.as_view(), name="comparison"),
    path("score/", ScoreView.as_view(), name="score"),
    *router.urls,
]

#: The server-rendered pages (namespace ``pages``); every one needs sign-in.
page_patterns = [
    path("", run_history_view, name="runs"),
    path("runs/<int:pk>/", run_detail_view, name="run"),
    path("runs/<int:pk>/progress/", run_progress_view, name="run-progress"),
    path("leaderboard/", leaderboard_view, name="leaderboard"),
    path("runs/<int:pk>/export/<str:fmt>/", run_export_view, name="run-export"),
    path("executions/<int:pk>/", execution_detail_view, name="execution"),
    path("executions/<int:pk>/trace/<int:attempt>/", execution_trace_view, name="execution-trace"),
    path("compare/", compare_view, name="compare"),
    path("signal/", signal_view, name="signal"),
    path("alerts/", alerts_view, name="alerts"),
    path("tonight/", tonight_view, name="tonight"),
    path("coverage/", coverage_view, name="coverage"),
    path("candidates/", candidates_view, name="candidates"),
    path("candidates/<str:key>/", candidate_view, name="candidate"),
]


class FaviconRedirect(RedirectView):
    """``/favicon.ico`` → the static SVG icon."""

    def get_redirect_url(self, *args, **kwargs) -> str:
        return static("evalhub/favicon.svg")


urlpatterns = [
    # Browsers ask for /favicon.ico whatever the page says; the admin's pages say nothing.
    # The target is resolved per request: with hashed static names (the production profile) it
    # exists only once collectstatic ran, and the URL conf must load before that.
    path("favicon.ico", FaviconRedirect.as_view(permanent=True)),
    path("admin/", admin.site.urls),
    # Public, for load balancers and monitors: 200 when every check passes, 503 when one fails
    # (why, only for signed-in users).
    path("health/", HealthView.as_view(checks=HEALTH_CHECKS), name="health"),
    path("accounts/login/", auth_views.LoginView.as_view(authentication_form=SignInForm), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The docs are pages for people: a visitor who is not signed in is sent to sign in, not shown a 401.
    path("api/docs/", login_required(SpectacularSwaggerView.as_view(url_name="api-schema")), name="api-docs"),
    path("api/redoc/", login_required(SpectacularRedocView.as_view(url_name="api-schema")), name="api-redoc"),
    path("api/auth/", include("rest_framework.urls")),  # sign-in link on the browsable API
    path("api/", include(api_patterns)),
    path("", include((page_patterns, "pages"))),
]

handler400 = "evalhub.errors.bad_request"
handler404 = "evalhub.errors.page_not_found"
handler500 = "evalhub.errors.server_error"
