"""The registry is the executors' face to the app: checks, health and clean-up ask every
registered executor class, each distinct implementation once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.checks import Warning

from runs.executors import executor_classes, remove_abandoned_work, runtime_problems, system_checks
from runs.executors.base import ExecutionRequest, Executor
from runs.executors.replay import ReplayExecutor
from tests.test_inline_recovery import dead_pid

CALLS: list[str] = []


class Loud(Executor):
    """An executor that answers every hook, counting the calls."""

    def execute(self, request: ExecutionRequest) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def system_checks(cls) -> list[Any]:
        CALLS.append("checks")
        return [Warning("loud is loud", id="tests.W001")]

    @classmethod
    def runtime_problems(cls) -> list[str]:
        CALLS.append("health")
        return ["loud: not installed"]

    @classmethod
    def remove_abandoned_work(cls) -> list[Path]:
        CALLS.append("clean-up")
        return [Path("/nowhere/loud")]


def _register(settings: Any, executors: dict[str, str]) -> None:
    settings.EVALHUB = {**settings.EVALHUB, "EXECUTORS": executors}


def test_every_registered_class_is_asked_once_and_the_shared_live_hooks_once(settings) -> None:
    loud = "tests.test_executor_registry.Loud"
    _register(settings, {"codex_app_server": loud, "opencode_server": loud, "acpx_runtime": "runs.executors.nowhere.Missing"})
    CALLS.clear()
    assert executor_classes() == [Loud, ReplayExecutor]  # a path that cannot be imported is left out
    assert [message.id for message in system_checks()] == ["tests.W001"]  # replay has no checks
    assert runtime_problems() == ["loud: not installed"]
    assert CALLS == ["checks", "health"]


def test_clean_up_asks_the_built_in_executors_even_when_the_registry_points_elsewhere(settings, tmp_path, monkeypatch) -> None:
    """A machine switched to replay still removes what a killed live execution left."""
    _register(settings, dict.fromkeys(("codex_app_server", "opencode_server", "acpx_runtime"), "tests.test_executor_registry.Loud"))
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    left = tmp_path / f"evalhub-live-{dead_pid()}-killed"
    left.mkdir()
    CALLS.clear()
    removed = remove_abandoned_work()
    assert removed == [Path("/nowhere/loud"), left] and not left.exists()
    assert CALLS == ["clean-up"]
