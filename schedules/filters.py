"""Query filters for the schedule, case and chaos endpoints."""

from __future__ import annotations

import django_filters

from evalhub.api.filters import WholeNumberFilter
from schedules.models import ChaosScenario, Fault, Schedule


class ScheduleFilter(django_filters.FilterSet):
    """``seed``, ``rotation_day`` (0..6), ``night`` (YYYY-MM-DD) and ``night_after``/``night_before`` (inclusive)."""

    seed = django_filters.CharFilter()
    rotation_day = WholeNumberFilter(min_value=0, max_value=6)
    night = django_filters.DateFilter()
    night_after = django_filters.DateFilter(field_name="night", lookup_expr="gte")
    night_before = django_filters.DateFilter(field_name="night", lookup_expr="lte")

    class Meta:
        model = Schedule
        fields: list[str] = []


class ChaosScenarioFilter(django_filters.FilterSet):
    """``fault``: one of the eight reference faults."""

    fault = django_filters.ChoiceFilter(choices=Fault.choices)

    class Meta:
        model = ChaosScenario
        fields: list[str] = []
