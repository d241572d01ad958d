"""Filter types shared by the API's filter sets."""

from __future__ import annotations

import django_filters
from django import forms

#: The largest primary key any supported database stores (a bigger number would overflow, a 500).
MAX_ID = 2**63 - 1


class IdFilter(django_filters.Filter):
    """A row id: a whole number from 1 to 2**63 - 1; anything else is a 400 saying so."""

    field_class = forms.IntegerField

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", MAX_ID)
        super().__init__(*args, **kwargs)


class WholeNumberFilter(django_filters.Filter):
    """A whole number within ``min_value``..``max_value`` (no decimals, no exponents)."""

    field_class = forms.IntegerField
