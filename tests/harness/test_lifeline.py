"""A runtime's process group dies with the evalhub process that started it, however that process
ends (runs/executors/live/drivers/lifeline.py), and otherwise looks as if no lifeline stood in
front of it: the same exit status, output, environment and working folder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from runs.executors.base import InfrastructureError
from runs.executors.live.drivers.common import group_of, kill_process_group, start_process_group

pytestmark = pytest.mark.database_free

ROOT = Path(__file__).resolve().parents[2]
ENV = {"PATH": "/usr/bin:/bin", "LIFELINE_TEST": "1"}


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie has stopped running)."""
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def _wait_gone(pids: list[int], seconds: float = 10.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.05)
    return [pid for pid in pids if _alive(pid)]


def _wait_exec(pid: int, program: bytes, seconds: float = 10.0) -> None:
    """Wait until ``pid`` runs ``program`` (its execve has finished)."""
    deadline = time.monotonic() + seconds
    while os.path.basename(Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]) != program:
        assert time.monotonic() < deadline, f"{pid} never ran {program!r}"
        time.sleep(0.01)


def test_the_runtime_exits_as_it_would_without_a_lifeline(tmp_path: Path) -> None:
    proc = start_process_group(
        ["sh", "-c", 'read line; echo "got $line in $PWD with $LIFELINE_TEST"; echo oops >&2; exit 3'],
        env=ENV,
        cwd=str(tmp_path),
        label="test",
    )
    out, err = proc.communicate(b"hello\n", timeout=10)
    assert (proc.returncode, out, err) == (3, f"got hello in {tmp_path} with 1\n".encode(), b"oops\n")
    kill_process_group(proc)
    assert proc.lifeline is None


def test_killing_the_group_ends_the_lifeline_at_once(tmp_path: Path) -> None:
    """A driver's close kills the runtime's group; the lifeline (outside it) reaps the runtime and
    exits, so nothing of the group is left, not even a zombie for init to reap."""
    proc = start_process_group(["sleep", "300"], env=ENV, cwd=str(tmp_path), label="test", stdin=False)
    group = group_of(proc)
    kill_process_group(proc)
    assert proc.returncode == -signal.SIGKILL and proc.lifeline is None
    with pytest.raises(ProcessLookupError):
        os.killpg(group, 0)


def test_a_runtime_killed_by_a_signal_reads_as_killed_by_it(tmp_path: Path) -> None:
    proc = start_process_group(["sleep", "300"], env=ENV, cwd=str(tmp_path), label="test", stdin=False)
    try:
        runtime = group_of(proc)
        assert _children(proc.pid) == [runtime] and runtime != proc.pid
        assert os.getpgid(runtime) == runtime  # the runtime leads a group of its own
        # The lifeline reports the pid as soon as it forks; until the child's execve is through,
        # /proc shows the lifeline's image (or, mid-exec, an empty environment).
        _wait_exec(runtime, b"sleep")
        # Exactly the environment given: Python's own start-up additions (LC_CTYPE) stay in the lifeline.
        assert Path(f"/proc/{runtime}/environ").read_bytes().split(b"\0")[:-1] == [b"PATH=/usr/bin:/bin", b"LIFELINE_TEST=1"]
        os.kill(runtime, signal.SIGTERM)
        assert proc.wait(timeout=10) == -signal.SIGTERM
    finally:
        kill_process_group(proc)


def test_an_executable_that_is_not_there_is_refused_before_anything_starts(tmp_path: Path) -> None:
    for argv in (["no-such-runtime-anywhere"], [str(tmp_path / "missing")], [str(tmp_path)]):
        with pytest.raises(InfrastructureError) as raised:
            start_process_group(argv, env=ENV, cwd=str(tmp_path), label="codex")
        assert (raised.value.code, raised.value.retryable) == ("runtime_start_failed", True)
        assert f"cannot start codex ({argv[0]})" in str(raised.value)


@pytest.mark.parametrize("ending", ["SIGKILL", "exit"])
def test_the_whole_group_dies_when_the_process_that_started_it_ends_without_cleaning_up(tmp_path: Path, ending: str) -> None:
    """A parent that dies by SIGKILL (or exits without killing the group) leaves no runtime behind,
    nor the runtime's own helper process; without the lifeline both would run for five minutes."""
    parent_code = textwrap.dedent(
        f"""
        import sys, time
        from runs.executors.live.drivers.common import group_of, start_process_group
        proc = start_process_group(["sh", "-c", "sleep 300 & sleep 300"], env={ENV!r}, cwd={str(tmp_path)!r}, label="test", stdin=False)
        print(group_of(proc), proc.pid, flush=True)
        if {ending!r} == "exit":
            time.sleep(1)
            import os; os._exit(0)
        time.sleep(300)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    group, lifeline = map(int, parent.stdout.readline().split())
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(members := _group(group)) < 2:  # sh and its sleeps
            time.sleep(0.05)
        assert len(members) >= 2 and lifeline not in members, members
        members.append(lifeline)
        if ending == "SIGKILL":
            parent.kill()
        parent.wait(timeout=10)
        assert _wait_gone(members) == []
    finally:
        parent.kill()
        parent.wait()
        try:
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _children(pid: int) -> list[int]:
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _group(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getpgid(int(entry.name)) == pgid and _alive(int(entry.name)):
                    members.append(int(entry.name))
            except OSError:
                continue
    return members
