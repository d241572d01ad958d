"""The admin's form pieces (evalhub.admin_forms), plus helpers the other admin tests import.

``admin_form_data`` turns an admin add/change page into the POST data the browser would send
unchanged (main form, inline management forms and rows), so a test changes only what it means to.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django import forms
from django.core.exceptions import ValidationError

from candidates.models import Candidate
from evalhub.admin_forms import SecretSafeFormMixin, SecretSafeModelForm, StrictJSONField, renumber_positions
from evalhub.templatetags.evalhub_format import duration, format_usd
from evalhub.validation import REORDER_OFFSET
from tests.builders import make_candidate, make_slot

SECRET = "sk-proj-FAKEfakeFAKE_0123456789-abcdefghijklmnop"


def _field_data(form: forms.BaseForm, data: dict[str, Any]) -> None:
    for bound in form:
        value = bound.value()
        if isinstance(bound.field, forms.BooleanField):
            if value:
                data[bound.html_name] = "on"
            continue
        if value is None:
            value = ""
        data[bound.html_name] = [str(item) for item in value] if isinstance(value, (list, tuple)) else str(value)
        if bound.field.show_hidden_initial:  # fields with a callable default also post their initial value
            data[bound.html_initial_name] = data[bound.html_name]


def admin_form_data(response: Any) -> dict[str, Any]:
    """The POST data of the admin add/change page in ``response``, as the browser would send it."""
    data: dict[str, Any] = {}
    _field_data(response.context["adminform"].form, data)
    for inline in response.context["inline_admin_formsets"]:
        formset = inline.formset
        _field_data(formset.management_form, data)
        for form in formset.forms:
            _field_data(form, data)
    return data


def add_inline_row(data: dict[str, Any], prefix: str, values: dict[str, Any]) -> None:
    """Append one new row to the inline formset ``prefix`` in ``data``."""
    index = int(data[f"{prefix}-TOTAL_FORMS"])
    data[f"{prefix}-TOTAL_FORMS"] = str(index + 1)
    for name, value in values.items():
        data[f"{prefix}-{index}-{name}"] = value


def inline_index(data: dict[str, Any], prefix: str, key: str) -> int:
    """The row number of the inline row whose ``key`` field is ``key``."""
    for index in range(int(data[f"{prefix}-TOTAL_FORMS"])):
        if data.get(f"{prefix}-{index}-key") == key:
            return index
    raise AssertionError(f"no inline row {key}")


def error_text(response: Any) -> str:
    """Every error of the admin form and its inlines, as one string."""
    parts = [str(response.context["adminform"].form.errors)]
    for inline in response.context.get("inline_admin_formsets", []):
        parts.append(str(inline.formset.errors))
        parts.append(str(inline.formset.non_form_errors()))
    return " ".join(parts)


class TestStrictJSONField:
    @pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", '["X", Infinity]', '{"a": NaN}', "1e309", "[-1e400]"])
    def test_non_finite_numbers_are_a_form_error(self, text: str) -> None:
        with pytest.raises(ValidationError, match="Enter valid JSON"):
            StrictJSONField().clean(text)

    def test_broken_json_is_a_form_error_that_does_not_quote_the_input(self) -> None:
        with pytest.raises(ValidationError) as caught:
            StrictJSONField().clean(f'["{SECRET}"')
        assert SECRET not in " ".join(caught.value.messages)

    @pytest.mark.parametrize("text", ['["a\\u0000b"]', '{"k\\u0000": 1}', '"\\u0000"'])
    def test_text_holding_a_nul_character_is_a_form_error(self, text: str) -> None:
        with pytest.raises(ValidationError, match="without the NUL character"):
            StrictJSONField().clean(text)

    def test_valid_json_parses(self) -> None:
        assert StrictJSONField().clean('["OPENAI_API_KEY", 1.5]') == ["OPENAI_API_KEY", 1.5]

    def test_a_json_string_stays_a_string_for_the_model_to_reject(self) -> None:
        assert StrictJSONField().clean('"OPENAI_API_KEY"') == "OPENAI_API_KEY"


class _SeedForm(SecretSafeFormMixin, forms.Form):
    seed = forms.CharField()
    flavour = forms.ChoiceField(choices=[("a", "a")])


class TestSecretSafeForm:
    def test_a_choice_error_that_quotes_the_input_is_redacted_and_the_value_blanked(self) -> None:
        form = _SeedForm({"seed": "fine", "flavour": SECRET})
        assert not form.is_valid()
        assert SECRET not in str(form.errors)
        assert SECRET not in str(form["flavour"].value() or "")

    def test_a_secret_in_a_field_that_otherwise_validates_is_refused_and_blanked(self) -> None:
        form = _SeedForm({"seed": SECRET, "flavour": "a"})
        assert not form.is_valid()
        assert "looks like a secret" in str(form.errors["seed"])
        assert form["seed"].value() == ""


@pytest.mark.django_db
def test_renumber_positions_orders_offset_rows_by_their_old_place_without_a_clash() -> None:
    slot = make_slot()
    first = make_candidate(slot=slot, position=0)
    second = make_candidate(slot=slot, position=1)
    third = make_candidate(slot=slot, position=2)
    # As after a formset save: untouched rows wait above the offset, a moved row has its new place.
    Candidate.objects.filter(pk=third.pk).update(position=REORDER_OFFSET + 5)
    Candidate.objects.filter(pk=first.pk).update(position=REORDER_OFFSET + 3)
    Candidate.objects.filter(pk=second.pk).update(position=1)

    renumber_positions(Candidate.objects.filter(slot=slot))

    order = list(Candidate.objects.filter(slot=slot).order_by("position").values_list("key", "position"))
    assert order == [(second.key, 0), (first.key, 1), (third.key, 2)]


@pytest.mark.parametrize(
    ("value", "known", "shown"),
    [
        (Decimal("1.5"), True, "$1.50"),
        (Decimal("0"), True, "$0.00"),
        (Decimal("0.0123"), True, "$0.0123"),
        (Decimal("1.5"), False, "unknown"),
        (None, False, "unknown"),
        (None, True, "—"),
        (Decimal("1234.5"), True, "$1,234.50"),
    ],
)
def test_usd_shows_unknown_never_zero_for_an_unpriced_cost(value: Any, known: bool, shown: str) -> None:
    assert format_usd(value, known) == shown


@pytest.mark.parametrize(("ms", "shown"), [(None, "—"), (850, "850 ms"), (12_340, "12.3 s"), (245_000, "4 min 05 s")])
def test_duration_reads_as_a_person_would_say_it(ms: Any, shown: str) -> None:
    assert duration(ms) == shown


@pytest.mark.django_db
def test_a_constraint_on_a_field_left_off_the_form_is_still_a_form_error() -> None:
    """docs/failure-modes.md B7: a plain ModelForm with only ``position`` skips the (slot, position)
    constraint because ``slot`` is not on the form, and the save raises IntegrityError."""
    slot = make_slot()
    make_candidate(slot=slot, position=0)
    mover = make_candidate(slot=slot, position=1)
    plain = forms.modelform_factory(Candidate, fields=["position"])
    safe = forms.modelform_factory(Candidate, form=SecretSafeModelForm, fields=["position"])

    assert plain({"position": "0"}, instance=Candidate.objects.get(pk=mover.pk)).is_valid()
    form = safe({"position": "0"}, instance=Candidate.objects.get(pk=mover.pk))

    assert not form.is_valid()
    assert form.non_field_errors() == ["Another candidate in this slot already has this position."]
