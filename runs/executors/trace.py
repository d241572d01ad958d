"""The stored trace format every executor writes: every raw protocol frame of one execution, scrubbed, in order.

It lives beside the registry, not inside a plugin, because the orchestration stores it
(``runs.models.TraceArtifact``), the pages and the API read it back (:func:`read_artifact`) and any
executor may record one (the live harness does, and so does the chaos lane's scripted executor).

A driver hands each raw frame to :meth:`TraceRecorder.frame` (runtime→evalhub ``in``,
evalhub→runtime ``out``, or ``stderr``) and then says how it interpreted it with
:meth:`TraceRecorder.interpret`. The recorder keeps an NDJSON document in the shape of the
reference's provider trace file, one JSON object per line:

``{"kind":"frame","frameId":n,"debugSequence":n,"direction":"in|out|stderr","atMs":ms,"byteLength":b,"digest":"sha256:<hex>","rawBase64":"..."}``
    one per frame. The frame is decoded as UTF-8 (invalid bytes replaced by U+FFFD), passed
    through ``scrub`` (exact secret values and secret shapes: the caller decides), and
    ``byteLength``/``digest``/``rawBase64`` describe the *scrubbed* UTF-8 bytes, so the digest
    still verifies and no secret is ever kept.
``{"kind":"interpretation","frameId":n,"disposition":"mapped|...","emittedEventIds":[...],"eventTypes":[...]}``
    one per frame id named in an :meth:`~TraceRecorder.interpret` call.

Storage: the NDJSON lines go straight into a gzip compressor in memory. Once the uncompressed
document would grow past ``cap_bytes`` the recorder stops storing (the stored document stays a
prefix of whole lines), marks the trace truncated and only counts the remaining frames — the
work per frame stays constant and the run is never slowed down or failed by its trace.

:meth:`TraceRecorder.summary` re-reads the stored document exactly as the reference reads its
trace file and returns the observation's ``traceLineage`` fields; :meth:`TraceRecorder.artifact`
returns the compressed document for storage (``runs.models.TraceArtifact``), and
:func:`read_artifact` decompresses a stored one, verifying its digest.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

#: The trace dispositions of the reference (the case assertion ``trace.dispositions``).
DISPOSITIONS = ("mapped", "generic", "ignored", "rejected", "operator_only")
#: Lineage kinds of the reference's trace lineage (:func:`summarize_ndjson`).
LINEAGE_KINDS = ("one_to_one", "one_to_many", "many_to_one")

#: The default cap on the uncompressed NDJSON document: 8 MiB.
DEFAULT_CAP_BYTES = 8 * 1024 * 1024
DIRECTIONS = ("in", "out", "stderr")
#: zlib's window bits for a gzip container (``wbits`` 16 + 15).
GZIP_WBITS = 31


class EmittedEvent(Protocol):
    """What an interpretation line names of a canonical event (``runs.executors.live.contracts.CanonicalEvent``):
    its ``id`` (``evt-<n>``) and ``type`` (``item.started``...)."""

    @property
    def id(self) -> str: ...

    @property
    def type(self) -> str: ...


class TraceIntegrityError(ValueError):
    """A stored trace does not decompress, or its content does not match its recorded digest."""


@dataclass(frozen=True)
class TraceArtifact:
    """A recorded trace ready to store.

    ``data`` is the gzip-compressed NDJSON document (also readable as ``gzip``); ``raw_bytes``
    its uncompressed size and ``stored_bytes`` its compressed size (bytes); ``digest`` is ``sha256:<hex>`` of the
    uncompressed document (the same value as the summary's ``traceRef``); ``frame_count`` counts
    every frame the driver recorded, stored or not; ``truncated`` says the cap was reached and
    later frames were counted but not stored; ``stored_frames`` counts the frames in ``data``.
    Stored by ``runs.models.TraceArtifact`` (one row per execution attempt).
    """

    data: bytes
    raw_bytes: int
    stored_bytes: int
    digest: str
    frame_count: int
    stored_frames: int
    truncated: bool

    @property
    def gzip(self) -> bytes:
        return self.data


def sha256_ref(data: bytes) -> str:
    """``sha256:<64 lowercase hex>`` of ``data``, the reference's digest notation."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


class TraceRecorder:
    """Records frames and their interpretations; implements ``contracts.TraceSink``.

    ``scrub(text) -> text`` removes secrets from each decoded frame (the run's secret values and
    secret shapes, e.g. ``functools.partial(evalhub.secrets.redact, extra_values=values)``);
    ``cap_bytes`` bounds the uncompressed document; ``clock_ms()`` gives milliseconds since the
    execution started (default: monotonic time since the recorder was made; pass the
    ``EventLog.now_ms`` of the execution so frames and events share a clock).

    Thread-safe: a driver may record from its reader and writer threads at once; frame ids and
    line order follow the order in which calls take the lock.
    """

    def __init__(
        self,
        *,
        scrub: Callable[[str], str],
        cap_bytes: int = DEFAULT_CAP_BYTES,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        if cap_bytes < 0:
            raise ValueError("cap_bytes must be 0 or more")
        start = time.monotonic()
        self._scrub = scrub
        self._cap = cap_bytes
        self._clock_ms = clock_ms or (lambda: int((time.monotonic() - start) * 1000))
        self._lock = threading.Lock()
        self._compressor = zlib.compressobj(6, zlib.DEFLATED, GZIP_WBITS)
        self._chunks: list[bytes] = []
        self._hash = hashlib.sha256()
        self._raw_bytes = 0
        self._frames = 0
        self._stored_frames = 0
        self._truncated = False

    # -- TraceSink --------------------------------------------------------------------------------

    def frame(self, direction: str, raw: bytes) -> int:
        """Record one raw frame; returns its id (1, 2, 3... in call order).

        ``direction`` is ``in``, ``out`` or ``stderr``; ``raw`` the bytes as read or written
        (``str`` is accepted and encoded as UTF-8). A frame past the cap is counted, not stored,
        and the trace is marked truncated. Raises ``ValueError`` only for an unknown direction
        (a driver bug).
        """
        if direction not in DIRECTIONS:
            raise ValueError(f"unknown trace direction {direction!r}: use one of {', '.join(DIRECTIONS)}")
        with self._lock:
            # Everything under the lock: ids, lines and their order must agree (``ordered``).
            self._frames += 1
            frame_id = self._frames
            if self._truncated:
                return frame_id
            if isinstance(raw, str):
                raw = raw.encode("utf-8", errors="replace")
            text = bytes(raw).decode("utf-8", errors="replace")
            scrubbed = self._scrub(text).encode("utf-8", errors="replace")
            line = {
                "kind": "frame",
                "frameId": frame_id,
                "debugSequence": frame_id,
                "direction": direction,
                "atMs": self._clock_ms(),
                "byteLength": len(scrubbed),
                "digest": sha256_ref(scrubbed),
                "rawBase64": base64.b64encode(scrubbed).decode("ascii"),
            }
            if self._append(line):
                self._stored_frames += 1
        return frame_id

    def interpret(self, frame_ids: Sequence[int], disposition: str, events: Sequence[EmittedEvent]) -> None:
        """Record how frames were interpreted: one ``interpretation`` line per frame id, each
        naming the ``disposition`` (one of :data:`DISPOSITIONS`) and the ids and types of
        the canonical events the frames produced (empty for ``ignored``)."""
        if disposition not in DISPOSITIONS:
            raise ValueError(f"unknown trace disposition {disposition!r}: use one of {', '.join(DISPOSITIONS)}")
        event_ids = [event.id for event in events]
        event_types = [event.type for event in events]
        with self._lock:
            for frame_id in frame_ids:
                if self._truncated:
                    return
                self._append(
                    {
                        "kind": "interpretation",
                        "frameId": frame_id,
                        "disposition": disposition,
                        "emittedEventIds": event_ids,
                        "eventTypes": event_types,
                    }
                )

    # -- reading ----------------------------------------------------------------------------------

    @property
    def frame_count(self) -> int:
        """Every frame recorded so far, stored or not."""
        with self._lock:
            return self._frames

    @property
    def truncated(self) -> bool:
        with self._lock:
            return self._truncated

    def ndjson(self) -> bytes:
        """The stored NDJSON document so far (decompressed from the stored gzip)."""
        return gunzip(self._gzip_snapshot()[0])

    def summary(self) -> dict[str, Any]:
        """The observation's ``traceLineage`` for what was stored (see :func:`summarize_ndjson`)."""
        return summarize_ndjson(self.ndjson())

    def artifact(self) -> TraceArtifact:
        """The compressed document and its sizes, digest and counts. May be called at any time;
        recording can go on afterwards (the compressor is not closed)."""
        data, raw_bytes, digest, frames, stored, truncated = self._gzip_snapshot()
        return TraceArtifact(
            data=data,
            raw_bytes=raw_bytes,
            stored_bytes=len(data),
            digest=digest,
            frame_count=frames,
            stored_frames=stored,
            truncated=truncated,
        )

    # -- internals --------------------------------------------------------------------------------

    def _append(self, line: dict[str, Any]) -> bool:
        """Compress one line unless it would pass the cap (then truncate for good). Lock held."""
        encoded = (json.dumps(line, separators=(",", ":")) + "\n").encode("utf-8")
        if self._raw_bytes + len(encoded) > self._cap:
            self._truncated = True
            return False
        self._raw_bytes += len(encoded)
        self._hash.update(encoded)
        chunk = self._compressor.compress(encoded)
        if chunk:
            self._chunks.append(chunk)
        return True

    def _gzip_snapshot(self) -> tuple[bytes, int, str, int, int, bool]:
        with self._lock:
            # A copy of the compressor is finished, so the live one keeps accepting lines.
            tail = self._compressor.copy().flush(zlib.Z_FINISH)
            data = b"".join(self._chunks) + tail
            return (
                data,
                self._raw_bytes,
                "sha256:" + self._hash.hexdigest(),
                self._frames,
                self._stored_frames,
                self._truncated,
            )


#: Nothing evalhub stores decompresses past this (the recorder's cap is far below): a bigger
#: result is a damaged or forged row, refused before it can fill the memory.
MAX_DECOMPRESSED_BYTES = 256 * 1024 * 1024


def gunzip(data: bytes, *, limit: int = MAX_DECOMPRESSED_BYTES) -> bytes:
    """Decompress one gzip stream; raises :class:`TraceIntegrityError` when it is not exactly one
    complete stream (bytes or a second member appended are tampering) or would exceed ``limit``."""
    decompressor = zlib.decompressobj(GZIP_WBITS)
    try:
        document = decompressor.decompress(data, limit + 1)
    except zlib.error as exc:
        raise TraceIntegrityError(f"the stored trace is not a readable gzip stream ({exc})") from None
    if len(document) > limit or decompressor.unconsumed_tail:
        raise TraceIntegrityError(f"the stored trace decompresses past {limit} bytes: it is damaged")
    if not decompressor.eof:
        raise TraceIntegrityError("the stored trace is a truncated gzip stream")
    if decompressor.unused_data:
        raise TraceIntegrityError("the stored trace has bytes after its gzip stream: it was altered")
    return document


def read_artifact(gz: bytes, expected_digest: str) -> bytes:
    """The NDJSON document of a stored trace, after checking it against ``expected_digest``.

    Raises :class:`TraceIntegrityError` when ``gz`` does not decompress or its content's
    ``sha256:<hex>`` differs from ``expected_digest`` (the stored bytes were altered or damaged).
    """
    document = gunzip(bytes(gz))
    actual = sha256_ref(document)
    if actual != expected_digest:
        raise TraceIntegrityError(
            f"the stored trace does not match its recorded digest (recorded {expected_digest}, content {actual}); "
            "it was altered or damaged after it was recorded"
        )
    return document


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _frame_verified(line: dict[str, Any]) -> bool:
    raw = line.get("rawBase64")
    length = _int(line.get("byteLength"))
    if not isinstance(raw, str) or length is None:
        return False
    try:
        decoded = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        return False
    return len(decoded) == length and sha256_ref(decoded) == line.get("digest")


def _strictly_increasing(values: list[int]) -> bool:
    return all(a < b for a, b in zip(values, values[1:], strict=False))


def summarize_ndjson(document: bytes) -> dict[str, Any]:
    """The reference ``traceLineage`` of an NDJSON trace document.

    Lines that are not JSON objects are skipped. ``frameCount`` counts ``frame`` lines and
    ``byteCount`` sums their ``byteLength``; ``digestVerified``: at least one frame and every
    frame's ``rawBase64`` decodes to ``byteLength`` bytes whose ``sha256:`` equals ``digest``;
    ``ordered``: frame ids strictly increasing and the numeric ``debugSequence`` values strictly
    increasing (false with no frame); ``dispositions``: the distinct interpretation dispositions
    in first-seen order; ``lineage``: ``one_to_one`` when any interpretation exists,
    ``one_to_many`` when one emitted more than one event, ``many_to_one`` when one event id was
    emitted by more than one interpretation (in :data:`LINEAGE_KINDS` order);
    ``capture`` is ``on`` when the document is not empty; ``traceRef`` is ``sha256:`` of the
    document. An empty document gives capture ``off``, zeros, false, empty lists and no
    ``traceRef``.
    """
    if not document:
        return {
            "capture": "off",
            "frameCount": 0,
            "byteCount": 0,
            "digestVerified": False,
            "ordered": False,
            "dispositions": [],
            "lineage": [],
        }
    frames: list[dict[str, Any]] = []
    interpretations: list[dict[str, Any]] = []
    for raw_line in document.decode("utf-8", errors="replace").splitlines():
        try:
            line = json.loads(raw_line)
        except ValueError:
            continue
        if not isinstance(line, dict):
            continue
        if line.get("kind") == "frame":
            frames.append(line)
        elif line.get("kind") == "interpretation":
            interpretations.append(line)
    frame_ids = [_int(line.get("frameId")) for line in frames]
    sequences = [value for value in (_int(line.get("debugSequence")) for line in frames) if value is not None]
    ordered = bool(frames) and None not in frame_ids and _strictly_increasing(frame_ids) and _strictly_increasing(sequences)  # type: ignore[arg-type]
    dispositions: list[str] = []
    emitters: dict[str, int] = {}
    one_to_many = False
    for line in interpretations:
        disposition = line.get("disposition")
        if isinstance(disposition, str) and disposition not in dispositions:
            dispositions.append(disposition)
        emitted = line.get("emittedEventIds")
        emitted = [event for event in emitted if isinstance(event, str)] if isinstance(emitted, list) else []
        one_to_many = one_to_many or len(emitted) > 1
        for event_id in set(emitted):
            emitters[event_id] = emitters.get(event_id, 0) + 1
    kinds = {
        "one_to_one": bool(interpretations),
        "one_to_many": one_to_many,
        "many_to_one": any(count > 1 for count in emitters.values()),
    }
    return {
        "capture": "on",
        "frameCount": len(frames),
        "byteCount": sum(_int(line.get("byteLength")) or 0 for line in frames),
        "digestVerified": bool(frames) and all(_frame_verified(line) for line in frames),
        "ordered": ordered,
        "dispositions": dispositions,
        "lineage": [kind for kind in LINEAGE_KINDS if kinds[kind]],
        "traceRef": sha256_ref(document),
    }


def rescrub_artifact(artifact: TraceArtifact, scrub: Callable[[str], str]) -> tuple[TraceArtifact, bool]:
    """``artifact`` scrubbed once more with ``scrub``, and whether anything changed.

    Defence in depth for the orchestration, which knows every secret value of the run: each
    frame's bytes are decoded from ``rawBase64`` and scrubbed (a secret inside base64 is
    invisible to text scrubbing), a changed frame gets its ``byteLength``, ``digest`` and
    ``rawBase64`` rebuilt, and other lines are scrubbed as text. Unchanged, the same artifact
    is returned; changed, a new one with a new digest (the observation's ``traceRef`` then names
    the unscrubbed document, which is never stored). Lines that are not JSON are scrubbed as text.
    Raises :class:`TraceIntegrityError` when ``artifact.data`` is not gzip.
    """
    document = gunzip(artifact.data)
    changed = False
    lines: list[bytes] = []
    for raw_line in document.splitlines(keepends=True):
        text = raw_line.decode("utf-8", errors="replace")
        try:
            line = json.loads(text)
        except ValueError:
            line = None
        if isinstance(line, dict) and line.get("kind") == "frame" and isinstance(line.get("rawBase64"), str):
            try:
                content = base64.b64decode(line["rawBase64"], validate=True).decode("utf-8", errors="replace")
            except (binascii.Error, ValueError):
                content = None
            if content is not None:
                scrubbed = scrub(content)
                if scrubbed != content:
                    data = scrubbed.encode("utf-8")
                    line.update(byteLength=len(data), digest=sha256_ref(data), rawBase64=base64.b64encode(data).decode("ascii"))
                    raw_line = (json.dumps(line, separators=(",", ":")) + "\n").encode("utf-8")
                    changed = True
                lines.append(raw_line)
                continue
        scrubbed_text = scrub(text)
        if scrubbed_text != text:
            raw_line = scrubbed_text.encode("utf-8")
            changed = True
        lines.append(raw_line)
    if not changed:
        return artifact, False
    document = b"".join(lines)
    compressor = zlib.compressobj(6, zlib.DEFLATED, GZIP_WBITS)
    data = compressor.compress(document) + compressor.flush()
    return (
        TraceArtifact(
            data=data,
            raw_bytes=len(document),
            stored_bytes=len(data),
            digest=sha256_ref(document),
            frame_count=artifact.frame_count,
            stored_frames=artifact.stored_frames,
            truncated=artifact.truncated,
        ),
        True,
    )
