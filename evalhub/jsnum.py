"""JavaScript number semantics that the reference's outputs depend on.

The reference is TypeScript: its numbers are IEEE-754 doubles, it sums with ``Array.reduce``
(plain left-to-right additions), rounds with ``Math.round`` (half toward +infinity) and prints
numbers with ``Number::toString`` (``1`` not ``1.0``, ``0.30000000000000004``, ``1e-7``).
Python differs on all four: ``sum()`` of floats is compensated since 3.12, ``round()`` is
half-to-even, and ``repr`` prints ``1.0`` and ``1e-07``. These helpers reproduce the JavaScript
results bit for bit. Pure functions, no Django.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from decimal import Decimal

# Number::toString switches to exponent notation at 1e21 (and below 1e-6).
_EXPONENT_THRESHOLD = 1e21


def _check_number(value: object) -> None:
    # bool is an int subclass; a boolean is never a number in the reference's documents.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected a number, got {type(value).__name__}: {value!r}")


def js_round(value: float) -> int | float:
    """``Math.round(value)``: the nearest integer, halves toward +infinity.

    ``js_round(2.5) == 3``, ``js_round(-2.5) == -2``, ``js_round(0.49999999999999994) == 0``
    (where ``floor(x + 0.5)`` would give 1). Returns an ``int`` for finite input; NaN and the
    infinities come back unchanged as floats, as in JavaScript. Raises ``TypeError`` for
    anything that is not an int or float (booleans included).
    """
    _check_number(value)
    if isinstance(value, int):
        return value
    if not math.isfinite(value):
        return value
    floor = math.floor(value)
    # value - floor is exact for doubles, so the comparison sees the true fraction.
    return floor + 1 if value - floor >= 0.5 else floor


def round_half_up(value: float, places: int = 3) -> float:
    """The reference's ``Math.round(value * 10**places) / 10**places`` (3 places in reports).

    Half-way cases go toward +infinity: ``0.8125 -> 0.813``, ``-0.0625 -> -0.062``. The
    multiplication and division are the same double operations JavaScript performs, so the
    result is the same double (``0.8999999999999999`` stays what JavaScript makes of it).
    Returns a float (NaN and infinities pass through). Raises ``TypeError`` for non-numbers
    and ``ValueError`` for negative ``places``.
    """
    _check_number(value)
    if places < 0:
        raise ValueError(f"places must be 0 or more, got {places}")
    scale = float(10**places)
    rounded = js_round(float(value) * scale)
    return float(rounded) / scale


def js_sum(values: Iterable[float]) -> float:
    """``values.reduce((sum, value) => sum + value, 0)``: plain left-to-right double additions.

    Unlike Python 3.12's compensated ``sum()``: ``js_sum([0.2, 0.15, 0.1, 0.0, 0.2, 0.25])`` is
    ``0.8999999999999999`` (``sum`` gives ``0.9``). Returns a float (``0.0`` for no values).
    Raises ``TypeError`` for a value that is not a number.
    """
    total = 0.0
    for value in values:
        _check_number(value)
        total = total + value
    return total


def json_number(value: float | Decimal) -> int | float:
    """The Python value that ``json.dumps`` prints the way ``JSON.stringify`` prints ``value``.

    JavaScript has one number type, so an integral double prints without a fraction: integral
    finite floats below 1e21 in magnitude become ``int`` (``1.0 -> 1``, ``-0.0 -> 0``); every
    other number is returned unchanged. A ``Decimal`` (a money column) becomes the number the
    reference prints for it: ``Decimal("2.00")`` → 2, ``Decimal("1.50")`` → 1.5. Raises
    ``TypeError`` for non-numbers.
    """
    if isinstance(value, Decimal):
        normalized = value.normalize()
        if normalized.is_finite() and normalized == normalized.to_integral_value():
            return int(normalized)
        return float(normalized)
    _check_number(value)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer() and abs(value) < _EXPONENT_THRESHOLD:
        return int(value)
    return value


def js_number(value: float) -> str:
    """``String(value)``: JavaScript's ``Number::toString`` for a double.

    Integral values print without a fraction (``1``, ``0``, ``120000``; ``-0`` prints ``0``),
    others with the shortest digits that round-trip (``0.30000000000000004``), fixed notation
    from 1e-6 up to 1e21 and exponent notation outside it (``1e-7``, ``1.5e+21``);
    ``NaN``, ``Infinity``, ``-Infinity``. Python ints are treated as the double they would be in
    JavaScript. Raises ``TypeError`` for non-numbers (booleans included).
    """
    _check_number(value)
    if isinstance(value, int) and abs(value) < _EXPONENT_THRESHOLD:
        return str(value)
    number = float(value)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    if number == 0:
        return "0"
    sign = "-" if number < 0 else ""
    # repr gives the shortest round-tripping digits, as ECMAScript requires; only the layout
    # differs. Normalising strips trailing zeros so that digits * 10**(point - len) == |x|.
    decimal = Decimal(repr(abs(number))).normalize()
    _, digit_tuple, exponent = decimal.as_tuple()
    digits = "".join(str(digit) for digit in digit_tuple)
    k = len(digits)
    n = exponent + k  # position of the decimal point relative to the first digit
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = f"{digits[:n]}.{digits[n:]}"
    elif -6 < n <= 0:
        text = "0." + "0" * (-n) + digits
    else:
        power = n - 1
        power_text = f"+{power}" if power >= 0 else str(power)
        mantissa = digits if k == 1 else f"{digits[0]}.{digits[1:]}"
        text = f"{mantissa}e{power_text}"
    return sign + text
