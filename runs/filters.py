"""Query filters for the run, execution, scorecard, report and alert endpoints."""

from __future__ import annotations

import django_filters

from evalhub.api.filters import IdFilter, StrictBooleanFilter
from runs.models import (
    Alert,
    AlertSeverity,
    Classification,
    Execution,
    ExecutionStatus,
    Report,
    Run,
    RunLane,
    RunStatus,
    Scorecard,
    Trigger,
)


class RunFilter(django_filters.FilterSet):
    """``status``, ``trigger``, ``lane``, ``schedule`` (id) and ``night`` (YYYY-MM-DD)."""

    status = django_filters.ChoiceFilter(choices=RunStatus.choices)
    lane = django_filters.ChoiceFilter(choices=RunLane.choices)
    trigger = django_filters.ChoiceFilter(choices=Trigger.choices)
    schedule = IdFilter(field_name="schedule_id")
    night = django_filters.DateFilter(field_name="schedule__night")

    class Meta:
        model = Run
        fields: list[str] = []


class ExecutionFilter(django_filters.FilterSet):
    """``run`` (id), ``classification``, ``candidate``, ``case`` and ``slot`` (ids) and ``status``."""

    run = IdFilter(field_name="run_id")
    classification = django_filters.ChoiceFilter(choices=Classification.choices)
    candidate = django_filters.CharFilter(field_name="candidate_key", help_text="Candidate id, e.g. codex-luna.")
    case = django_filters.CharFilter(field_name="case_key", help_text="Workflow case id, e.g. final-response.")
    slot = django_filters.CharFilter(field_name="slot_key", help_text="Slot id, e.g. codex-strong.")
    status = django_filters.ChoiceFilter(choices=ExecutionStatus.choices)

    class Meta:
        model = Execution
        fields: list[str] = []


class ScorecardFilter(django_filters.FilterSet):
    """``run`` (id), ``candidate`` and ``case`` (ids)."""

    run = IdFilter(field_name="execution__run_id")
    candidate = django_filters.CharFilter(field_name="execution__candidate_key", help_text="Candidate id, e.g. codex-luna.")
    case = django_filters.CharFilter(field_name="execution__case_key", help_text="Workflow case id, e.g. final-response.")

    class Meta:
        model = Scorecard
        fields: list[str] = []


class ReportFilter(django_filters.FilterSet):
    """``run`` (id), ``bundle`` (bundle id) and ``refresh`` (true/false)."""

    run = IdFilter(field_name="run_id")
    bundle = django_filters.CharFilter(field_name="bundle_id", help_text="Bundle id, e.g. runner-live-v2-ede6023f7ccf4a1f.")
    refresh = StrictBooleanFilter(field_name="is_refresh", help_text="Only refreshes (true) or only measurements (false).")

    class Meta:
        model = Report
        fields: list[str] = []


class AlertFilter(django_filters.FilterSet):
    """``bundle`` (bundle id), ``code``, ``severity`` and ``run`` (id)."""

    bundle = django_filters.CharFilter(field_name="report__bundle_id", help_text="Bundle id of the alert's report.")
    code = django_filters.CharFilter(help_text="Alert code, e.g. safety_failure.")
    severity = django_filters.ChoiceFilter(choices=AlertSeverity.choices)
    run = IdFilter(field_name="report__run_id")

    class Meta:
        model = Alert
        fields: list[str] = []
