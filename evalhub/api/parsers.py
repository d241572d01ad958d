"""The API's request parser: strict JSON only (docs/failure-modes.md B9)."""

from __future__ import annotations

import codecs
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from evalhub.jsonio import loads_strict


class StrictJSONParser(JSONParser):
    """JSON bodies in which ``NaN``, ``Infinity`` and numbers that overflow to infinity (``1e309``)
    are parse errors.

    DRF's own parser refuses only the ``NaN``/``Infinity`` tokens; ``1e309`` would reach the
    serializers as ``float("inf")``. Any undecodable or malformed body is a 400
    ``{"detail": "JSON parse error - ..."}``, never a 500.
    """

    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict | None = None) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = codecs.getreader(encoding)(stream).read()
            return loads_strict(text)
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            raise ParseError(f"JSON parse error - {exc}") from None
