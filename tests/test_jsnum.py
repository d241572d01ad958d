"""JavaScript number semantics: Math.round, half-up rounding, left-to-right sums, Number::toString."""

from __future__ import annotations

import math

import pytest

from evalhub.jsnum import js_number, js_round, js_sum, json_number, round_half_up

pytestmark = pytest.mark.database_free


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (2.5, 3),
        (-2.5, -2),
        (62.5, 63),
        (-0.5, 0),
        (0.49999999999999994, 0),  # floor(x + 0.5) would say 1
        (1.4999999999999998, 1),
        (-1.5000000000000002, -2),
        (4503599627370495.5, 4503599627370496),
        (9007199254740993, 9007199254740993),  # ints are already integers
        (0.0, 0),
        (7, 7),
    ],
)
def test_js_round_takes_halves_toward_positive_infinity(value: float, expected: int) -> None:
    assert js_round(value) == expected
    assert isinstance(js_round(value), int)


def test_js_round_passes_non_finite_values_through() -> None:
    assert math.isnan(js_round(math.nan))
    assert js_round(math.inf) == math.inf
    assert js_round(-math.inf) == -math.inf


@pytest.mark.parametrize(
    ("value", "places", "expected"),
    [
        (0.8125, 3, 0.813),
        (-0.0625, 3, -0.062),
        (0.0005, 3, 0.001),
        (0.9166666666666666, 3, 0.917),
        (2 / 3, 3, 0.667),
        (1.005, 2, 1.0),  # 1.005 * 100 is 100.49999999999999 in doubles, as in JavaScript
        (1, 3, 1.0),
        (0.25, 1, 0.3),
        (-0.25, 1, -0.2),
        (12.5, 0, 13.0),
    ],
)
def test_round_half_up_matches_math_round_scaled(value: float, places: int, expected: float) -> None:
    assert round_half_up(value, places) == expected


def test_round_half_up_defaults_to_three_places_and_differs_from_python_round() -> None:
    assert round_half_up(0.8125) == 0.813
    assert round(0.8125, 3) == 0.812


def test_round_half_up_refuses_negative_places() -> None:
    with pytest.raises(ValueError, match="places must be 0 or more, got -1"):
        round_half_up(1.5, -1)


def test_js_sum_adds_left_to_right_without_compensation() -> None:
    values = [0.2, 0.15, 0.1, 0.0, 0.2, 0.25]
    assert js_sum(values) == 0.8999999999999999
    assert js_sum([0.1, 0.2]) == 0.30000000000000004
    assert js_sum([1e16, 1.0, -1e16]) == 0.0  # the 1.0 is lost, as in Array.reduce


def test_js_sum_of_nothing_is_zero_and_accepts_ints() -> None:
    assert js_sum([]) == 0.0
    assert js_sum([1, 0, 1]) == 2.0
    assert isinstance(js_sum([1, 2]), float)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, "1"),
        (1.0, "1"),
        (2.0, "2"),
        (0, "0"),
        (0.0, "0"),
        (-0.0, "0"),
        (120000, "120000"),
        (120000.0, "120000"),
        (-3.0, "-3"),
        (0.983, "0.983"),
        (0.30000000000000004, "0.30000000000000004"),
        (0.8999999999999999, "0.8999999999999999"),
        (-0.266, "-0.266"),
        (1e16, "10000000000000000"),
        (123456789012345680000.0, "123456789012345680000"),
        (1e21, "1e+21"),
        (1.5e21, "1.5e+21"),
        (10**21, "1e+21"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (0.000001, "0.000001"),
        (0.0000015, "0.0000015"),
        (1e-7, "1e-7"),
        (1.5e-7, "1.5e-7"),
        (5e-324, "5e-324"),
        (-1.5e-7, "-1.5e-7"),
        (0.00005, "0.00005"),
        (123.456, "123.456"),
        (math.nan, "NaN"),
        (math.inf, "Infinity"),
        (-math.inf, "-Infinity"),
    ],
)
def test_js_number_prints_like_javascript(value: float, expected: str) -> None:
    assert js_number(value) == expected


@pytest.mark.parametrize("value", [True, "1", None, [1]])
def test_js_number_refuses_what_is_not_a_number(value: object) -> None:
    with pytest.raises(TypeError, match="expected a number"):
        js_number(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "expected", "expected_type"),
    [
        (1.0, 1, int),
        (-0.0, 0, int),
        (0.653, 0.653, float),
        (1e21, 1e21, float),
        (3, 3, int),
    ],
)
def test_json_number_makes_integral_doubles_ints(value: float, expected: float, expected_type: type) -> None:
    result = json_number(value)
    assert result == expected
    assert type(result) is expected_type
