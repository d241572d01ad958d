"""The one-line run summary."""

from __future__ import annotations

from decimal import Decimal

import pytest

from runs.creation import RunSummary

pytestmark = pytest.mark.database_free


def test_a_summary_of_a_run_still_executing_says_its_counts_are_not_final() -> None:
    summary = RunSummary(run_id=5, executions=40, spent_usd=Decimal(0), cost_ceiling_usd=Decimal(12), status="running")
    assert summary.line().endswith("(running: these counts are not final yet)")


def test_a_finished_run_summary_has_no_status_note() -> None:
    summary = RunSummary(run_id=5, executions=40, by_classification={"skipped": 40}, spent_usd=Decimal(0), cost_ceiling_usd=Decimal(12))
    assert summary.line() == (
        "run 5: 40 executions — 0 completed, 0 candidate failures, 0 infrastructure failures, 40 skipped; spent $0.00 of $12.00"
    )


def test_a_summary_of_one_execution_says_execution() -> None:
    summary = RunSummary(run_id=5, executions=1, by_classification={"skipped": 1}, spent_usd=Decimal(0), cost_ceiling_usd=Decimal(12))
    assert summary.line().startswith("run 5: 1 execution — 0 completed, ")
