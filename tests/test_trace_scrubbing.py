"""Scrubbing replaces the secret and nothing else: a JSON frame is still JSON, with the same keys.

The frames come from real runs: ``tests/fixtures/codex-frames.json`` holds raw protocol frames
the real ``codex app-server`` exchanged with evalhub's scripted model in the end-to-end tests (two
of each method and direction). The tests put secrets into every string of every frame, serialise
the frame as the runtime does (compact, UTF-8; and escaped, as Python's ``json`` writes it), scrub
it, and parse it back. Before the scrubber respected JSON, ``Authorization: Bearer …`` inside a
compact frame swallowed the rest of the line (``"},"emittedAtMs":…``) and the frame was no longer
JSON. Every secret here is synthetic and assembled by concatenation.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from evalhub.secrets import REDACTION, redact, redact_data
from runs.executors.trace import TraceRecorder, gunzip, rescrub_artifact

pytestmark = pytest.mark.database_free

FRAMES = json.loads((Path(__file__).parent / "fixtures" / "codex-frames.json").read_text())["frames"]
JSON_FRAMES = [frame["text"] for frame in FRAMES if frame["direction"] != "stderr"]
KEY = "sk-test-echo-" + "a1B2c3D4e5F6g7H8" + "XYZ"
BEARER = "Authorization: Bearer " + KEY
GITHUB = "ghp_" + "A1b2" * 9
PEM = "-----BEGIN RSA PRIVATE KEY-----\n" + "MIIEow" + "A1b2" * 12 + "\n-----END RSA PRIVATE KEY-----"


def _compact(document: Any, *, ascii_only: bool) -> str:
    # The runtime writes compact UTF-8 JSON (serde_json); Python's default escapes non-ASCII.
    return json.dumps(document, separators=(",", ":"), ensure_ascii=ascii_only)


def _with_secret(value: Any, secret: str, *, at: str) -> Any:
    """``value`` with ``secret`` put into every string value (never into a key)."""
    if isinstance(value, str):
        return {"end": f"{value} {secret}", "start": f"{secret} {value}", "middle": f"{value} {secret} — more"}[at]
    if isinstance(value, dict):
        return {key: _with_secret(child, secret, at=at) for key, child in value.items()}
    if isinstance(value, list):
        return [_with_secret(child, secret, at=at) for child in value]
    return value


def _keys(value: Any, path: str = "$") -> list[str]:
    if isinstance(value, dict):
        return [f"{path}.{key}" for key in value] + [item for key, child in value.items() for item in _keys(child, f"{path}.{key}")]
    if isinstance(value, list):
        return [item for index, child in enumerate(value) for item in _keys(child, f"{path}[{index}]")]
    return []


def test_the_fixture_holds_real_frames_and_no_secret() -> None:
    assert len(JSON_FRAMES) >= 40
    methods = {json.loads(text).get("method") for text in JSON_FRAMES}
    assert {"item/agentMessage/delta", "item/completed", "turn/completed", "thread/tokenUsage/updated"} <= methods
    for frame in FRAMES:
        assert redact(frame["text"]) == frame["text"]


def test_a_bearer_header_in_a_compact_frame_leaves_the_rest_of_the_line_alone() -> None:
    frame = (
        '{"method":"item/agentMessage/delta","params":{"threadId":"t-1","itemId":"msg_2","delta":"'
        + BEARER
        + '"},"emittedAtMs":1712345678901}'
    )

    scrubbed = redact(frame, extra_values=[KEY])

    assert json.loads(scrubbed) == {
        "method": "item/agentMessage/delta",
        "params": {"threadId": "t-1", "itemId": "msg_2", "delta": "Authorization: " + REDACTION},
        "emittedAtMs": 1712345678901,
    }
    assert scrubbed == frame.replace("Bearer " + KEY, REDACTION)


@pytest.mark.parametrize("ascii_only", [False, True], ids=["utf8", "escaped"])
@pytest.mark.parametrize("at", ["end", "start", "middle"])
@pytest.mark.parametrize("secret", [BEARER, GITHUB, PEM, KEY], ids=["bearer", "github", "pem", "exact-key"])
def test_every_recorded_frame_stays_json_with_the_same_keys(secret: str, at: str, ascii_only: bool) -> None:
    for text in JSON_FRAMES:
        original = json.loads(text)
        leaky = _with_secret(original, secret, at=at)

        scrubbed = redact(_compact(leaky, ascii_only=ascii_only), extra_values=[KEY])

        parsed = json.loads(scrubbed)  # raises if scrubbing broke the frame
        assert _keys(parsed) == _keys(original), text[:120]
        # String by string, exactly what scrubbing each value alone gives: the secret replaced,
        # nothing else touched.
        assert parsed == redact_data(leaky, extra_values=[KEY]), text[:120]
        assert KEY not in scrubbed and GITHUB not in scrubbed and "A1b2A1b2" not in scrubbed


def test_frames_without_a_secret_are_returned_byte_for_byte() -> None:
    for text in JSON_FRAMES:
        assert redact(text, extra_values=[KEY]) == text


def test_a_secret_hidden_by_json_escapes_is_found_and_the_escapes_are_never_cut() -> None:
    hidden = "sk-\\u0070roj-" + "A1b2" * 5  # "sk-proj-…" with the p escaped
    frame = '{"a":"x\\n' + hidden + '\\u00e9\\"","b":"Bearer\\t' + "A1b2" * 5 + '\\\\"}'

    scrubbed = redact(frame)

    assert json.loads(scrubbed) == {"a": "x\n" + REDACTION + 'é"', "b": REDACTION + "\\"}
    assert scrubbed == '{"a":"x\\n' + REDACTION + '\\u00e9\\"","b":"' + REDACTION + '\\\\"}'


def test_a_known_value_in_a_number_true_false_or_null_becomes_a_redacted_string() -> None:
    frame = '{"pin":12345678,"ok":true,"list":[1,12345678.5,null]}'

    scrubbed = redact(frame, extra_values=["12345678", "true", "null"])

    assert json.loads(scrubbed) == {"pin": REDACTION, "ok": REDACTION, "list": [1, REDACTION, REDACTION]}


def test_ndjson_lines_are_each_kept_json_and_plain_lines_between_them_are_scrubbed() -> None:
    line = '{"headers":{"Authorization":"Bearer ' + KEY + '","X-Request":"r-1"}}'
    text = line + "\nlog: Bearer " + KEY + " failed\n" + line + "\n"

    scrubbed = redact(text)

    first, middle, last, end = scrubbed.split("\n")
    assert json.loads(first) == json.loads(last) == {"headers": {"Authorization": REDACTION, "X-Request": "r-1"}}
    assert middle == "log: " + REDACTION + " failed" and end == ""


def test_a_bearer_token_in_plain_text_ends_at_the_closing_quote() -> None:
    # A log line that is not JSON as a whole, quoting a JSON body: the token is bounded.
    text = 'sent {"Authorization":"Bearer ' + KEY + '","X-Other":"value"} to the provider'

    assert redact(text) == 'sent {"Authorization":"' + REDACTION + '","X-Other":"value"} to the provider'
    assert redact("headers={'Authorization': 'Bearer " + KEY + "', 'Accept': 'json'}") == (
        "headers={'Authorization': '" + REDACTION + "', 'Accept': 'json'}"
    )


def test_a_bearer_token_split_across_two_strings_is_not_a_secret_in_either() -> None:
    # What the reference's open-ended \S{16,} would see across the quotes is two short strings.
    frame = '{"a":"Bearer abcdefgh","b":"ijklmnopqrstu"}'

    assert redact(frame) == frame


def _recorded(frames: list[str], *, scrub: Any) -> list[bytes]:
    recorder = TraceRecorder(scrub=scrub)
    for text in frames:
        recorder.frame("in", text.encode())
    document = gunzip(recorder.artifact().data)
    return [base64.b64decode(json.loads(line)["rawBase64"]) for line in document.splitlines()]


def test_the_recorder_and_the_second_scrub_store_only_json_frames() -> None:
    leaky = [_compact(_with_secret(json.loads(text), BEARER, at="end"), ascii_only=False) for text in JSON_FRAMES]
    recorder = TraceRecorder(scrub=redact)  # secret shapes only: the key value is not known to it
    for text in leaky:
        recorder.frame("in", text.encode())

    for raw in _recorded(leaky, scrub=redact):
        json.loads(raw)
    # The orchestration scrubs once more with the run's secret values (runs.settlement.trace_row).
    clean, _ = rescrub_artifact(recorder.artifact(), lambda text: redact(text, extra_values=[KEY]))
    for line in gunzip(clean.data).splitlines():
        record = json.loads(line)
        if record["kind"] == "frame":
            raw = base64.b64decode(record["rawBase64"])
            assert KEY.encode() not in raw
            json.loads(raw)
