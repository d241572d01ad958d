"""REST endpoints for workflow cases, chaos scenarios, schedules, the schedule preview and coverage.

* ``/api/cases/`` and ``/api/chaos-scenarios/``: catalog rows by id, written through ``full_clean()``.
* ``/api/schedules/``: saved schedules (history, read-only); one returns the reference schedule
  document (``paperclip.runner.live-eval-schedule.v1``) plus ``id`` and ``night``.
* ``/api/schedules/preview/``: tonight's (or any) schedule computed from the catalog, not saved.
* ``/api/coverage/``: the four weekly coverage invariants of the catalog.

A write to the catalog (slots, candidates, workflow cases) that leaves the week's coverage broken
succeeds with the coverage warning in its ``Evalhub-Coverage-Warning`` response header, as the
admin shows it on the page (:class:`CoverageWarningMixin`).
"""

from __future__ import annotations

from typing import Any

from django.db.models import F, QuerySet
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_field, extend_schema_view
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from candidates.api import BudgetDocumentSerializer, CandidateDocumentSerializer, CandidateViewSet, SlotViewSet
from evalhub.api.params import WholeNumberParam, reject_unknown_params
from evalhub.api.serializers import ModelCleanSerializer, PassThroughChoiceField
from evalhub.api.views import ApiViewMixin, CatalogViewSet, ReadOnlyViewSet
from evalhub.conf import evalhub_setting
from schedules.building import ROTATION_DAYS, SCHEDULE_SCHEMA, ScheduleError, parse_timestamp, validate_rotation_day
from schedules.case_schema import ASSERTIONS_SCHEMA, STEPS_OPENAPI_SCHEMA
from schedules.coverage import COVERAGE_INVARIANTS, failed_invariants
from schedules.filters import ChaosScenarioFilter, ScheduleFilter
from schedules.models import PROVIDERS, ChaosScenario, Fault, Lane, Schedule, WorkflowCase
from schedules.queries import tonight_schedule
from schedules.services import Selection, campaign_ceiling, catalog_coverage, catalog_coverage_matrix, coverage_warning, preview_schedule

LENIENT_TEXT = {"allow_blank": True, "trim_whitespace": False}


class BadRequest(exceptions.APIException):
    """400 ``{"detail": "..."}``: the request as a whole cannot be served (the message says why)."""

    status_code = status.HTTP_400_BAD_REQUEST
    default_code = "bad_request"


# -- workflow cases and chaos scenarios ------------------------------------------------------


@extend_schema_field({"type": "array", "uniqueItems": True, "items": {"type": "string", "minLength": 1, "pattern": r"\S"}})
class TextListJSONField(serializers.JSONField):
    """Any JSON here; the model checks it is a list of unique non-blank texts."""


@extend_schema_field({"type": "array", "minItems": 1, "uniqueItems": True, "items": {"type": "string", "enum": list(PROVIDERS)}})
class ProvidersJSONField(serializers.JSONField):
    """Any JSON here; the model checks it is a non-empty list of unique providers."""


@extend_schema_field(STEPS_OPENAPI_SCHEMA)
class StepsJSONField(serializers.JSONField):
    """Any JSON here; the model checks the steps against the case schema (documented as OpenAPI writes it)."""


@extend_schema_field(ASSERTIONS_SCHEMA)
class AssertionsJSONField(serializers.JSONField):
    """Any JSON here; the model checks the assertion keys and values."""


class WorkflowCaseSerializer(ModelCleanSerializer):
    """A workflow case as in ``workflow-cases.json`` plus evalhub's ``prompt`` (the task the live
    harness gives the agent), ``position`` (catalog order) and ``version``.

    ``version`` is read-only: it goes up by one whenever an update changes ``steps``,
    ``assertions`` or ``prompt`` (saved schedules keep the version they were built with). A new
    case without a ``position`` goes last.
    """

    model_class = WorkflowCase

    id = serializers.CharField(source="key", **LENIENT_TEXT)
    title = serializers.CharField(**LENIENT_TEXT)
    tags = TextListJSONField(required=False)
    providers = ProvidersJSONField(help_text='Subset of ["codex", "opencode", "acpx"], at least one.')
    repetitions = serializers.IntegerField(required=False, help_text="Entries per slot per nightly, 1..20.")
    steps = StepsJSONField()
    assertions = AssertionsJSONField(required=False)
    prompt = serializers.CharField(
        required=False, **LENIENT_TEXT, help_text="The task the agent reads at run start; changing it makes a new version."
    )
    position = serializers.IntegerField(required=False, help_text="Catalog order; decides the slots a case meets.")
    version = serializers.IntegerField(read_only=True)

    def position_scope(self, instance: WorkflowCase) -> QuerySet:
        return WorkflowCase.objects.all()

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        self._bump_version = self.instance is not None and self.instance.changes_version(attrs)
        return super().validate(attrs)

    def update(self, instance: WorkflowCase, validated_data: dict[str, Any]) -> WorkflowCase:
        if self._bump_version:
            instance.version = F("version") + 1
        saved = self._save()
        if self._bump_version:
            saved.refresh_from_db(fields=["version"])
        return saved


class ChaosScenarioSerializer(ModelCleanSerializer):
    """A chaos scenario: ``{id, lane, fault, expectedInvariant, position}``; ``lane`` defaults to ``chaos``."""

    model_class = ChaosScenario

    id = serializers.CharField(source="key", **LENIENT_TEXT)
    lane = PassThroughChoiceField(choices=Lane.choices, required=False)
    fault = PassThroughChoiceField(choices=Fault.choices)
    expectedInvariant = serializers.CharField(source="expected_invariant", **LENIENT_TEXT)
    position = serializers.IntegerField(required=False)

    def position_scope(self, instance: ChaosScenario) -> QuerySet:
        return ChaosScenario.objects.all()


#: The response header a catalog write's coverage warning is sent in.
COVERAGE_WARNING_HEADER = "Evalhub-Coverage-Warning"


def _coverage_warning_response(status_code: int) -> OpenApiParameter:
    """The header, as the OpenAPI schema documents it on a catalog write's ``status_code`` response."""
    return OpenApiParameter(
        COVERAGE_WARNING_HEADER,
        location=OpenApiParameter.HEADER,
        response=[status_code],
        description=(
            "Sent when the write succeeded but left the week's coverage broken: the failed invariants and their arithmetic, "
            "and that every nightly is refused until the catalog is fixed (GET /api/coverage/ shows the gap)."
        ),
    )


class CoverageWarningMixin:
    """After a create, update or delete of the catalog through the API (slots, candidates,
    workflow cases), the coverage warning the admin shows (``schedules.admin.CoverageWarningMixin``,
    :func:`schedules.services.coverage_warning`): when the week's coverage no longer holds,
    ``nightly`` refuses to run, and a bare 201/200/204 would hide it. The write still succeeds;
    the warning is the ``Evalhub-Coverage-Warning`` header of its response (a header, so the body
    stays the document a client can send back). One coverage computation per successful write;
    none for a refused one or a read."""

    def perform_create(self, serializer: Any) -> None:
        super().perform_create(serializer)  # type: ignore[misc]
        self._catalog_changed = True

    def perform_update(self, serializer: Any) -> None:
        super().perform_update(serializer)  # type: ignore[misc]
        self._catalog_changed = True

    def perform_destroy(self, instance: Any) -> None:
        super().perform_destroy(instance)  # type: ignore[misc]
        self._catalog_changed = True

    def finalize_response(self, request: Request, response: Response, *args: Any, **kwargs: Any) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]
        if getattr(self, "_catalog_changed", False) and status.is_success(response.status_code):
            self._catalog_changed = False
            warning = coverage_warning(seed=evalhub_setting("SCHEDULE_SEED"))
            if warning:
                response[COVERAGE_WARNING_HEADER] = warning
        return response


_WRITES_MAY_WARN = extend_schema_view(
    **{
        action: extend_schema(parameters=[_coverage_warning_response(status_code)])
        for action, status_code in (("create", 201), ("update", 200), ("partial_update", 200))
    },
    # A delete's 204 is given explicitly: drf-spectacular's implicit one carries no headers.
    destroy=extend_schema(parameters=[_coverage_warning_response(204)], responses={204: None}),
)


# The slot and candidate endpoints live in candidates/api.py, which may not import schedules (the
# apps are layers, pyproject.toml [tool.importlinter]): evalhub/urls.py routes these, which add the
# coverage check on top, as schedules/admin.py does for their admins.
@_WRITES_MAY_WARN
class CoverageCheckedSlotViewSet(CoverageWarningMixin, SlotViewSet):
    __doc__ = SlotViewSet.__doc__


@_WRITES_MAY_WARN
class CoverageCheckedCandidateViewSet(CoverageWarningMixin, CandidateViewSet):
    __doc__ = CandidateViewSet.__doc__


@_WRITES_MAY_WARN
class WorkflowCaseViewSet(CoverageWarningMixin, CatalogViewSet):
    """Workflow cases in catalog order: ``/api/cases/`` and ``/api/cases/{id}/``. Writes need staff."""

    queryset = WorkflowCase.objects.order_by("position", "id")
    serializer_class = WorkflowCaseSerializer
    lookup_field = "key"


class ChaosScenarioViewSet(CatalogViewSet):
    """Chaos scenarios in order: ``/api/chaos-scenarios/`` and ``/api/chaos-scenarios/{id}/``.

    Filter: ``fault``. Writes need staff.
    """

    queryset = ChaosScenario.objects.order_by("position", "id")
    serializer_class = ChaosScenarioSerializer
    filterset_class = ChaosScenarioFilter
    lookup_field = "key"


# -- schedules ---------------------------------------------------------------------------------


class ScheduleEntryDocumentSerializer(serializers.Serializer):
    """One entry of the reference schedule document."""

    executionId = serializers.CharField(help_text="rwe- + 16 hex digits")
    caseId = serializers.CharField()
    candidateId = serializers.CharField()
    slotId = serializers.CharField()
    repetition = serializers.IntegerField()
    providerTrace = serializers.CharField()
    budget = BudgetDocumentSerializer()


class ScheduleDocumentSerializer(serializers.Serializer):
    """The reference schedule document (``paperclip.runner.live-eval-schedule.v1``)."""

    schema = serializers.CharField(help_text=SCHEDULE_SCHEMA)
    seed = serializers.CharField()
    rotationDay = serializers.IntegerField(min_value=0, max_value=6)
    generatedAt = serializers.CharField(help_text="The timestamp exactly as given.")
    candidates = CandidateDocumentSerializer(many=True)
    entries = ScheduleEntryDocumentSerializer(many=True)
    expectedExecutions = serializers.IntegerField()


class SavedScheduleSerializer(ScheduleDocumentSerializer):
    """A saved schedule: the reference document plus its ``id`` and ``night`` (UTC date)."""

    id = serializers.IntegerField()
    night = serializers.DateField()


class ScheduleSummarySerializer(serializers.Serializer):
    """A saved schedule in the list: no candidates or entries."""

    id = serializers.IntegerField(read_only=True)
    seed = serializers.CharField(read_only=True)
    rotationDay = serializers.IntegerField(source="rotation_day", read_only=True)
    night = serializers.DateField(read_only=True)
    generatedAt = serializers.CharField(source="generated_at", read_only=True)
    expectedExecutions = serializers.IntegerField(source="expected_executions", read_only=True)
    createdAt = serializers.DateTimeField(source="created_at", read_only=True)


class ScheduleViewSet(ReadOnlyViewSet):
    """Saved schedules, newest night first: ``/api/schedules/`` and ``/api/schedules/{id}/``.

    The list is summaries (filters ``seed``, ``rotation_day``, ``night``, ``night_after``,
    ``night_before``); one schedule is the full reference document plus ``id`` and ``night``.
    Saved schedules are history: there is no write.
    """

    queryset = Schedule.objects.order_by("-night", "-id")
    filterset_class = ScheduleFilter

    def get_serializer_class(self) -> type[serializers.Serializer]:
        return SavedScheduleSerializer if self.action == "retrieve" else ScheduleSummarySerializer

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        schedule = self.get_object()
        entries = list(schedule.entries.order_by("position"))
        return Response({"id": schedule.pk, "night": schedule.night.isoformat(), **schedule.to_document(entries)})


# -- preview and coverage ----------------------------------------------------------------------


def seed_param(request: Request) -> str:
    """``?seed=``, or the configured ``EVALHUB["SCHEDULE_SEED"]`` when absent or blank."""
    return request.query_params.get("seed") or evalhub_setting("SCHEDULE_SEED")


def id_list_param(request: Request, name: str) -> tuple[str, ...]:
    """A repeatable parameter that also takes comma lists: ``?candidate=a&candidate=b,c`` → ``(a, b, c)``."""
    ids: list[str] = []
    for raw in request.query_params.getlist(name):
        ids.extend(part.strip() for part in raw.split(","))
    return tuple(dict.fromkeys(item for item in ids if item))


LIMIT_PARAM = WholeNumberParam(
    "limit", description="Keep only the first N selected entries (N >= 1).", message="limit must be a positive whole number, such as 10."
)
SEED_PARAMETER = OpenApiParameter("seed", OpenApiTypes.STR, description="Schedule seed; defaults to the configured EVALHUB SCHEDULE_SEED.")
PREVIEW_PARAMETERS = [
    SEED_PARAMETER,
    OpenApiParameter(
        "rotation_day",
        {"type": "integer", "minimum": 0, "maximum": ROTATION_DAYS - 1},
        description="Rotation day 0..6; defaults to the day of generated_at.",
    ),
    OpenApiParameter(
        "generated_at",
        {"type": "string", "format": "date-time"},
        description="ISO 8601 timestamp with a UTC offset (2026-08-24T00:00:00Z) or a date; defaults to now.",
    ),
    OpenApiParameter(
        "candidate",
        OpenApiTypes.STR,
        many=True,
        explode=True,
        description="Keep only these candidate ids; repeat the parameter or give a comma list.",
    ),
    OpenApiParameter(
        "case",
        OpenApiTypes.STR,
        many=True,
        explode=True,
        description="Keep only these workflow case ids; repeat the parameter or give a comma list.",
    ),
    LIMIT_PARAM.openapi,
]
ERROR_RESPONSE = OpenApiResponse(
    description='A bad parameter: {"<parameter>": ["..."]}, or {"detail": "..."} for a schedule that cannot be built.'
)


class SchedulePreviewView(ApiViewMixin, APIView):
    """``GET /api/schedules/preview/``: the reference schedule document, computed from the catalog, not saved.

    With ``candidate``/``case``/``limit`` it is the selected subset (the reference's
    ``selectRunnerLiveEvalSchedule``). Errors: 400 with field errors for a bad ``rotation_day``,
    ``generated_at``, ``limit`` or an unknown parameter; 400 ``{"detail": "..."}`` with the
    schedule core's message for an empty catalog or a selection naming a candidate outside the
    week's line-up, an unscheduled case, or matching nothing.
    """

    PARAMETERS = ("seed", "rotation_day", "generated_at", "candidate", "case", "limit")

    @extend_schema(
        operation_id="schedules_preview",
        parameters=PREVIEW_PARAMETERS,
        responses={200: ScheduleDocumentSerializer, 400: ERROR_RESPONSE},
    )
    def get(self, request: Request) -> Response:
        reject_unknown_params(request, self.PARAMETERS, repeatable=("candidate", "case"))
        params = request.query_params
        errors: dict[str, list[str]] = {}
        rotation_day: int | None = None
        if params.get("rotation_day"):
            try:
                rotation_day = validate_rotation_day(params["rotation_day"])
            except ScheduleError as exc:
                errors["rotation_day"] = [str(exc)]
        generated_at = params.get("generated_at") or None
        if generated_at is not None:
            try:
                parse_timestamp(generated_at, name="generated_at")
            except ScheduleError as exc:
                errors["generated_at"] = [str(exc)]
        limit: int | None = None
        try:
            limit = LIMIT_PARAM.parse(request)
        except exceptions.ValidationError as exc:
            errors.update(exc.detail)
        if errors:
            raise exceptions.ValidationError(errors)
        selection = Selection(candidate_ids=id_list_param(request, "candidate"), case_ids=id_list_param(request, "case"), limit=limit)
        try:
            document = preview_schedule(
                seed=seed_param(request),
                now=timezone.now(),
                rotation_day=rotation_day,
                generated_at=generated_at,
                selection=selection,
            )
        except ScheduleError as exc:
            raise BadRequest(str(exc)) from None
        return Response(document)


@extend_schema_field(
    {
        "type": "object",
        "properties": {name: {"type": "boolean"} for name in COVERAGE_INVARIANTS},
        "required": list(COVERAGE_INVARIANTS),
    }
)
class CoverageInvariantsField(serializers.JSONField):
    """The four invariants, each true or false."""


class CoverageSerializer(serializers.Serializer):
    """The catalog's weekly coverage for one seed."""

    seed = serializers.CharField()
    coverage = CoverageInvariantsField()
    failed = serializers.ListField(child=serializers.CharField(), help_text="The invariants that do not hold.")
    matrix = serializers.DictField(
        child=serializers.ListField(child=serializers.ListField(child=serializers.CharField())),
        help_text="For each case id, the slot ids it meets on rotation days 0..6.",
    )


class CoverageView(ApiViewMixin, APIView):
    """``GET /api/coverage/?seed=``: the four coverage invariants of the catalog over the seven rotation days.

    Returns ``{"seed", "coverage": {everySlotNightly, everyConcreteCandidateInRotation,
    everyWorkflowCoversEverySlot, strongAndInexpensiveNightly}, "failed": [...], "matrix":
    {case id: [[slot ids] for day 0..6]}}``. 400 ``{"detail": "..."}`` when no schedule can be built
    (for example an empty catalog).
    """

    @extend_schema(operation_id="coverage", parameters=[SEED_PARAMETER], responses={200: CoverageSerializer, 400: ERROR_RESPONSE})
    def get(self, request: Request) -> Response:
        reject_unknown_params(request, ("seed",))
        seed = seed_param(request)
        try:
            coverage = catalog_coverage(seed=seed)
            matrix = catalog_coverage_matrix(seed=seed)
        except ScheduleError as exc:
            raise BadRequest(str(exc)) from None
        return Response({"seed": seed, "coverage": coverage, "failed": failed_invariants(coverage), "matrix": matrix})


class TonightRunSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    trigger = serializers.CharField()
    lane = serializers.CharField()
    status = serializers.CharField()


class ModelChangeSerializer(serializers.Serializer):
    candidateId = serializers.CharField()
    scheduled = serializers.CharField(help_text="The model the saved schedule runs tonight.")
    current = serializers.CharField(help_text="The catalog's model now (measured from the next schedule built).")


class TonightSerializer(serializers.Serializer):
    night = serializers.DateField(help_text="Tonight (UTC).")
    saved = serializers.BooleanField(help_text="False: no schedule is saved yet; this is the one the nightly would build now.")
    schedule = ScheduleDocumentSerializer()
    runs = TonightRunSerializer(many=True, help_text="The saved schedule's runs, newest first.")
    worstCaseUsd = serializers.DecimalField(max_digits=12, decimal_places=4, help_text="Every execution spending its whole budget (USD).")
    ceilingUsd = serializers.DecimalField(max_digits=12, decimal_places=4, help_text="The campaign cost ceiling (USD).")
    stopsEarly = serializers.BooleanField(help_text="True when the worst case is over the ceiling.")
    firstRefusedExecutionId = serializers.CharField(allow_null=True, help_text="Where the night stops in the worst case.")
    modelChanges = ModelChangeSerializer(many=True)


class TonightView(ApiViewMixin, APIView):
    """``GET /api/tonight/``: tonight's (UTC) schedule as the Tonight page shows it: the saved one,
    or the one the nightly would build now (``saved`` false); its runs; its worst case against
    the campaign ceiling and where the night would stop; candidates edited since it was saved.
    400 ``{"detail"}`` when no schedule can be built (an empty catalog), or for any parameter."""

    @extend_schema(operation_id="tonight", responses={200: TonightSerializer, 400: ERROR_RESPONSE})
    def get(self, request: Request) -> Response:
        reject_unknown_params(request, ())
        tonight = tonight_schedule(seed=evalhub_setting("SCHEDULE_SEED"), now=timezone.now(), ceiling_usd=campaign_ceiling())
        if tonight.document is None or tonight.projection is None:
            raise BadRequest(f"Tonight's schedule cannot be built: {tonight.error}")
        projection = tonight.projection
        entries = tonight.document["entries"]
        return Response(
            {
                "night": tonight.night.isoformat(),
                "saved": tonight.saved,
                "schedule": tonight.document,
                "runs": [{"id": run.pk, "trigger": run.trigger, "lane": run.lane, "status": run.status} for run in tonight.runs],
                "worstCaseUsd": projection.worst_case_usd,
                "ceilingUsd": projection.ceiling_usd,
                "stopsEarly": projection.stops_early,
                "firstRefusedExecutionId": entries[projection.first_refused]["executionId"] if projection.stops_early else None,
                "modelChanges": [
                    {"candidateId": change.candidate_id, "scheduled": change.scheduled, "current": change.current}
                    for change in tonight.model_changes
                ],
            }
        )
