"""A live execution's token and cost budget: when to stop the turn, and the verdict.

Pure: no clock, no I/O, no Django. Follows the reference's budget rules:

1. On each usage update the ledger (the execution's cumulative usage) is compared with the
   candidate's limits: ``tokens >= maxTotalTokens`` or ``cost >= maxCostUsd`` records the message
   ``"candidate reported usage budget stop: ..."`` and asks for **one** interrupt of the active
   turn (later updates never ask again).
2. No continuation step (a new turn or wake) starts once a stop is recorded or a total has
   reached its limit (:meth:`BudgetGuard.may_continue`).
3. Verdict (:meth:`BudgetGuard.verdict`): a total above its limit ⇒ ``candidate_budget_exceeded``;
   else a recorded stop ⇒ ``candidate_budget_reached``; else a total exactly at its limit ⇒
   ``candidate_budget_reached``; else none. Any verdict makes the execution a
   ``candidate_failure`` even when the agent finished (an exact-cap race stays a failure).

Tokens count as the reference counts them (``contracts.Usage.total``: input + output +
reasoning, cached input excluded). Cost is US dollars from the price table; an **unknown** cost
(``None``, no price for the model) never triggers a cost stop and never counts as 0: the cost
limit is then simply not checked, and :meth:`BudgetGuard.cost_note` says so.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from runs.executors.candidate import Budget
from runs.executors.live.contracts import Usage

BUDGET_STOP_PREFIX = "candidate reported usage budget stop: "
EXCEEDED = "candidate_budget_exceeded"
REACHED = "candidate_budget_reached"

CostOf = Callable[[Usage, Any], "float | None"]


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _money(value: float) -> str:
    return f"${value:.6f}".rstrip("0").rstrip(".") if value else "$0"


class BudgetGuard:
    """The token/cost ledger of one execution. Thread-safe (drivers report usage from their
    reader threads).

    ``budget`` is the candidate's :class:`~runs.executors.candidate.Budget` (``max_total_tokens``
    tokens, ``max_cost_usd`` USD are enforced here; ``max_latency_ms`` by the case driver,
    ``max_attempts`` by the orchestration); a missing limit is never reached, and so is a guard
    without a budget.
    ``price`` is passed to ``cost_of(usage, price) -> float | None`` (``runs.executors.live.pricing.cost_usd``);
    without ``cost_of`` the cost is unknown.
    """

    def __init__(
        self,
        budget: Budget | None = None,
        *,
        price: Any = None,
        cost_of: CostOf | None = None,
    ) -> None:
        self.max_total_tokens = budget.max_total_tokens if budget is not None else None
        self.max_cost_usd = budget.max_cost_usd if budget is not None else None
        self._price = price
        self._cost_of = cost_of
        self._lock = threading.Lock()
        self._usage = Usage()
        self._cost: float | None = self._compute_cost(Usage())
        self._stop: str | None = None
        self._interrupt_requested = False

    # -------------------------------------------------------------- ledger

    def _compute_cost(self, usage: Usage) -> float | None:
        if self._cost_of is None:
            return None
        return self._cost_of(usage, self._price)

    def update(self, usage: Usage) -> bool:
        """Record the execution's cumulative ``usage`` (it replaces the ledger; a smaller total
        than before, e.g. after a runtime restart reset its counters, never lowers it) and apply
        rule 1. Returns ``True`` exactly once: on the update that first recorded a stop — the
        caller then interrupts the active turn."""
        with self._lock:
            if usage.total >= self._usage.total:
                self._usage = usage
                self._cost = self._compute_cost(usage)
            reason = self._reached_reason()
            if reason is not None and self._stop is None:
                self._stop = BUDGET_STOP_PREFIX + reason
            if self._stop is not None and not self._interrupt_requested:
                self._interrupt_requested = True
                return True
            return False

    def _reached_reason(self) -> str | None:
        parts = []
        tokens = self._usage.total
        if self.max_total_tokens is not None and tokens >= self.max_total_tokens:
            parts.append(f"total tokens {tokens} reached the limit of {_num(self.max_total_tokens)}")
        if self.max_cost_usd is not None and self._cost is not None and self._cost >= self.max_cost_usd:
            parts.append(f"cost {_money(self._cost)} reached the limit of {_money(self.max_cost_usd)}")
        return "; ".join(parts) or None

    # -------------------------------------------------------------- reading

    @property
    def usage(self) -> Usage:
        """The cumulative usage recorded so far."""
        with self._lock:
            return self._usage

    @property
    def total_tokens(self) -> int:
        """Tokens counted against the budget (``Usage.total``)."""
        return self.usage.total

    @property
    def cost_usd(self) -> float | None:
        """The cost so far in USD, ``None`` when unknown (no price)."""
        with self._lock:
            return self._cost

    @property
    def stop_message(self) -> str | None:
        """The recorded ``"candidate reported usage budget stop: ..."`` message, if any."""
        with self._lock:
            return self._stop

    def may_continue(self) -> bool:
        """Rule 2: whether a continuation step (a new turn or wake) may start: no stop recorded and
        every known total below its limit."""
        with self._lock:
            return self._stop is None and self._reached_reason() is None

    def tokens_within(self) -> bool:
        """``total tokens <= maxTotalTokens`` (true without a limit)."""
        return self.max_total_tokens is None or self.total_tokens <= self.max_total_tokens

    def cost_within(self) -> bool | None:
        """``cost <= maxCostUsd``; true without a limit; ``None`` when the cost is unknown."""
        if self.max_cost_usd is None:
            return True
        cost = self.cost_usd
        return None if cost is None else cost <= self.max_cost_usd

    def cost_note(self) -> str | None:
        """A sentence for people when the cost is unknown (else ``None``)."""
        if self.cost_usd is not None:
            return None
        return "cost unknown: the model has no price, so the cost budget was not checked (an unknown cost is never counted as $0)"

    def verdict(self) -> str | None:
        """Rule 3: ``candidate_budget_exceeded``, ``candidate_budget_reached`` or ``None``."""
        return budget_verdict(
            total_tokens=self.total_tokens,
            cost_usd=self.cost_usd,
            stop_message=self.stop_message,
            max_total_tokens=self.max_total_tokens,
            max_cost_usd=self.max_cost_usd,
        )

    def verdict_message(self) -> str | None:
        """The failure message for :meth:`verdict` (``None`` without a verdict)."""
        verdict = self.verdict()
        if verdict is None:
            return None
        tokens, cost = self.total_tokens, self.cost_usd
        parts = [f"total tokens {tokens}" + (f" (limit {_num(self.max_total_tokens)})" if self.max_total_tokens is not None else "")]
        if cost is None:
            parts.append("cost unknown (no price; never counted as $0)")
        else:
            parts.append(f"cost {_money(cost)}" + (f" (limit {_money(self.max_cost_usd)})" if self.max_cost_usd is not None else ""))
        label = "exceeded" if verdict == EXCEEDED else "reached"
        message = f"candidate usage budget {label}: " + ", ".join(parts)
        stop = self.stop_message
        return f"{message}; {stop}" if stop else message


def budget_verdict(
    *,
    total_tokens: int,
    cost_usd: float | None,
    stop_message: str | None,
    max_total_tokens: float | None,
    max_cost_usd: float | None,
) -> str | None:
    """Rule 3 on plain values (the observer recomputes the verdict from the evidence).

    ``cost_usd`` ``None`` (unknown) is never compared with ``max_cost_usd``; a ``None`` limit is
    never reached. Returns ``candidate_budget_exceeded``, ``candidate_budget_reached`` or ``None``.
    """
    over = (max_total_tokens is not None and total_tokens > max_total_tokens) or (
        max_cost_usd is not None and cost_usd is not None and cost_usd > max_cost_usd
    )
    if over:
        return EXCEEDED
    if stop_message is not None:
        return REACHED
    at = (max_total_tokens is not None and total_tokens == max_total_tokens) or (
        max_cost_usd is not None and cost_usd is not None and cost_usd == max_cost_usd
    )
    return REACHED if at else None


def budget_limits(budget: Mapping[str, Any] | None) -> tuple[float | None, float | None]:
    """``(maxTotalTokens, maxCostUsd)`` of a candidate budget document, ``None`` when absent
    (read as :meth:`runs.executors.candidate.Budget.from_document` reads it)."""
    limits = Budget.from_document(budget or {})
    return limits.max_total_tokens, limits.max_cost_usd
