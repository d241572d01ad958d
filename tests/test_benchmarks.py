"""Benchmarks (pytest-benchmark). Disabled in the normal suite (``--benchmark-disable`` runs each
body once, as a smoke test); ``make bench`` enables them and the results go to docs/benchmarks.md."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from schedules.building import build_schedule, select_schedule
from schedules.coverage import schedule_coverage
from tests.reference import reference_cases, reference_manifest_slots

SEED = "runner-live-seven-week-v1"


def test_benchmark_build_one_night(benchmark) -> None:
    slots, cases = reference_manifest_slots(), reference_cases()
    schedule = benchmark(build_schedule, seed=SEED, rotation_day=3, generated_at="2026-09-06T06:17:00.000Z", slots=slots, cases=cases)
    assert schedule["expectedExecutions"] == 40


def test_benchmark_week_coverage(benchmark) -> None:
    slots, cases = reference_manifest_slots(), reference_cases()
    coverage = benchmark(schedule_coverage, seed=SEED, slots=slots, cases=cases)
    assert all(coverage.values())


def test_benchmark_select_from_night(benchmark) -> None:
    schedule = build_schedule(
        seed=SEED,
        rotation_day=0,
        generated_at="2026-08-24T00:00:00.000Z",
        slots=reference_manifest_slots(),
        cases=reference_cases(),
    )
    selected = benchmark(select_schedule, schedule, candidate_ids=["codex-luna"], limit=5)
    assert selected["expectedExecutions"] == 5


@pytest.mark.django_db
def test_benchmark_nightly_forty_skipped_executions(benchmark, reference_catalog) -> None:
    """Build, coverage-check, save and execute tonight's 40 entries (all skipped: no credentials)."""
    from runs.nightly import start_nightly

    nights = iter(range(10_000))

    def nightly() -> int:
        now = dt.datetime(2026, 1, 1, 4, tzinfo=dt.UTC) + dt.timedelta(days=next(nights))
        outcome = start_nightly(seed=SEED, cost_ceiling_usd=Decimal(12), now=now, environ={}, execute=True)
        return outcome.summary.executions

    assert benchmark.pedantic(nightly, rounds=5, iterations=1) == 40


def _protocol_frames(count: int) -> list[bytes]:
    import json

    frames = []
    for index in range(count):
        delta = {
            "method": "item/agentMessage/delta",
            "params": {"threadId": "t-1", "turnId": "u-1", "itemId": f"m-{index}", "delta": "word " * 40},
        }
        frames.append(json.dumps(delta).encode())
    return frames


def test_benchmark_trace_recording_one_thousand_frames(benchmark) -> None:
    """Recording cost per live execution: 1 000 ~250-byte protocol frames, each scrubbed (secret
    shapes + one exact key value) and written into the compressed trace, then summarised."""
    from evalhub.secrets import redact
    from runs.executors.trace import TraceRecorder

    frames = _protocol_frames(1000)
    key = "fake-key-for-local-test-0123456789abcdef"

    def record() -> dict:
        recorder = TraceRecorder(scrub=lambda text: redact(text, extra_values=[key]))
        for raw in frames:
            frame_id = recorder.frame("in", raw)
            recorder.interpret([frame_id], "mapped", [])
        return recorder.summary()

    summary = benchmark(record)
    assert summary["frameCount"] == 1000 and summary["digestVerified"] is True


@pytest.mark.runtime
def test_benchmark_one_opencode_execution(benchmark, tmp_path) -> None:
    """One whole execution of final-response through the real opencode serve against the scripted
    model, in a loopback-only namespace: the command line's wall time; its phases (start-up, first
    prompt, the whole case, in ms) go to the benchmark's extra info. Only under ``make bench``: an
    execution takes 20-40 s, and the end-to-end tests run this case anyway."""
    from tests.harness.live_support import OPENCODE, run_cli

    if benchmark.disabled:
        pytest.skip("measured by `make bench` only (tests/harness/test_live_opencode_e2e.py runs this case)")
    if not OPENCODE.exists():
        pytest.skip("opencode is not installed (make install)")
    rounds = iter(range(100))
    phases: list[dict] = []

    def execution() -> str:
        run = run_cli("final-response", tmp_path / f"round-{next(rounds)}", candidate="opencode-kimi", timeout_s=300)
        phases.append({**run.result["timings"], "elapsedMs": int(run.elapsed_s * 1000)})
        return run.observation["classification"]

    assert benchmark.pedantic(execution, rounds=5, iterations=1) == "completed"
    benchmark.extra_info["phases"] = phases
