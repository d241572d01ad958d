"""Strict JSON reading: ``NaN``, ``Infinity`` and ``-Infinity`` are errors, not floats (known-failure-modes B9)."""

from __future__ import annotations

import json
from typing import Any


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in JSON: use a finite number")


def loads_strict(text: str | bytes) -> Any:
    """``json.loads`` that rejects non-finite numbers (including ``1e309``, which overflows to infinity).

    Raises ``ValueError`` (``json.JSONDecodeError`` is one) with a message saying what is wrong.
    """
    def parse_float(value: str) -> float:
        number = float(value)
        if number in (float("inf"), float("-inf")):
            raise ValueError(f"{value} is too large: use a finite number")
        return number

    return json.loads(text, parse_constant=_reject_constant, parse_float=parse_float)
