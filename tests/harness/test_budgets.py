"""The reference's budget rules: stop once, no continuation, the verdict."""

from __future__ import annotations

import threading
from decimal import Decimal

import pytest

from runs.executors.candidate import Budget
from runs.executors.live.budgets import BudgetGuard, budget_verdict
from runs.executors.live.contracts import Usage
from runs.executors.live.pricing import Price, cost_usd

pytestmark = pytest.mark.database_free

# $1 per million of every kind of token: 1000 tokens cost $0.001.
DOLLAR = Price("m", Decimal(1), Decimal(1), Decimal(1), Decimal(1))


def guard(tokens: float | None = 1000, cost: float | None = None, price: Price | None = DOLLAR) -> BudgetGuard:
    budget = {}
    if tokens is not None:
        budget["maxTotalTokens"] = tokens
    if cost is not None:
        budget["maxCostUsd"] = cost
    return BudgetGuard(Budget.from_document(budget), price=price, cost_of=cost_usd)


def test_below_the_limit_nothing_happens() -> None:
    g = guard()
    assert g.update(Usage(input=500, output=499)) is False
    assert g.stop_message is None and g.may_continue() and g.verdict() is None


def test_reaching_the_limit_stops_once_and_records_the_message() -> None:
    g = guard()
    assert g.update(Usage(input=600, output=400)) is True
    assert g.stop_message == "candidate reported usage budget stop: total tokens 1000 reached the limit of 1000"
    assert g.update(Usage(input=700, output=400)) is False  # interrupt requested once only
    assert g.stop_message.endswith("total tokens 1000 reached the limit of 1000")  # the first stop stays
    assert not g.may_continue()


def test_cached_input_does_not_count() -> None:
    g = guard()
    assert g.update(Usage(input=1500, cached_input=600, output=99)) is False
    assert g.total_tokens == 999


def test_verdicts() -> None:
    at = guard()
    at.update(Usage(input=1000))
    assert at.verdict() == "candidate_budget_reached"
    over = guard()
    over.update(Usage(input=1001))
    assert over.verdict() == "candidate_budget_exceeded"
    assert over.verdict_message().startswith("candidate usage budget exceeded: total tokens 1001 (limit 1000)")


def test_exact_total_without_a_recorded_stop_is_still_reached() -> None:
    assert (
        budget_verdict(total_tokens=1000, cost_usd=None, stop_message=None, max_total_tokens=1000, max_cost_usd=None)
        == "candidate_budget_reached"
    )
    assert (
        budget_verdict(
            total_tokens=999,
            cost_usd=None,
            stop_message="candidate reported usage budget stop: x",
            max_total_tokens=1000,
            max_cost_usd=None,
        )
        == "candidate_budget_reached"
    )
    assert (
        budget_verdict(total_tokens=999, cost_usd=0.5, stop_message=None, max_total_tokens=1000, max_cost_usd=0.4)
        == "candidate_budget_exceeded"
    )


def test_cost_limit_stops_when_the_cost_is_known() -> None:
    g = guard(tokens=None, cost=0.001)
    assert g.update(Usage(input=999)) is False
    assert g.update(Usage(input=1000)) is True
    assert g.stop_message == "candidate reported usage budget stop: cost $0.001 reached the limit of $0.001"
    assert g.cost_within() is True and g.verdict() == "candidate_budget_reached"


def test_unknown_cost_never_stops_and_never_counts_as_zero() -> None:
    g = guard(tokens=None, cost=0.001, price=None)
    assert g.update(Usage(input=10_000_000)) is False
    assert g.cost_usd is None and g.cost_within() is None
    assert g.verdict() is None and g.may_continue()
    assert "never counted as $0" in g.cost_note()
    assert guard(price=DOLLAR).cost_note() is None


def test_unknown_cost_is_said_in_the_verdict_message() -> None:
    g = guard(price=None)
    g.update(Usage(input=2000))
    assert "cost unknown (no price; never counted as $0)" in g.verdict_message()


def test_a_smaller_cumulative_total_never_lowers_the_ledger() -> None:
    g = guard()
    g.update(Usage(input=900))
    g.update(Usage(input=100))  # e.g. a restarted runtime counting from zero
    assert g.total_tokens == 900


def test_no_limits_never_stop() -> None:
    g = BudgetGuard(Budget.from_document({}))
    assert g.update(Usage(input=10**9)) is False and g.verdict() is None and g.may_continue()


def test_concurrent_updates_request_one_interrupt() -> None:
    g = guard()
    results: list[bool] = []
    threads = [threading.Thread(target=lambda n=n: results.append(g.update(Usage(input=900 + n)))) for n in range(200)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.count(True) == 1


@pytest.mark.parametrize("bad", [True, "1000", None])
def test_non_numeric_limits_are_ignored(bad: object) -> None:
    g = BudgetGuard(Budget.from_document({"maxTotalTokens": bad}))
    assert g.max_total_tokens is None
