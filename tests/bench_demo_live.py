"""Where a scripted night's time goes: ``manage.py demo_live`` timed, then split from its records.

Run (part of ``make bench-demo-live``; the numbers go into docs/benchmarks.md):

    .venv/bin/python tests/bench_demo_live.py [--reuse RUN_ID] [demo_live selectors...]

Migrates a fresh SQLite database in a temporary folder (or, with ``--reuse``, reads a run
already in ``EVALHUB_SQLITE_PATH``), runs ``demo_live`` there and prints, per runtime and for the
whole night (seconds):

* **runtime start-up** — from the execution's start until the runtime took its first prompt
  (spawn, handshake, MCP connection, session; the first frame that starts a turn: codex
  ``turn/start``, opencode ``prompt_async``, ACP ``session/prompt``);
* **model turns** — from each turn's prompt to the frame that ends it (codex ``turn/completed``,
  opencode's ``session.status`` idle, the ACP ``session/prompt`` answer): the runtime working
  with the scripted model, restarts and their start-up inside a turn included;
* **evalhub's own work in an execution** — the rest of the attempt's duration: control plane,
  case driver between turns, stopping the runtime, the trace;
* **orchestration** — the night's wall time minus the executions' durations (Django start-up,
  schedule, bookkeeping, scoring, the report).

Nothing here is asserted: it measures.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = ROOT / ".venv" / "bin" / "python"


def _frames(document: bytes) -> list[dict]:
    frames = []
    for line in gzip.decompress(document).splitlines():
        record = json.loads(line)
        if record.get("kind") == "frame":
            text = base64.b64decode(record.get("rawBase64", "")).decode("utf-8", "replace")
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = None
            frames.append({**record, "text": text, "json": parsed if isinstance(parsed, dict) else None})
    return frames


def _starts_turn(frame: dict) -> bool:
    if frame["direction"] != "out":
        return False
    message = frame["json"] or {}
    return message.get("method") in ("turn/start", "session/prompt") or (
        frame["text"].startswith("POST /session/") and "/prompt_async " in frame["text"].split("\r\n", 1)[0]
    )


def _ends_turn(frame: dict) -> bool:
    if frame["direction"] != "in":
        return False
    message = frame["json"] or {}
    if message.get("method") == "turn/completed":
        return True
    if isinstance(message.get("result"), dict) and "stopReason" in message["result"]:
        return True
    if message.get("type") == "session.status":
        return ((message.get("properties") or {}).get("status") or {}).get("type") == "idle"
    return False


def split_execution(frames: list[dict]) -> tuple[float, float]:
    """``(start-up s, model turns s)`` of one execution's trace frames."""
    start = next((f["atMs"] for f in frames if _starts_turn(f)), None)
    if start is None:
        return 0.0, 0.0
    turns, opened = 0, None
    for frame in frames:
        if opened is None and _starts_turn(frame):
            opened = frame["atMs"]
        elif opened is not None and _ends_turn(frame):
            turns += frame["atMs"] - opened
            opened = None
    return start / 1000, turns / 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reuse", type=int, help="report on this run of EVALHUB_SQLITE_PATH instead of running demo_live")
    args, selectors = parser.parse_known_args(argv)
    environment = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    wall = None
    if args.reuse is None:
        folder = Path(tempfile.mkdtemp(prefix="evalhub-bench-demo-"))
        environment["EVALHUB_SQLITE_PATH"] = str(folder / "demo.sqlite3")
        for command in (["migrate", "--no-input"], ["load_reference"]):
            subprocess.run([str(PYTHON), "manage.py", *command], cwd=ROOT, env=environment, check=True, capture_output=True)
        started = time.monotonic()
        subprocess.run([str(PYTHON), "manage.py", "demo_live", "--no-progress", *selectors], cwd=ROOT, env=environment, check=True)
        wall = time.monotonic() - started
    os.environ.update(environment)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalhub.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from runs.models import Run, TraceArtifact

    run = Run.objects.get(pk=args.reuse) if args.reuse is not None else Run.objects.order_by("-pk").first()
    by_runtime: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    classifications: dict[str, int] = defaultdict(int)
    for execution in run.executions.select_related().order_by("position"):
        classifications[execution.classification or "pending"] += 1
        attempt = execution.attempts.order_by("-number").first()
        artifact = TraceArtifact.objects.filter(execution=execution).order_by("-attempt").first()
        if attempt is None or artifact is None:
            continue
        start_s, turns_s = split_execution(_frames(bytes(artifact.data)))
        duration_s = attempt.duration_ms / 1000
        by_runtime[execution.candidate_key.split("-")[0] + ":" + execution.candidate_key].append((duration_s, start_s, turns_s))
    if wall is None and run.started_at and run.finished_at:
        wall = (run.finished_at - run.started_at).total_seconds()
    print(f"run {run.pk}: {run.executions.count()} executions {dict(classifications)}; wall {wall:.1f} s")
    print(f"{'candidate':<32} {'n':>3} {'exec s (median)':>16} {'start-up s':>11} {'turns s':>8} {'evalhub s':>10}")
    totals = [0.0, 0.0, 0.0, 0.0]
    for name, rows in sorted(by_runtime.items()):
        durations, starts, turns = (sum(r[i] for r in rows) for i in range(3))
        own = durations - starts - turns
        totals = [totals[0] + durations, totals[1] + starts, totals[2] + turns, totals[3] + own]
        median = statistics.median(r[0] for r in rows)
        print(f"{name.split(':', 1)[1]:<32} {len(rows):>3} {median:>16.1f} {starts:>11.1f} {turns:>8.1f} {own:>10.1f}")
    print(f"{'all executions (sum)':<32} {'':>3} {totals[0]:>16.1f} {totals[1]:>11.1f} {totals[2]:>8.1f} {totals[3]:>10.1f}")
    if wall is not None:
        print(f"orchestration (wall - executions): {wall - totals[0]:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
