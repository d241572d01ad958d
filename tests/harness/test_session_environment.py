"""The runtime's environment, as the live session hands it to the driver: the allow-listed host
variables, the candidate's required variables, a private HOME and TMPDIR, and nothing else of
the host (no other candidate's key, no evalhub setting)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runs.executors.base import InfrastructureError
from runs.executors.candidate import CandidateSpec
from runs.executors.live.session import run_live_execution
from runs.executors.providers import ProviderConfig

pytestmark = pytest.mark.database_free

CASE = {"id": "final-response", "title": "Final response", "steps": [{"kind": "turn"}], "assertions": {}}
CANDIDATE = {"id": "codex-luna", "model": "gpt-5.6-luna", "budget": {"maxLatencyMs": 1000, "maxAttempts": 1, "maxCostUsd": 0.1}}
HOST = {
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "TZ": "UTC",
    "OPENAI_API_KEY": "x-host-openai-value",  # the host's own copy: the candidate's value wins
    "OPENROUTER_API_KEY": "x-another-candidates-key",
    "DATABASE_URL": "postgres://evalhub@db/evalhub",
    "EVALHUB_SCHEDULE_SEED": "runner-live-seven-week-v1",
    "HOME": "/root",
}


def test_the_runtime_gets_the_allow_list_and_its_candidate_s_variables_only(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    def driver_factory(**kwargs: Any) -> Any:
        seen.update(kwargs)
        raise InfrastructureError("runtime_start_failed", False, "stopped by the test once the environment is seen")

    with pytest.raises(InfrastructureError):
        run_live_execution(
            execution_id="rwe-0000000000000000",
            case=CASE,
            candidate=CandidateSpec.from_snapshot(CANDIDATE),
            prompt="Say done.",
            provider=ProviderConfig(profile="openai", base_url="http://127.0.0.1:9/v1", env_key="OPENAI_API_KEY"),
            driver_factory=driver_factory,
            required_environment={"OPENAI_API_KEY": "x-candidate-openai-value", "EMPTY_ONE": ""},
            host_environment=HOST,
            allowlist=("PATH", "LANG", "LC_ALL", "TZ"),
            workdir=tmp_path,
        )

    home = str(tmp_path / "home")
    assert seen["environment"] == {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "TZ": "UTC",
        "OPENAI_API_KEY": "x-candidate-openai-value",
        "HOME": home,
        "TMPDIR": home,
    }
