"""``make bench``'s comparison with the reference implementation: building one night and the
week's coverage in evalhub (in-process) and in the reference TypeScript on node, timed in the
same run with interleaved repeats. Prints a Markdown table (copied into docs/benchmarks.md).

Run as ``python tests/bench_node.py PATH`` where ``PATH`` is the folder holding the reference's
``live-workflow-matrix.ts`` and its two imports (``EVALHUB_REFERENCE_SEED`` when no argument is
given). Without it the benchmark says so and exits 0. The reference files are copied into a
temporary folder only, compiled there with the ``typescript`` package from the npm registry
(installed into that folder), and never enter the repository.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SEED = "runner-live-seven-week-v1"
TYPESCRIPT = "typescript@^5.4"
FILES = ("live-workflow-matrix.ts", "workflow-catalog.ts", "workflow-contracts.ts")

# The node side: times ``calls`` calls of each function and prints the seconds per call.
HARNESS = """
import { buildRunnerLiveEvalSchedule, runnerLiveScheduleCoverage } from "./live-workflow-matrix.js";
const calls = Number(process.argv[2]);
const seed = "%(seed)s";
function time(fn) {
  for (let i = 0; i < Math.min(calls, 200); i += 1) fn();
  const started = process.hrtime.bigint();
  for (let i = 0; i < calls; i += 1) fn();
  return Number(process.hrtime.bigint() - started) / 1e9 / calls;
}
const build = time(() => buildRunnerLiveEvalSchedule({ seed, rotationDay: 3, generatedAt: "2026-09-06T06:17:00.000Z" }));
const coverage = time(() => runnerLiveScheduleCoverage(seed));
const check = buildRunnerLiveEvalSchedule({ seed, rotationDay: 3, generatedAt: "2026-09-06T06:17:00.000Z" });
console.log(JSON.stringify({ build, coverage, expected: check.expectedExecutions, first: check.entries[0].executionId }));
"""


def compile_reference(source: Path, work: Path) -> Path:
    """Copy the reference files into ``work``, install TypeScript there and compile them to ES modules."""
    for name in FILES:
        shutil.copy(source / name, work / name)
    (work / "package.json").write_text(json.dumps({"name": "reference-bench", "private": True, "type": "module"}))
    (work / "harness.mjs").write_text(HARNESS % {"seed": SEED})
    subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", TYPESCRIPT], cwd=work, check=True, capture_output=True)
    tsc = work / "node_modules" / ".bin" / "tsc"
    subprocess.run(
        [str(tsc), "--target", "es2022", "--module", "nodenext", "--moduleResolution", "nodenext", "--skipLibCheck", *FILES],
        cwd=work,
        check=False,  # type errors (node's types are not installed) still emit JavaScript
        capture_output=True,
    )
    if not (work / "live-workflow-matrix.js").exists():
        raise SystemExit("tsc did not compile the reference (is the path right?)")
    return work / "harness.mjs"


def node_side(harness: Path, calls: int) -> dict:
    done = subprocess.run(["node", str(harness), str(calls)], cwd=harness.parent, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def python_side(calls: int) -> dict:
    from schedules.building import build_schedule
    from schedules.coverage import schedule_coverage
    from tests.reference import reference_cases, reference_manifest_slots

    slots, cases = reference_manifest_slots(), reference_cases()

    def build() -> dict:
        return build_schedule(seed=SEED, rotation_day=3, generated_at="2026-09-06T06:17:00.000Z", slots=slots, cases=cases)

    def coverage() -> dict:
        return schedule_coverage(seed=SEED, slots=slots, cases=cases)

    def per_call(fn, n: int) -> float:
        for _ in range(min(n, 200)):
            fn()
        started = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - started) / n

    check = build()
    return {
        "build": per_call(build, calls),
        "coverage": per_call(coverage, max(calls // 10, 1)),
        "expected": check["expectedExecutions"],
        "first": check["entries"][0]["executionId"],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("path", nargs="?", default=os.environ.get("EVALHUB_REFERENCE_SEED", ""))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2000)
    options = parser.parse_args()
    source = Path(options.path) if options.path else None
    if source is None or not all((source / name).is_file() for name in FILES):
        print(f"bench_node: skipped — give the folder holding {', '.join(FILES)} (argument or EVALHUB_REFERENCE_SEED)")
        return
    if shutil.which("node") is None or shutil.which("npm") is None:
        print("bench_node: skipped — node and npm are needed")
        return
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalhub.settings")
    import django

    django.setup()
    work = Path(tempfile.mkdtemp(prefix="evalhub-node-bench-"))
    try:
        harness = compile_reference(source, work)
        ours: dict[str, list[float]] = {"build": [], "coverage": []}
        theirs: dict[str, list[float]] = {"build": [], "coverage": []}
        for _ in range(options.repeats):
            node = node_side(harness, options.calls)
            python = python_side(options.calls)
            # Same night, same execution ids: both sides built the same schedule.
            assert (node["expected"], node["first"]) == (python["expected"], python["first"]), (node, python)
            for key in ours:
                ours[key].append(python[key])
                theirs[key].append(node[key])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{options.repeats} interleaved repeats; load average: {os.getloadavg()[0]:.1f}")
    print("| measure | evalhub min / median | reference on node min / median | ratio (medians) | goal | |")
    print("|---|---|---|---|---|---|")
    for key, label in (("build", "build one night, in-process"), ("coverage", "the week's coverage, in-process")):
        ratio = statistics.median(ours[key]) / statistics.median(theirs[key])
        print(
            f"| {label} | {_us(min(ours[key]))} / {_us(statistics.median(ours[key]))} | {_us(min(theirs[key]))} / "
            f"{_us(statistics.median(theirs[key]))} | {ratio:.1f}× | ≤ 1.5× | {'met' if ratio <= 1.5 else 'not met'} |"
        )


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.0f} µs" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


if __name__ == "__main__":
    main()
