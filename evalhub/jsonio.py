"""Strict JSON reading: ``NaN``, ``Infinity`` and ``-Infinity`` are errors, not floats (docs/failure-modes.md B9),
and so are a key given twice in one object (the last would win unseen), a document nested
deeper than :data:`MAX_DEPTH` (which would otherwise exhaust the stack) and a lone surrogate
escape such as ``"\\ud800"`` (not a character: it can be neither stored nor sent back as UTF-8)."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

#: No evalhub document comes near this; it keeps every recursive walk of stored JSON safe.
MAX_DEPTH = 64

# A surrogate code point left in a decoded string: json.loads joins an escaped pair into one
# character, so any that remains had no partner.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in JSON: use a finite number")


def _parse_float(value: str) -> float:
    number = float(value)
    if number in (float("inf"), float("-inf")):
        raise ValueError(f"{value} is too large: use a finite number")
    return number


def _parse_int(value: str) -> int:
    # Python refuses to read a whole number of more digits than its limit and says to raise the
    # limit (sys.set_int_max_str_digits): advice for the server's code, not for the document's writer.
    try:
        return int(value)
    except ValueError:
        digits = len(value.lstrip("-"))
        raise ValueError(f"a whole number of {digits} digits is too long: use at most {sys.get_int_max_str_digits()} digits") from None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document: dict[str, Any] = {}
    for key, value in pairs:
        if key in document:
            shown = repr(key) if len(key) <= 64 and key.isprintable() else "a key"
            raise ValueError(f"{shown} appears twice in one object: give each key once")
        document[key] = value
    return document


def json_depth(value: Any) -> int:
    """How deeply lists and objects nest in ``value`` (a scalar is 0), computed without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = list(item.values())
        elif isinstance(item, list):
            children = item
        else:
            deepest = max(deepest, depth)
            continue
        deepest = max(deepest, depth + 1)
        stack.extend((child, depth + 1) for child in children)
    return deepest


def lone_surrogate(value: Any) -> str | None:
    """The first surrogate code point (``"\\ud800"`` ... ``"\\udfff"``) in any string of the
    JSON-like ``value``, object keys included, as its escape (``"\\ud800"``); ``None`` when every
    string is text. Walked without recursion."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found = _SURROGATE.search(item)
            if found:
                return f"\\u{ord(found.group()):04x}"
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def loads_strict(text: str | bytes) -> Any:
    """``json.loads`` that rejects non-finite numbers (including ``1e309``, which overflows to infinity),
    whole numbers past Python's digit limit (4300 by default), keys given twice in one object,
    documents nested more than :data:`MAX_DEPTH` levels, and strings holding a lone surrogate.

    Raises ``ValueError`` (``json.JSONDecodeError`` is one) with a message saying what is wrong.
    """
    try:
        value = json.loads(
            text, parse_constant=_reject_constant, parse_float=_parse_float, parse_int=_parse_int, object_pairs_hook=_unique_keys
        )
    except RecursionError:
        raise ValueError(f"JSON is nested too deeply: at most {MAX_DEPTH} levels are allowed") from None
    if json_depth(value) > MAX_DEPTH:
        raise ValueError(f"JSON is nested too deeply: at most {MAX_DEPTH} levels are allowed")
    surrogate = lone_surrogate(value)
    if surrogate is not None:
        raise ValueError(f"a string holds {surrogate}, half of a surrogate pair with no other half: it is not a character; remove it")
    return value
