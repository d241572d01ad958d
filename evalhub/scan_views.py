"""What a secret scanner reads, and the way back to the text it came from.

A secret can hide from a regex without changing what a person sees:

* JSON escapes: ``"sk-\\u0070roj-…"``, a nested document's ``\\"``, a ``\\n`` between ``Bearer`` and
  its token;
* Unicode look-alikes left by copy-paste or obfuscation: a full-width ``ｓｋ－…`` (a compatibility
  form that NFKC folds to ASCII), a zero-width space or a soft hyphen inside a key, a
  non-breaking hyphen for ``-``.

A :class:`View` is the text with those undone and a map from every span of the view back to the
smallest span of the original that holds it — never half an escape sequence, never half of a
folded character — so a redaction spliced into the original keeps a JSON string a JSON string.

:func:`json_documents` says where a text is JSON (the whole text, or single NDJSON lines), and
:func:`literal_spans` / :func:`scalar_spans` where the string literals and the scalar tokens of
one document are, so the scrubber can replace a secret inside a string and nothing else.

Pure, no Django; everything here is compiled once, at import.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from bisect import bisect_right
from dataclasses import dataclass, field
from json.decoder import scanstring  # the json module's own string decoder (C)

__all__ = [
    "View",
    "fold",
    "fold_text",
    "identity_text_problem",
    "json_documents",
    "json_view",
    "literal_spans",
    "literal_view",
    "normalized_view",
    "scalar_spans",
]

#: Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt): characters that render as
#: nothing (zero-width space and joiners, soft hyphen, bidirectional controls, word joiner,
#: variation selectors, tags, the Hangul fillers ...). Removed before scanning, so a key with
#: one inside is still the key.
_IGNORABLE = (
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
)
#: Hyphen look-alikes NFKC leaves alone (hyphen, non-breaking hyphen, figure dash, minus sign):
#: read as ``-``. Dashes between words (en and em dash) are punctuation, not a key's hyphen.
_HYPHENS = "\u2010\u2011\u2012\u2212"
_IGNORABLE_CHAR = re.compile(f"[{_IGNORABLE}]")
_ODD_CHAR = re.compile(f"[{_IGNORABLE}{_HYPHENS}]")
_NON_ASCII_RUN = re.compile(r"[^\x00-\x7f]+")

# A JSON string literal (in a document already known to be valid JSON, so every '"' outside a
# literal opens one), one escape sequence inside it (a surrogate pair counts as one), and the
# scalar tokens between literals (Python's json also reads NaN and Infinity).
_LITERAL = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_ESCAPE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[0-9a-fA-F]{4}|\\.", re.DOTALL)
_SCALAR = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null|NaN|-?Infinity")
_JSON_LINE = re.compile(r"^[ \t]*[\[{].*$", re.MULTILINE)


@functools.lru_cache(maxsize=8192)
def fold(char: str) -> str:
    """One character as the scanner reads it: '' for a default-ignorable character, ``-`` for a
    hyphen look-alike, else its NFKC form (``ｓ`` → ``s``, ``ﬁ`` → ``fi``)."""
    if _IGNORABLE_CHAR.match(char):
        return ""
    if char in _HYPHENS:
        return "-"
    return unicodedata.normalize("NFKC", char)


def fold_text(text: str) -> str:
    """``text`` with :func:`fold` applied to every character (ASCII text is returned as is)."""
    if text.isascii():
        return text
    return "".join(fold(char) for char in text)


def _character(char: str) -> str:
    return f"U+{ord(char):04X} {unicodedata.name(char, 'unnamed character')}"


def identity_text_problem(value: str, *, form: str = "NFKC") -> str | None:
    """Why ``value`` cannot be text that decides identity, or None when it can.

    Model names, reasoning efforts, profiles and schedule seeds decide uniqueness or are hashed
    into execution ids, so a look-alike must never pass as a second, different value: refused
    are control characters (a trailing newline), invisible characters (default-ignorable or
    format), look-alikes of ``-``, and text that is not in Unicode normal ``form`` (``NFKC``
    also folds compatibility forms such as full-width letters and ligatures; ``NFC`` only
    composes). The sentence names the character and its position, or the form to write.
    """
    for position, char in enumerate(value, start=1):
        if unicodedata.category(char) == "Cc":
            return f"contains a control character ({_character(char)}) at position {position}; remove it"
        if char in _HYPHENS:
            return f"contains {_character(char)} at position {position}, which looks like '-'; type '-' instead"
        if _IGNORABLE_CHAR.match(char) or unicodedata.category(char) == "Cf":
            return f"contains an invisible character ({_character(char)}) at position {position}; remove it"
    normal = unicodedata.normalize(form, value)
    if normal != value:
        return f"is not in its plain Unicode form ({form}); write {normal!r} instead"
    return None


@dataclass
class View:
    """A text to scan and, for each of its spans, where it came from.

    ``text`` is what the scanner reads. Segment ``i`` covers ``text[vstarts[i]:vstarts[i + 1]]``
    and came from ``original[ostarts[i]:oends[i]]``; ``exact[i]`` says the two are the same
    characters one for one (else the segment is atomic: any part of it maps to all of it, or,
    for a JSON literal decoded whole (``literal[i]``), to the part its ``literal_view`` gives;
    ``source`` is the text the view was made from). ``parent`` is the
    view this one was made from (offsets then go on through it). No segment at all is the
    identity.
    """

    text: str
    vstarts: list[int] = field(default_factory=list)
    ostarts: list[int] = field(default_factory=list)
    oends: list[int] = field(default_factory=list)
    exact: list[bool] = field(default_factory=list)
    literal: list[bool] = field(default_factory=list)  # a JSON literal's content, decoded whole
    source: str = ""  # the text this view was made from (for a literal's raw content)
    parent: View | None = None
    _fine: dict[int, View] = field(default_factory=dict)

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original span holding ``text[start:end]`` (``start < end``)."""
        if self.vstarts:
            first = bisect_right(self.vstarts, start) - 1
            last = bisect_right(self.vstarts, end - 1) - 1
            start = self._map(first, start, is_end=False)
            end = self._map(last, end, is_end=True)
        if self.parent is not None:
            return self.parent.span(start, end)
        return start, end

    def _map(self, index: int, offset: int, *, is_end: bool) -> int:
        inside = offset - self.vstarts[index]
        if self.exact[index]:
            return self.ostarts[index] + inside
        if not self.literal[index]:
            return self.oends[index] if is_end else self.ostarts[index]
        fine = self._fine.get(index)
        if fine is None:
            fine = self._fine[index] = literal_view(self.source[self.ostarts[index] : self.oends[index]])
        if is_end:
            return self.ostarts[index] + fine.span(inside - 1, inside)[1]
        return self.ostarts[index] + fine.span(inside, inside + 1)[0]


class _Builder:
    """Collects a view's text and segments; runs of exact segments merge."""

    def __init__(self, original: str) -> None:
        self.original = original
        self.parts: list[str] = []
        self.length = 0
        self.view = View(text="")

    def copy(self, start: int, end: int) -> None:
        """``original[start:end]`` unchanged."""
        if start >= end:
            return
        view = self.view
        if view.exact and view.exact[-1] and view.oends[-1] == start:
            view.oends[-1] = end
        else:
            self._segment(start, end, exact=True, literal=False)
        self.parts.append(self.original[start:end])
        self.length += end - start

    def replace(self, text: str, start: int, end: int, *, literal: bool = False) -> None:
        """``original[start:end]`` read as ``text`` (``literal``: a JSON literal's content)."""
        self._segment(start, end, exact=False, literal=literal)
        self.parts.append(text)
        self.length += len(text)

    def _segment(self, start: int, end: int, *, exact: bool, literal: bool) -> None:
        view = self.view
        view.vstarts.append(self.length)
        view.ostarts.append(start)
        view.oends.append(end)
        view.exact.append(exact)
        view.literal.append(literal)

    def build(self, parent: View | None = None) -> View:
        self.view.text = "".join(self.parts)
        self.view.source = self.original
        self.view.parent = parent
        return self.view


def literal_view(raw: str) -> View:
    """The decoded content of one JSON string literal (``raw`` is what lies between its quotes),
    mapped character by character to ``raw``: each escape sequence is atomic."""
    builder = _Builder(raw)
    position = 0
    for match in _ESCAPE.finditer(raw):
        builder.copy(position, match.start())
        builder.replace(json.loads('"' + match.group() + '"'), match.start(), match.end())
        position = match.end()
    builder.copy(position, len(raw))
    return builder.build()


def json_documents(text: str) -> list[tuple[int, int]]:
    """Where ``text`` is JSON: ``[(0, len(text))]`` when it is one JSON object or array, else the
    ``(start, end)`` of every line that is one (NDJSON), else ``[]``. Scalars alone are not
    documents (a message that is a number stays plain text)."""
    head = text.lstrip()[:1]
    if head in ("{", "["):
        try:
            json.loads(text)
        except (ValueError, RecursionError):
            pass
        else:
            return [(0, len(text))]
    if "\n" not in text:
        return []
    documents = []
    for match in _JSON_LINE.finditer(text):
        try:
            json.loads(match.group())
        except (ValueError, RecursionError):
            continue
        documents.append(match.span())
    return documents


def literal_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """``(start, end)`` of every string literal, quotes included, of the JSON document
    ``text[start:end]``, in order."""
    return [match.span() for match in _LITERAL.finditer(text, start, end)]


def scalar_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """``(start, end)`` of every number, ``true``, ``false`` or ``null`` in ``text[start:end]``
    (a stretch of a JSON document between two string literals)."""
    return [match.span() for match in _SCALAR.finditer(text, start, end)]


def json_view(text: str, documents: list[tuple[int, int]]) -> View | None:
    """``text`` with the string literals of its JSON ``documents`` decoded in place (structure,
    quotes and escape-free literals unchanged), or None when no literal has an escape."""
    if "\\" not in text:
        return None
    builder = _Builder(text)
    position = 0
    for document_start, document_end in documents:
        # In a valid document every '"' outside a literal opens one; the json module's own
        # decoder reads each literal to its end. Decoded shorter than its raw text = escaped.
        quote = text.find('"', document_start, document_end)
        while quote >= 0:
            decoded, end = scanstring(text, quote + 1)
            if end - quote - 2 != len(decoded):
                builder.copy(position, quote + 1)
                builder.replace(decoded, quote + 1, end - 1, literal=True)
                position = end - 1
            quote = text.find('"', end, document_end)
    if position == 0:
        return None
    builder.copy(position, len(text))
    return builder.build()


def normalized_view(text: str, parent: View | None = None) -> View | None:
    """``text`` as :func:`fold` reads it, or None when folding changes nothing (ASCII text, or
    text that is NFKC already and holds no ignorable character or hyphen look-alike)."""
    if text.isascii():
        return None
    runs = [
        match
        for match in _NON_ASCII_RUN.finditer(text)
        if _ODD_CHAR.search(match.group()) or not unicodedata.is_normalized("NFKC", match.group())
    ]
    if not runs:
        return None
    builder = _Builder(text)
    position = 0
    for match in runs:
        builder.copy(position, match.start())
        for index in range(match.start(), match.end()):
            char = text[index]
            folded = fold(char)
            if folded == char:
                builder.copy(index, index + 1)
            else:
                builder.replace(folded, index, index + 1)
        position = match.end()
    builder.copy(position, len(text))
    return builder.build(parent)
