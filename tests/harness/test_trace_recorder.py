"""The trace recorder: scrubbed frames in order, interpretations, the size cap, the reference
``traceLineage`` summary and digest-checked reads. No database."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import threading
from functools import partial

import pytest

from evalhub.secrets import redact
from runs.executors.live.contracts import EventLog
from runs.executors.trace import (
    TraceIntegrityError,
    TraceRecorder,
    read_artifact,
    rescrub_artifact,
    summarize_ndjson,
)

pytestmark = pytest.mark.database_free

#: Synthetic secrets, assembled by concatenation.
KEY_VALUE = "plain-" + "key-value-0042"
OPENAI_SHAPE = "sk-" + "proj-" + "FAKEfakeFAKE_0123456789-abcdefghijklmnop"


def recorder(**kwargs) -> TraceRecorder:
    clock = iter(range(0, 10_000, 5))
    return TraceRecorder(scrub=partial(redact, extra_values=[KEY_VALUE]), clock_ms=lambda: next(clock), **kwargs)


def lines(trace: TraceRecorder) -> list[dict]:
    return [json.loads(line) for line in trace.ndjson().decode().splitlines()]


def events(*types: str) -> list:
    log = EventLog()
    return [log.emit(event_type, source="runtime") for event_type in types]


def test_frames_are_numbered_in_order_and_described_by_their_scrubbed_bytes() -> None:
    trace = recorder()

    first = trace.frame("out", b'{"method":"initialize"}')
    second = trace.frame("in", f'{{"key":"{KEY_VALUE}","auth":"{OPENAI_SHAPE}"}}'.encode())

    assert (first, second) == (1, 2)
    frame = lines(trace)[1]
    raw = base64.b64decode(frame["rawBase64"])
    assert raw == b'{"key":"[REDACTED]","auth":"[REDACTED]"}'
    assert frame == {
        "kind": "frame",
        "frameId": 2,
        "debugSequence": 2,
        "direction": "in",
        "atMs": 5,
        "byteLength": len(raw),
        "digest": "sha256:" + hashlib.sha256(raw).hexdigest(),
        "rawBase64": frame["rawBase64"],
    }
    assert list(frame) == ["kind", "frameId", "debugSequence", "direction", "atMs", "byteLength", "digest", "rawBase64"]


def test_no_secret_survives_anywhere_in_the_stored_trace() -> None:
    trace = recorder()
    trace.frame("in", f"Authorization: Bearer {KEY_VALUE} and {OPENAI_SHAPE}".encode())
    trace.frame("stderr", KEY_VALUE.encode())

    document = gzip.decompress(trace.artifact().data)
    decoded = b"".join(base64.b64decode(line["rawBase64"]) for line in lines(trace))

    for secret in (KEY_VALUE, OPENAI_SHAPE):
        assert secret.encode() not in document
        assert secret.encode() not in decoded


def test_invalid_utf8_is_replaced_and_the_digest_still_verifies() -> None:
    trace = recorder()
    trace.frame("in", b"ok \xff\xfe end")

    raw = base64.b64decode(lines(trace)[0]["rawBase64"])
    assert raw == "ok \ufffd\ufffd end".encode()
    assert trace.summary()["digestVerified"] is True


def test_each_interpreted_frame_gets_one_interpretation_line() -> None:
    trace = recorder()
    ids = [trace.frame("in", b"delta 1"), trace.frame("in", b"delta 2")]
    completed = events("item.completed")

    trace.interpret(ids, "mapped", completed)

    interpretations = [line for line in lines(trace) if line["kind"] == "interpretation"]
    assert interpretations == [
        {"kind": "interpretation", "frameId": 1, "disposition": "mapped", "emittedEventIds": ["evt-1"], "eventTypes": ["item.completed"]},
        {"kind": "interpretation", "frameId": 2, "disposition": "mapped", "emittedEventIds": ["evt-1"], "eventTypes": ["item.completed"]},
    ]


def test_the_summary_is_the_reference_trace_lineage() -> None:
    trace = recorder()
    one = trace.frame("in", b"turn started")
    many = trace.frame("in", b"item completed with usage")
    deltas = [trace.frame("in", b"d1"), trace.frame("in", b"d2")]
    noise = trace.frame("stderr", b"warning")
    started, completed, usage, message = events("turn.started", "item.completed", "usage.updated", "item.completed")

    trace.interpret([one], "mapped", [started])
    trace.interpret([many], "generic", [completed, usage])
    trace.interpret(deltas, "mapped", [message])
    trace.interpret([noise], "ignored", [])

    summary = trace.summary()
    document = trace.ndjson()
    assert summary == {
        "capture": "on",
        "frameCount": 5,
        "byteCount": len(b"turn started") + len(b"item completed with usage") + 2 + 2 + len(b"warning"),
        "digestVerified": True,
        "ordered": True,
        "dispositions": ["mapped", "generic", "ignored"],
        "lineage": ["one_to_one", "one_to_many", "many_to_one"],
        "traceRef": "sha256:" + hashlib.sha256(document).hexdigest(),
    }


def test_nothing_recorded_is_capture_off_with_zeros() -> None:
    assert recorder().summary() == {
        "capture": "off",
        "frameCount": 0,
        "byteCount": 0,
        "digestVerified": False,
        "ordered": False,
        "dispositions": [],
        "lineage": [],
    }


def test_a_frame_past_the_cap_is_counted_not_stored_and_costs_no_scrubbing() -> None:
    calls: list[int] = []

    def counting_scrub(text: str) -> str:
        calls.append(len(text))
        return text

    trace = TraceRecorder(scrub=counting_scrub, cap_bytes=600)
    for index in range(10):
        trace.frame("in", b"x" * 100)
        trace.interpret([index + 1], "mapped", events("item.completed"))

    artifact = trace.artifact()
    stored = gzip.decompress(artifact.data)
    assert artifact.truncated is True
    assert artifact.frame_count == 10
    assert artifact.raw_bytes == len(stored) <= 600
    assert stored.endswith(b"\n")  # whole lines only
    assert len(calls) == artifact.stored_frames + 1  # the frame that hit the cap, then none
    assert trace.frame("out", b"more") == 11
    assert len(calls) == artifact.stored_frames + 1
    summary = trace.summary()
    assert (summary["frameCount"], summary["digestVerified"], summary["ordered"]) == (artifact.stored_frames, True, True)


def test_the_artifact_digest_is_the_trace_ref_and_reads_back_verified() -> None:
    trace = recorder()
    trace.frame("out", b"hello")
    trace.interpret([1], "operator_only", [])

    artifact = trace.artifact()

    assert artifact.digest == trace.summary()["traceRef"]
    assert artifact.stored_bytes == len(artifact.data)
    assert read_artifact(artifact.data, artifact.digest) == trace.ndjson()
    # Recording goes on after a snapshot.
    trace.frame("in", b"again")
    assert trace.summary()["frameCount"] == 2
    assert trace.artifact().digest != artifact.digest


def test_a_tampered_or_unreadable_artifact_is_refused() -> None:
    trace = recorder()
    trace.frame("in", b"original")
    artifact = trace.artifact()
    forged = gzip.compress(gzip.decompress(artifact.data).replace(b"frame", b"frame "))

    with pytest.raises(TraceIntegrityError, match="does not match its recorded digest"):
        read_artifact(forged, artifact.digest)
    with pytest.raises(TraceIntegrityError, match="not a readable gzip stream"):
        read_artifact(b"not gzip at all", artifact.digest)


def frame_line(frame_id: int, raw: bytes, **overrides) -> str:
    line = {
        "kind": "frame",
        "frameId": frame_id,
        "debugSequence": frame_id,
        "direction": "in",
        "atMs": 0,
        "byteLength": len(raw),
        "digest": "sha256:" + hashlib.sha256(raw).hexdigest(),
        "rawBase64": base64.b64encode(raw).decode(),
    }
    line.update(overrides)
    return json.dumps(line)


def test_bad_lines_are_skipped_as_the_reference_does() -> None:
    document = "\n".join(["not json", "[1, 2]", frame_line(1, b"a"), "{", frame_line(2, b"bc")]).encode()

    summary = summarize_ndjson(document)

    assert (summary["frameCount"], summary["byteCount"], summary["digestVerified"], summary["ordered"]) == (2, 3, True, True)


@pytest.mark.parametrize(
    "overrides",
    [
        {"digest": "sha256:" + "0" * 64},
        {"byteLength": 99},
        {"rawBase64": "!!!not base64"},
    ],
)
def test_a_frame_whose_bytes_do_not_match_fails_digest_verification(overrides) -> None:
    document = "\n".join([frame_line(1, b"good"), frame_line(2, b"bad", **overrides)]).encode()

    assert summarize_ndjson(document)["digestVerified"] is False


@pytest.mark.parametrize(
    "second",
    [
        frame_line(1, b"b"),  # frame id repeats
        frame_line(2, b"b", debugSequence=1),  # debug sequence goes back
    ],
)
def test_frames_out_of_order_are_not_ordered(second: str) -> None:
    document = "\n".join([frame_line(1, b"a"), second]).encode()

    assert summarize_ndjson(document)["ordered"] is False


def test_lineage_kinds_come_from_the_interpretations() -> None:
    def interpretation(frame_id: int, emitted: list[str]) -> str:
        return json.dumps({"kind": "interpretation", "frameId": frame_id, "disposition": "mapped", "emittedEventIds": emitted})

    only_one = "\n".join([frame_line(1, b"a"), interpretation(1, ["evt-1"])]).encode()
    fan_out = "\n".join([frame_line(1, b"a"), interpretation(1, ["evt-1", "evt-2"])]).encode()

    assert summarize_ndjson(only_one)["lineage"] == ["one_to_one"]
    assert summarize_ndjson(fan_out)["lineage"] == ["one_to_one", "one_to_many"]


def test_concurrent_recording_keeps_ids_and_lines_in_order() -> None:
    trace = recorder()

    def record(direction: str) -> None:
        for _ in range(200):
            trace.frame(direction, b"frame")

    threads = [threading.Thread(target=record, args=(direction,)) for direction in ("in", "out", "stderr")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    summary = trace.summary()
    assert (summary["frameCount"], summary["ordered"], summary["digestVerified"]) == (600, True, True)


def test_unknown_directions_and_dispositions_are_driver_bugs() -> None:
    trace = recorder()
    with pytest.raises(ValueError, match="unknown trace direction 'sideways'"):
        trace.frame("sideways", b"x")
    with pytest.raises(ValueError, match="unknown trace disposition 'maybe'"):
        trace.interpret([1], "maybe", [])


def test_rescrubbing_finds_a_secret_hidden_in_base64_and_rebuilds_the_frame() -> None:
    leaky = TraceRecorder(scrub=lambda text: text)
    leaky.frame("in", f"the key is {KEY_VALUE}".encode())
    leaky.frame("out", b"clean")
    artifact = leaky.artifact()
    assert KEY_VALUE.encode() not in gzip.decompress(artifact.data)  # only base64: text scrubbing misses it

    clean, changed = rescrub_artifact(artifact, partial(redact, extra_values=[KEY_VALUE]))

    document = read_artifact(clean.data, clean.digest)
    frames = [json.loads(line) for line in document.decode().splitlines()]
    assert changed is True
    assert base64.b64decode(frames[0]["rawBase64"]) == b"the key is [REDACTED]"
    assert summarize_ndjson(document)["digestVerified"] is True
    assert (clean.frame_count, clean.raw_bytes, clean.stored_bytes) == (2, len(document), len(clean.data))


def test_rescrubbing_a_clean_trace_returns_it_unchanged() -> None:
    trace = recorder()
    trace.frame("in", b"nothing secret")
    artifact = trace.artifact()

    assert rescrub_artifact(artifact, partial(redact, extra_values=[KEY_VALUE])) == (artifact, False)
