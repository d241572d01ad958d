"""python -m runs.executors.live run-case CASE_ID: one live execution, without the database.

Runs the same code as a live executor (``runs.executors.live.session``) for one case and one candidate of
the bundled reference manifest, against a real runtime, and writes the observation (or the
infrastructure failure) as JSON. With ``--scripts DIR`` a scripted model server on loopback plays
``DIR/<script>.json`` (default: the case id), so the run needs no network — the end-to-end tests
run it inside a loopback-only network namespace. The result is labelled ``"scripted": true``.

Exit status: 0 when an observation was written, 3 when an infrastructure failure was written (the
provider unreachable, the runtime missing: a script sees that it measured nothing), 2 for bad
arguments (an unknown case or candidate, malformed --budget or --price, an unwritable output path,
a missing scripts directory or script, a required variable that is not set), 130 when Ctrl-C or
SIGTERM stopped it (the runtime's process group is killed first and the result says
``"interrupted"``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runs.executors.candidate import CandidateSpec

REFERENCE_DATA = Path(__file__).resolve().parents[3] / "evalhub" / "reference_data"
SCRIPTS = Path(__file__).resolve().parent / "scripts"


def _reference_case(case_id: str) -> dict[str, Any]:
    cases = json.loads((REFERENCE_DATA / "workflow-cases.json").read_text())["cases"]
    for case in cases:
        if case["id"] == case_id:
            prompts_path = REFERENCE_DATA / "case-prompts.json"
            prompts = json.loads(prompts_path.read_text()) if prompts_path.exists() else {}
            return {**case, "prompt": prompts.get(case_id, "")}
    known = ", ".join(case["id"] for case in cases)
    raise ValueError(f"unknown workflow case {case_id!r}; known: {known}")


def _reference_candidate(candidate_id: str) -> dict[str, Any]:
    manifest = json.loads((REFERENCE_DATA / "candidate-manifest.json").read_text())
    for slot in manifest["slots"]:
        for candidate in slot["candidates"]:
            if candidate["id"] == candidate_id:
                return candidate
    raise ValueError(f"unknown candidate {candidate_id!r} (the bundled reference manifest's ids only)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m runs.executors.live", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run-case", help="run one workflow case through a real runtime")
    run.add_argument("case_id", help="a workflow case id, e.g. final-response")
    run.add_argument("--candidate", default="codex-luna", help="candidate id from the reference manifest")
    run.add_argument("--scripts", type=Path, help="directory of scripted-model scripts (serves a scripted model)")
    run.add_argument("--script", help="script name in --scripts (default: the case id)")
    run.add_argument("--budget", help='JSON object overriding budget fields, e.g. {"maxTotalTokens": 50}')
    run.add_argument(
        "--price",
        help='JSON object of US dollars per million tokens, e.g. {"input": 2, "cachedInput": 0.2, "output": 8, '
        '"reasoning": 8} (default: a scripted model bills a known 0, a real one reads no price: unknown cost)',
    )
    run.add_argument("--execution-id", default="rwe-cli0000000000000", help="the execution id the runtime and trace see")
    run.add_argument("--attempt", type=_positive_int, default=1, help="attempt number (1 or more), reported in the metrics")
    run.add_argument("--out", type=Path, help="write the result JSON here (default: stdout)")
    run.add_argument("--trace-out", type=Path, help="write the gzip NDJSON trace artifact here")
    run.add_argument("--debug", action="store_true", help="add the scripted model's answers to the result")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; see the module docstring."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalhub.settings")
    import django

    django.setup()
    from evalhub.conf import evalhub_setting
    from evalhub.interrupts import terminate_as_interrupt
    from runs.executors.base import InfrastructureError
    from runs.executors.candidate import CandidateSpec
    from runs.executors.live.executor import configured_binary, configured_provider, driver_options, scripted_provider_for
    from runs.executors.live.session import run_live_execution

    parser = _parser()
    args = parser.parse_args(argv)
    try:
        case = _reference_case(args.case_id)
        document = _reference_candidate(args.candidate)
        if args.budget:
            document = {**document, "budget": _budget(args.budget, document["budget"])}
        candidate = CandidateSpec.from_snapshot(document)
        price = _price(args.price, candidate.model) if args.price else None
        for path in (args.out, args.trace_out):
            if path is not None and not path.parent.is_dir():
                raise ValueError(f"cannot write {path}: the directory {path.parent} does not exist")
        scripts = _scripts(args.scripts, args.script or args.case_id) if args.scripts else None
    except ValueError as exc:
        parser.error(str(exc))
    names = candidate.required_environment
    missing = [name for name in names if not os.environ.get(name)]
    if missing:
        parser.error(
            f"set {', '.join(missing)} in the environment: candidate {candidate.id} requires it "
            "(any value will do against a scripted model; it is scrubbed everywhere)"
        )
    server = None
    if scripts is not None:
        from runs.executors.live.scripted_model import ScriptedModelServer

        name = args.script or args.case_id
        server = ScriptedModelServer(scripts)
        root = server.start()
        provider = scripted_provider_for(candidate, _driver_for(candidate), f"{root}/scripts/{name}/v1")
    else:
        provider = configured_provider(candidate)
    required = {name: os.environ.get(name, "") for name in names}
    result: dict[str, Any] = {"caseId": case["id"], "candidateId": candidate.id, "scripted": provider.scripted}
    artifacts: list[Any] = []
    interrupted = None
    try:
        with terminate_as_interrupt():
            live = run_live_execution(
                execution_id=args.execution_id,
                case=case,
                candidate=candidate,
                prompt=case["prompt"],
                provider=provider,
                driver_factory=(driver := _driver_for(candidate)),
                binary=configured_binary(driver.runtime_key),
                required_environment=required,
                allowlist=tuple(evalhub_setting("RUNTIME_ENV_ALLOWLIST") or ()),
                trace_cap_bytes=int(evalhub_setting("TRACE_CAP_BYTES")),
                attempt=args.attempt,
                price=price,
                artifact_sink=artifacts.append,
                driver_options=driver_options(driver),
            )
        result["observation"] = live.observation
        result["error"] = None
        result["timings"] = live.timings
    except InfrastructureError as error:
        result["observation"] = None
        result["error"] = {"code": error.code, "retryable": error.retryable, "message": error.message}
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: the runtime's process group is already killed
        interrupted = exc
        result["observation"] = None
        result["error"] = {"code": "interrupted", "retryable": True, "message": f"interrupted ({exc or 'Ctrl-C'}): nothing was measured"}
    finally:
        if server is not None:
            result["modelRequests"] = len(server.requests)
            if args.debug:
                result["modelLog"] = [
                    {"step": request.get("step"), "answer": request.get("answer"), "conversation": request.get("conversation")}
                    for request in server.requests
                ]
            server.stop()
    if artifacts:
        artifact = artifacts[-1]
        result["trace"] = {
            "digest": artifact.digest,
            "frameCount": artifact.frame_count,
            "rawBytes": artifact.raw_bytes,
            "truncated": artifact.truncated,
        }
        if args.trace_out:
            args.trace_out.write_bytes(artifact.data)
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text + "\n")
    if interrupted is not None:
        return 130
    return 3 if result["error"] is not None else 0


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError("must be between 1 and 1000")
    return value


def _json_object(text: str, option: str) -> dict[str, Any]:
    from evalhub.jsonio import loads_strict

    try:
        value = loads_strict(text)
    except ValueError as exc:
        raise ValueError(f"{option} is not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{option} must be a JSON object")
    return value


#: --budget fields: name → (whole number?, upper bound).
BUDGET_FIELDS = {
    "maxLatencyMs": (True, 86_400_000),
    "maxAttempts": (True, 100),
    "maxTotalTokens": (True, 10**12),
    "maxCostUsd": (False, 100_000),
}


def _budget(text: str, budget: dict[str, Any]) -> dict[str, Any]:
    """``--budget`` JSON merged over the candidate's budget; ValueError naming what to fix."""
    fields = _json_object(text, "--budget")
    unknown = sorted(set(fields) - set(BUDGET_FIELDS))
    if unknown:
        raise ValueError(f"--budget: unknown field(s) {', '.join(unknown)}; allowed: {', '.join(BUDGET_FIELDS)}")
    for key, value in fields.items():
        whole, upper = BUDGET_FIELDS[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (whole and not isinstance(value, int)):
            raise ValueError(f"--budget: {key} must be a {'whole ' if whole else ''}number, not {value!r}")
        if not 0 < value <= upper:
            raise ValueError(f"--budget: {key} must be above 0 and at most {upper}")
    return {**budget, **fields}


def _scripts(directory: Path, name: str) -> dict[str, Any]:
    from runs.executors.live.script_schema import load_scripts_dir

    scripts = load_scripts_dir(directory)  # ValueError naming the bad script or missing directory
    if name not in scripts:
        raise ValueError(f"no script {name!r} in {directory} (it has: {', '.join(sorted(scripts)) or 'none'})")
    return scripts


def _price(text: str, model: str) -> Any:
    """``--price`` JSON (USD per million tokens; missing fields are 0) → ``pricing.Price``."""
    from decimal import Decimal

    from runs.executors.live.pricing import Price

    fields = _json_object(text, "--price")
    if set(fields) - {"input", "cachedInput", "output", "reasoning"}:
        raise ValueError("--price needs a JSON object with input, cachedInput, output and/or reasoning")
    for key, value in fields.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 10_000:
            raise ValueError(f"--price: {key} must be a number of USD per million tokens from 0 to 10000, not {value!r}")
    money = {key: Decimal(str(fields.get(key, 0))) for key in ("input", "cachedInput", "output", "reasoning")}
    return Price(
        model=model,
        input=money["input"],
        cached_input=money["cachedInput"],
        output=money["output"],
        reasoning=money["reasoning"],
    )


def _driver_for(candidate: CandidateSpec) -> Any:
    from runs.executors import executor_class

    return executor_class(candidate.adapter)().driver_factory(candidate)


if __name__ == "__main__":
    sys.exit(main())
