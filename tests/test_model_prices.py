"""Model prices: the admin-editable table, the pure cost arithmetic, and unknown-is-never-$0."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from candidates.models import ModelPrice
from evalhub import reference_data
from runs.harness.contracts import Usage
from runs.harness.pricing import Price, cost_usd, price_for
from tests.test_admin_forms import error_text

PRICE = Price(
    model="gpt-5.6-luna",
    input=Decimal("1.25"),
    cached_input=Decimal("0.125"),
    output=Decimal("10"),
    reasoning=Decimal("10"),
)


def make_price(**overrides: Any) -> ModelPrice:
    values: dict[str, Any] = {
        "model": "gpt-5.6-luna",
        "input_usd": Decimal("1.25"),
        "cached_input_usd": Decimal("0.125"),
        "output_usd": Decimal("10"),
        "reasoning_usd": Decimal("10"),
    }
    values.update(overrides)
    price = ModelPrice(**values)
    price.full_clean()
    price.save()
    return price


# --- the arithmetic (no database) ----------------------------------------------------------------


def test_an_unknown_price_is_an_unknown_cost_never_zero() -> None:
    assert cost_usd(Usage(input=1000, output=1000), None) is None


def test_each_kind_of_token_is_priced_once_at_its_own_rate() -> None:
    usage = Usage(input=1_000_000, cached_input=200_000, output=300_000, reasoning=100_000)

    # 800k uncached × $1.25 + 200k cached × $0.125 + 300k output × $10 + 100k reasoning × $10
    assert cost_usd(usage, PRICE) == pytest.approx(1.0 + 0.025 + 3.0 + 1.0, abs=1e-12)


def test_reasoning_has_its_own_rate() -> None:
    cheap_reasoning = Price("m", Decimal("0"), Decimal("0"), Decimal("10"), Decimal("1"))

    assert cost_usd(Usage(output=1_000_000, reasoning=1_000_000), cheap_reasoning) == pytest.approx(11.0)


def test_odd_counts_never_make_a_negative_cost() -> None:
    usage = Usage(input=100, cached_input=500, output=-10, reasoning=-1)

    assert cost_usd(usage, PRICE) == pytest.approx(500 * 0.125 / 1_000_000)


def test_a_known_price_with_no_tokens_costs_zero() -> None:
    assert cost_usd(Usage(), PRICE) == 0.0


# --- the table -------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_price_for_finds_a_model_ignoring_case_and_blanks() -> None:
    make_price(model="openrouter/z-ai/GLM-4.6", input_usd=Decimal("0.6"))

    price = price_for("  openrouter/z-ai/glm-4.6 ")

    assert price == Price("openrouter/z-ai/GLM-4.6", Decimal("0.6"), Decimal("0.125"), Decimal("10"), Decimal("10"))
    assert price_for("openrouter/z-ai/glm-4.5-air") is None
    assert price_for("") is None


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("input_usd", Decimal("-0.01"), "A price cannot be negative."),
        ("output_usd", Decimal("10000.01"), "almost surely a unit mix-up"),
        ("model", "   ", "Model must not be blank."),
        ("note", "key " + "sk-" + "proj-" + "FAKEfakeFAKE_0123456789-abcdefghijklmnop", "looks like it contains a secret"),
    ],
)
def test_a_bad_price_is_refused_with_a_clear_message(field: str, value: Any, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        make_price(**{field: value})
    assert not ModelPrice.objects.exists()


@pytest.mark.django_db
def test_one_price_per_model_ignoring_case() -> None:
    make_price(model="gpt-5.6-luna")

    with pytest.raises(ValidationError, match="This model already has a price"):
        make_price(model="GPT-5.6-Luna")


@pytest.mark.django_db
def test_the_reference_load_ships_no_prices(reference_catalog) -> None:
    # The manifest's models have no published price evalhub can cite: unknown is the honest default.
    assert not ModelPrice.objects.exists()
    assert not (reference_data.DATA_DIR / "model-prices.json").exists()


# --- the admin -------------------------------------------------------------------------------------


@pytest.fixture
def fast_hashing(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


PRICE_POST = {
    "model": "claude-sonnet-5",
    "input_usd": "3",
    "cached_input_usd": "0.3",
    "output_usd": "15",
    "reasoning_usd": "15",
    "note": "checked by hand",
}


@pytest.mark.django_db
def test_staff_add_and_list_prices_in_the_admin(fast_hashing, staff_client) -> None:
    response = staff_client.post(reverse("admin:candidates_modelprice_add"), PRICE_POST)

    assert response.status_code == 302, error_text(response)
    assert price_for("claude-sonnet-5") == Price("claude-sonnet-5", Decimal("3"), Decimal("0.3"), Decimal("15"), Decimal("15"))
    listing = staff_client.get(reverse("admin:candidates_modelprice_changelist"))
    assert listing.status_code == 200
    assert b"claude-sonnet-5" in listing.content


@pytest.mark.django_db
def test_a_negative_price_is_a_form_error_in_the_admin(fast_hashing, staff_client) -> None:
    response = staff_client.post(reverse("admin:candidates_modelprice_add"), {**PRICE_POST, "output_usd": "-1"})

    assert response.status_code == 200
    assert "A price cannot be negative." in error_text(response)
    assert not ModelPrice.objects.exists()
