"""The history rows of ``tests/bench_ratios.py``: a year of nightly runs written by the services a
nightly uses (``start_nightly``, every execution skipped: no credentials), then the run history
page and the executions endpoint timed beside their baselines."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

SEED = "runner-live-seven-week-v1"
PAGE = 25


def year_of_history(nights: Any, runs: int) -> None:
    """``runs`` nightly runs (one a night) through ``start_nightly``."""
    from runs.nightly import start_nightly

    started = time.monotonic()
    for index in range(runs):
        start_nightly(seed=SEED, cost_ceiling_usd=Decimal(12), now=nights(), environ={}, execute=True)
        if index % 50 == 49:
            print(f"  {index + 1} nightly runs written ({time.monotonic() - started:.0f} s)", flush=True)


def page_of_runs_json(request: Any) -> Any:
    """The baseline (behind the same login as the page): the page's 25 runs, newest first, and their executions counted per
    classification for those 25 runs only (two plain queries), as JSON."""
    from django.db.models import Count
    from django.http import HttpResponseForbidden, JsonResponse

    from runs.models import Execution, Run

    if not request.user.is_authenticated:
        return HttpResponseForbidden()
    runs = list(Run.objects.order_by("-created_at", "-id").values("id", "status", "trigger", "created_at", "schedule__night")[:PAGE])
    counts: dict[int, dict[str, int]] = {run["id"]: {} for run in runs}
    for run_id, classification, n in (
        Execution.objects.filter(run_id__in=counts).values_list("run_id", "classification").annotate(n=Count("id")).order_by()
    ):
        counts[run_id][classification] = n
    return JsonResponse({"results": [{**run, "counts": counts[run["id"]]} for run in runs]}, json_dumps_params={"default": str})


def _urls() -> list:
    from django.urls import path

    from evalhub.urls import urlpatterns

    return [path("bench/runs.json", page_of_runs_json), *urlpatterns]


#: The project's URLs plus the baseline view, so both sides go through the same middleware,
#: session and login (``ROOT_URLCONF`` points here while the rows are measured).
urlpatterns = _urls()


def measure_history(repeats: int, nights: Any, row: Callable[..., str]) -> list[str]:
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.test.utils import override_settings

    from runs.models import Execution, Run

    interleaved = __import__("tests.bench_ratios", fromlist=["interleaved"]).interleaved
    runs = int(os.environ.get("EVALHUB_BENCH_HISTORY_RUNS", "365"))
    user = get_user_model().objects.create_user(f"bench-{time.time_ns()}", password="bench-password-1")
    lines = []
    with override_settings(ALLOWED_HOSTS=["testserver"], ROOT_URLCONF="tests.bench_history"):
        client = Client()
        client.force_login(user)

        def history() -> None:
            response = client.get("/")
            assert response.status_code == 200, response.status_code

        def baseline() -> None:
            response = client.get("/bench/runs.json")
            assert len(json.loads(response.content)["results"]) <= PAGE

        small = interleaved(history, baseline, repeats)
        small_runs = Run.objects.count()
        year_of_history(nights, max(runs - Run.objects.count(), 0))
        big = interleaved(history, baseline, repeats)
        lines.append(
            row(
                f"run history `/` at {Run.objects.count()} nightly runs",
                big[0],
                big[1],
                1.5,
                f"{_median_ms(small[0])} at {small_runs} runs",
            )
        )
        executions = Execution.objects.count()
        last = (executions + 49) // 50

        def first_page() -> None:
            assert client.get("/api/executions/").status_code == 200

        def last_page() -> None:
            assert client.get(f"/api/executions/?page={last}").status_code == 200

        deep = interleaved(last_page, first_page, repeats)
        lines.append(row(f"`/api/executions/` last page (page {last}, {executions} executions) vs page 1", deep[0], deep[1], 1.5))

        # The same last 50 rows by keyset: the cursor a client reaches by following ``next``
        # links (the position of the row before them), against the first cursor page.
        from runs.api import EXECUTION_ORDER

        before = Execution.objects.order_by(*EXECUTION_ORDER).values_list("run_id", "position", "id")[executions - 51]
        cursor = "after-" + ".".join(map(str, before))

        def first_cursor_page() -> None:
            assert client.get("/api/executions/", {"cursor": ""}).status_code == 200

        def last_cursor_page() -> None:
            response = client.get("/api/executions/", {"cursor": cursor})
            assert response.status_code == 200 and len(json.loads(response.content)["results"]) == 50, response.content[:200]

        keyset = interleaved(last_cursor_page, first_cursor_page, repeats)
        lines.append(
            row(f"`/api/executions/?cursor=` the same last 50 of {executions} vs the first cursor page", keyset[0], keyset[1], 1.5)
        )
    return lines


def _median_ms(values: list[float]) -> str:
    import statistics

    return f"{statistics.median(values) * 1000:.1f} ms"
