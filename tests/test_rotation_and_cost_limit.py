"""Timestamps, the weekly rotation day and the campaign cost ceiling."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from schedules.building import (
    ScheduleError,
    parse_campaign_cost_limit,
    parse_timestamp,
    rotation_day,
    validate_rotation_day,
)
from tests.reference import golden_vectors

pytestmark = pytest.mark.database_free

GOLDEN = golden_vectors()
BAD_COST = "EVALHUB_MAX_CAMPAIGN_COST_USD must be a positive decimal number of US dollars such as 12 or 0.25, not {!r}"

# --- rotation day ----------------------------------------------------------------------------


@pytest.mark.parametrize(("generated_at", "expected"), list(GOLDEN["rotation_week"].items()))
def test_rotation_day_matches_the_reference(generated_at: str, expected: int) -> None:
    assert rotation_day(generated_at) == expected


@pytest.mark.parametrize(
    ("generated_at", "expected"),
    [
        # epoch ms -1: floor(-1 / 604800000) = -1, and -1 mod 7 = 6.
        ("1969-12-31T23:59:59.999Z", 6),
        # exactly one week before the epoch: week -1 -> 6; a millisecond earlier: week -2 -> 5.
        ("1969-12-25T00:00:00Z", 6),
        ("1969-12-24T23:59:59.999Z", 5),
        # 1969-01-02 is 364 days = 52 weeks before the epoch: week -52, and -52 mod 7 = 4.
        ("1969-01-02T00:00:00Z", 4),
    ],
)
def test_rotation_day_before_1970_floors_like_the_reference(generated_at: str, expected: int) -> None:
    assert rotation_day(generated_at) == expected


def test_rotation_rolls_over_on_thursday_midnight_utc() -> None:
    # Epoch week 2955 starts Thursday 2026-08-20 00:00Z (1 787 184 000 000 ms); 2955 mod 7 = 1.
    assert rotation_day("2026-08-19T23:59:59.999Z") == 0
    assert rotation_day("2026-08-20T00:00:00Z") == 1
    assert rotation_day("2026-08-26T23:59:59.999Z") == 1
    assert rotation_day("2026-08-27T00:00:00Z") == 2


@pytest.mark.parametrize(
    ("generated_at", "expected"),
    [
        ("2026-08-20T02:00:00+02:00", 1),  # = 2026-08-20T00:00Z
        ("2026-08-20T01:59:59+02:00", 0),  # = 2026-08-19T23:59:59Z
        ("2026-08-20T02:00:00+0200", 1),
        ("2026-08-19T19:00:00-05:00", 1),  # = 2026-08-20T00:00Z
        ("2026-08-20", 1),  # date only: midnight UTC
        ("2026-08-19", 0),
        ("2026-08-19T23:59:59.999999Z", 0),
        ("2026-08-19T23:59:59.9999999Z", 0),  # more digits than microseconds: truncated
        ("2026-08-20T00:00Z", 1),  # seconds may be left out
    ],
)
def test_rotation_day_reads_offsets_dates_and_fractions(generated_at: str, expected: int) -> None:
    assert rotation_day(generated_at) == expected


def test_parse_timestamp_returns_an_aware_utc_datetime() -> None:
    parsed = parse_timestamp("2026-08-24T02:00:00.123456+02:00")
    assert parsed == datetime(2026, 8, 24, 0, 0, 0, 123456, tzinfo=UTC)
    assert parsed.tzinfo is UTC
    assert parse_timestamp("2026-08-24") == datetime(2026, 8, 24, tzinfo=UTC)


@pytest.mark.parametrize(
    "value",
    [
        "",
        " ",
        "garbage",
        "1787529600000",
        "2026-8-24",
        "2026-08-24T00:00:00.Z",
        "2026-08-24 00:00:00Z",
        "20260824T000000Z",
        " 2026-08-24T00:00:00Z",
        "2026-08-24T00:00:00+2",
    ],
)
def test_text_that_is_not_an_iso_timestamp_is_refused(value: str) -> None:
    message = (
        f"generated-at time {value!r} is not an ISO 8601 timestamp such as 2026-08-24T00:00:00Z, 2026-08-24T02:00:00+02:00 or 2026-08-24"
    )
    with pytest.raises(ScheduleError, match=f"^{re.escape(message)}$"):
        rotation_day(value)


@pytest.mark.parametrize(
    "value",
    ["2026-13-01", "2026-02-30", "2026-08-24T24:00:00Z", "2026-08-24T00:00:60Z", "0000-01-01"],
)
def test_impossible_dates_and_times_are_refused(value: str) -> None:
    with pytest.raises(ScheduleError, match=re.escape(f"generated-at time {value!r} is not a real date and time")):
        parse_timestamp(value)


def test_impossible_utc_offset_is_refused() -> None:
    message = "generated-at time '2026-08-24T00:00:00+24:00' has an impossible UTC offset '+24:00'"
    with pytest.raises(ScheduleError, match=re.escape(message)):
        parse_timestamp("2026-08-24T00:00:00+24:00")


def test_date_time_without_an_offset_is_refused_rather_than_read_as_local_time() -> None:
    message = "generated-at time '2026-08-24T00:00:00' needs a UTC offset such as Z or +02:00"
    with pytest.raises(ScheduleError, match=f"^{re.escape(message)}$"):
        rotation_day("2026-08-24T00:00:00")


def test_non_string_timestamp_is_refused() -> None:
    message = "generated-at time must be an ISO 8601 timestamp string, not 1787529600000"
    with pytest.raises(ScheduleError, match=re.escape(message)):
        rotation_day(1787529600000)  # type: ignore[arg-type]


@pytest.mark.parametrize(("value", "expected"), [(0, 0), (6, 6), ("0", 0), ("3", 3)])
def test_rotation_day_accepts_zero_to_six_as_int_or_digits(value: object, expected: int) -> None:
    assert validate_rotation_day(value) == expected


@pytest.mark.parametrize("value", [-1, 7, 100, True, False, 3.0, "-1", "7", "3.0", "", " 3", "x", None])
def test_rotation_day_outside_zero_to_six_or_not_whole_is_refused(value: object) -> None:
    message = f"rotation day must be a whole number from 0 to 6, not {value!r}"
    with pytest.raises(ScheduleError, match=f"^{re.escape(message)}$"):
        validate_rotation_day(value)


# --- campaign cost ceiling -------------------------------------------------------------------


def golden_cost_input(key: str) -> str | None:
    # Keys are "<unset>" or the JSON text of the value, e.g. "\"0.25\"".
    return None if key == "<unset>" else json.loads(key)


@pytest.mark.parametrize(
    ("key", "expected"),
    list(GOLDEN["campaign_cost_limit"].items()),
    ids=list(GOLDEN["campaign_cost_limit"]),
)
def test_campaign_cost_limit_matches_the_reference(key: str, expected: object) -> None:
    value = golden_cost_input(key)
    if expected == "ERROR":
        with pytest.raises(ScheduleError, match=f"^{re.escape(BAD_COST.format(value))}$"):
            parse_campaign_cost_limit(value)
    else:
        limit = parse_campaign_cost_limit(value)
        assert isinstance(limit, Decimal)
        assert limit == Decimal(str(expected))


def test_hex_cost_limit_is_refused_where_the_reference_reads_sixteen() -> None:
    with pytest.raises(ScheduleError, match=f"^{re.escape(BAD_COST.format('0x10'))}$"):
        parse_campaign_cost_limit("0x10")


def test_cost_limit_allows_surrounding_whitespace() -> None:
    assert parse_campaign_cost_limit(" 5 ") == Decimal("5")
    assert parse_campaign_cost_limit("\t0.25\n") == Decimal("0.25")


def test_cost_limit_is_exact_decimal_not_float() -> None:
    assert parse_campaign_cost_limit("0.1") == Decimal("0.1")
    assert parse_campaign_cost_limit("12.50") == Decimal("12.5")


@pytest.mark.parametrize("value", ["1e2", "+5", "5.", ".5", "1,5", "5 USD", "0.00", "-0", "inf", "١٢"])
def test_cost_limit_accepts_only_plain_positive_decimals(value: str) -> None:
    with pytest.raises(ScheduleError, match=f"^{re.escape(BAD_COST.format(value))}$"):
        parse_campaign_cost_limit(value)


def test_absurdly_large_cost_limit_is_refused() -> None:
    assert parse_campaign_cost_limit("999999.999999") == Decimal("999999.999999")
    for value in ("1000000", "1000000.01"):
        message = f"EVALHUB_MAX_CAMPAIGN_COST_USD must be at most 999999.999999 US dollars, not {value!r}"
        with pytest.raises(ScheduleError, match=f"^{re.escape(message)}$"):
            parse_campaign_cost_limit(value)


def test_cost_limit_has_at_most_six_decimal_places_trailing_zeros_aside() -> None:
    assert parse_campaign_cost_limit("0.000001") == Decimal("0.000001")
    assert parse_campaign_cost_limit("12.5000000000") == Decimal("12.5")
    message = "EVALHUB_MAX_CAMPAIGN_COST_USD has at most 6 decimal places (a millionth of a dollar), not '0.0000001'"
    with pytest.raises(ScheduleError, match=f"^{re.escape(message)}$"):
        parse_campaign_cost_limit("0.0000001")


def test_cost_limit_error_names_the_variable_it_was_read_from() -> None:
    with pytest.raises(ScheduleError, match=r"^EVALHUB_RUN_COST_USD must be a positive decimal"):
        parse_campaign_cost_limit("zero", variable="EVALHUB_RUN_COST_USD")
