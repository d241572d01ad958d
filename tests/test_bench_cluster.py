"""The cluster benchmark tells django-q2's processes apart by how the sentinel starts them
(``tests/bench_cluster.py`` ``cpu_seconds``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.bench_cluster import ROLES, cpu_seconds

pytestmark = pytest.mark.database_free

# A process group shaped as django-q2's: a leader whose one child (the sentinel) starts the
# workers, then the monitor, then the pusher; the child in the monitor's place burns 0.3 s of CPU.
TREE = """
import os, subprocess, sys, time
if os.fork() == 0:
    children = [subprocess.Popen(["sleep", "60"]) for _ in range(int(sys.argv[1]))]
    children.append(subprocess.Popen([sys.executable, "-c", "import time\\nend = time.process_time() + 0.3\\nwhile time.process_time() < end: pass\\ntime.sleep(60)"]))
    children.append(subprocess.Popen(["sleep", "60"]))
    print("ready", flush=True)
    time.sleep(60)
    os._exit(0)
time.sleep(60)
"""


@pytest.fixture
def cluster_like() -> subprocess.Popen:
    leader = subprocess.Popen([sys.executable, "-c", TREE, "1"], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert leader.stdout.readline().strip() == "ready"
        yield leader
    finally:
        os.killpg(leader.pid, signal.SIGKILL)
        leader.wait()
        leader.stdout.close()


def test_each_role_s_cpu_is_read_from_the_process_the_sentinel_started_for_it(cluster_like: subprocess.Popen) -> None:
    deadline = time.monotonic() + 10
    while (used := cpu_seconds(cluster_like.pid, 1)) and used["monitor"] < 0.25 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert set(used) == set(ROLES)
    # The third child the sentinel started is the monitor: it alone burned 0.3 s.
    assert used["monitor"] >= 0.25
    assert used["workers"] < 0.1 and used["pusher"] < 0.1


def test_a_group_not_shaped_as_the_cluster_tells_nothing(cluster_like: subprocess.Popen) -> None:
    # Two workers asked for, one started: the roles cannot be told apart.
    assert cpu_seconds(cluster_like.pid, 2) == {}
    # Not a process group at all.
    assert cpu_seconds(2**22 + 1, 1) == {}
