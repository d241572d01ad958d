"""Query filters for the candidate catalog endpoints (``/api/candidates/?slot=&tier=...``)."""

from __future__ import annotations

import django_filters

from candidates.models import Adapter, Candidate, Provider, Tier


class CandidateFilter(django_filters.FilterSet):
    """``slot`` (slot id), ``adapter``, ``provider``, ``tier`` and ``budget`` (budget name)."""

    slot = django_filters.CharFilter(field_name="slot__key", help_text="Slot id, e.g. codex-strong.")
    adapter = django_filters.ChoiceFilter(choices=Adapter.choices)
    provider = django_filters.ChoiceFilter(choices=Provider.choices)
    tier = django_filters.ChoiceFilter(choices=Tier.choices)
    budget = django_filters.CharFilter(field_name="budget__name", help_text="Budget name, e.g. strong-premium.")

    class Meta:
        model = Candidate
        fields: list[str] = []
