"""Settings for the multi-process tests' qcluster workers and driver (``tests/test_cluster.py``):
the project's settings with a slow fake executor, short leases, and a queue of the test's own."""

from __future__ import annotations

import os

from evalhub.settings import *  # noqa: F403
from evalhub.settings import EVALHUB, Q_CLUSTER

EVALHUB = {
    **EVALHUB,
    "EXECUTORS": dict.fromkeys(("codex_app_server", "opencode_server", "acpx_runtime"), "tests.cluster_support.SlowExecutor"),
    "LEASE_SECONDS": 3,
    "HEARTBEAT_SECONDS": 1,
    "REAP_CHECK_SECONDS": 1,
    "REDISPATCH_SECONDS": 20,
    "DB_RETRY_SECONDS": 30,
}
Q_CLUSTER = {
    **Q_CLUSTER,
    # One queue per test: tests running in parallel (and other users of the Redis database) never share tasks.
    "name": os.environ.get("EVALHUB_TEST_Q_NAME", "evalhub-test"),
    # Keep every task row: the benchmark counts them.
    "save_limit": 0,
    "workers": int(os.environ.get("EVALHUB_TEST_Q_WORKERS", "1")),
    "timeout": 15,
    "retry": 20,
    "poll": 0.2,
    "guard_cycle": 0.2,
}
