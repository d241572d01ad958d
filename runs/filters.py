"""Query filters for the run and execution endpoints."""

from __future__ import annotations

import django_filters

from runs.models import Classification, Execution, ExecutionStatus, Run, RunStatus, Trigger


class RunFilter(django_filters.FilterSet):
    """``status``, ``trigger``, ``schedule`` (id) and ``night`` (YYYY-MM-DD)."""

    status = django_filters.ChoiceFilter(choices=RunStatus.choices)
    trigger = django_filters.ChoiceFilter(choices=Trigger.choices)
    schedule = django_filters.NumberFilter(field_name="schedule_id")
    night = django_filters.DateFilter(field_name="schedule__night")

    class Meta:
        model = Run
        fields: list[str] = []


class ExecutionFilter(django_filters.FilterSet):
    """``run`` (id), ``classification``, ``candidate``, ``case`` and ``slot`` (ids) and ``status``."""

    run = django_filters.NumberFilter(field_name="run_id")
    classification = django_filters.ChoiceFilter(choices=Classification.choices)
    candidate = django_filters.CharFilter(field_name="candidate_key", help_text="Candidate id, e.g. codex-luna.")
    case = django_filters.CharFilter(field_name="case_key", help_text="Workflow case id, e.g. final-response.")
    slot = django_filters.CharFilter(field_name="slot_key", help_text="Slot id, e.g. codex-strong.")
    status = django_filters.ChoiceFilter(choices=ExecutionStatus.choices)

    class Meta:
        model = Execution
        fields: list[str] = []
