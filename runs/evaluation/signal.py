"""Signal, not noise: what one case × candidate's nights of one bundle say (docs/signal.md).

Pure (docs/STYLE.md rule 3): plain numbers in, frozen dataclasses out; no ORM, no clock, no
settings. ``runs.signal`` loads the nights and passes the windows and the level in.

A *history* is one case × candidate's nights of one bundle, oldest first, each night the
``(passed, trials)`` of its scored repetitions (a night the pair was not scored is left out by
the caller). :func:`assess` reads it as follows:

* **rate** — passed / trials over the nights assessed (the recent and baseline windows), with its
  95% Wilson interval; **pass@k** and **pass^k** — the chance that at least one / all of ``k``
  repetitions pass, estimated without bias from the same counts (``k`` is the most repetitions
  any assessed night had);
* **significant regression / improvement** — the last ``recent_nights`` nights against the
  ``baseline_nights`` before them, by Boschloo's exact test (SciPy's ``boschloo_exact``), one
  sided in the direction the rate moved, at level ``alpha``. Both windows must be full. The
  test is exact for small counts (its size never exceeds ``alpha``) and uniformly more powerful
  than Fisher's exact test, whose p-value it uses as its statistic: with three repetitions a
  night and the default windows (three recent nights, six baseline nights), Fisher's test finds a
  drop from 0.9 to 0.4 three times in four (0.746), Boschloo's 0.863 of the time, both at a
  size below 0.05 (docs/signal.md);
* **flaky** — the outcomes vary: some assessed night mixed passes and failures, or some nights
  passed where others failed. A significant change is reported as such; otherwise a history
  whose outcomes vary is flaky, one whose outcomes never vary is stable;
* a guard against nights that cluster: repetitions of one night are not independent when a case
  is bimodal on a model (a whole night passes or a whole night fails). When the nights disagree
  with one rate per window more than binomial chance allows (the index-of-dispersion test over
  both windows, and over each window alone, at :data:`DISPERSION_LEVEL`), the pooled counts
  overstate the evidence and no change is called significant: the history is flaky.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from runs.evaluation.stats import wilson_interval

#: Verdicts of a history, in the order the pages sort them (worst first).
REGRESSION = "regression"
IMPROVEMENT = "improvement"
FLAKY = "flaky"
STABLE = "stable"
NO_DATA = "no_data"
VERDICTS = (REGRESSION, FLAKY, IMPROVEMENT, STABLE, NO_DATA)

#: What a change between two runs is, given its history (the compare page and the run report).
SIGNIFICANT = "significant"
NOISE = "noise"
CHANGE_VERDICTS = (SIGNIFICANT, FLAKY, NOISE)

#: Nights that disagree with the two-window model at this level make the pooled test untrustworthy.
DISPERSION_LEVEL = 0.01
#: Sampling points SciPy's Boschloo test starts its search for the nuisance parameter from (its default).
BOSCHLOO_POINTS = 32

DEFAULT_RECENT_NIGHTS = 3
DEFAULT_BASELINE_NIGHTS = 6
DEFAULT_ALPHA = 0.05


@dataclass(frozen=True)
class SignalConfig:
    """The windows (in nights) and the level of the significance test.

    Raises ``ValueError`` for a window below 1 night or a level outside (0, 0.5]."""

    recent_nights: int = DEFAULT_RECENT_NIGHTS
    baseline_nights: int = DEFAULT_BASELINE_NIGHTS
    alpha: float = DEFAULT_ALPHA

    def __post_init__(self) -> None:
        for name in ("recent_nights", "baseline_nights"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number of nights of at least 1, not {value!r}")
        if isinstance(self.alpha, bool) or not isinstance(self.alpha, int | float) or not 0 < self.alpha <= 0.5:
            raise ValueError(f"alpha must be a level in (0, 0.5], not {self.alpha!r}")

    @property
    def nights(self) -> int:
        """How many of a history's newest nights are assessed."""
        return self.recent_nights + self.baseline_nights


@dataclass(frozen=True)
class Window:
    """Some nights pooled: ``passed`` of ``trials`` repetitions over ``nights`` nights; ``rate``
    in [0, 1] (None without trials) with its 95% Wilson ``interval``."""

    nights: int
    passed: int
    trials: int

    @property
    def rate(self) -> float | None:
        return self.passed / self.trials if self.trials else None

    @property
    def interval(self) -> tuple[float, float] | None:
        return wilson_interval(self.passed, self.trials)


@dataclass(frozen=True)
class Signal:
    """What one history says (see the module docstring).

    ``overall`` pools the assessed nights; ``recent``/``baseline`` are the windows (None when the
    history is too short to test: ``tested`` is False and ``reason`` says why). ``effect`` is the
    recent rate minus the baseline rate (a fraction, negative for a drop); ``p_value`` the
    one-sided exact test's p-value in the direction of ``effect`` (None when untested or when the
    rate did not move); ``dispersion_p`` the clustering guard's smallest p-value. ``varies`` says the
    outcomes varied (a night mixed passes and failures, or nights disagreed); ``mixed_nights``
    counts the nights that mixed. ``verdict`` is one of :data:`VERDICTS`.
    """

    overall: Window
    recent: Window | None
    baseline: Window | None
    k: int
    pass_at_k: float | None
    pass_hat_k: float | None
    nights_all_passed: int
    varies: bool
    mixed_nights: int
    effect: float | None
    p_value: float | None
    dispersion_p: float | None
    tested: bool
    reason: str
    verdict: str

    @property
    def significant(self) -> bool:
        return self.verdict in (REGRESSION, IMPROVEMENT)


def pass_at_k(trials: int, passed: int, k: int) -> float | None:
    """The unbiased estimate of pass@k — the chance that at least one of ``k`` repetitions passes —
    from ``passed`` of ``trials``: ``1 - C(trials - passed, k) / C(trials, k)`` (Chen et al.,
    2021). None when ``k`` is 0 or exceeds ``trials``. Raises ``ValueError`` for impossible counts."""
    _check_counts(passed, trials)
    if k < 1 or k > trials:
        return None
    return 1.0 - math.comb(trials - passed, k) / math.comb(trials, k)


def pass_hat_k(trials: int, passed: int, k: int) -> float | None:
    """The unbiased estimate of pass^k — the chance that all ``k`` repetitions pass —:
    ``C(passed, k) / C(trials, k)``. None when ``k`` is 0 or exceeds ``trials``."""
    _check_counts(passed, trials)
    if k < 1 or k > trials:
        return None
    return math.comb(passed, k) / math.comb(trials, k)


def _check_counts(passed: int, trials: int) -> None:
    if trials < 0 or passed < 0 or passed > trials:
        raise ValueError(f"need 0 <= passed <= trials, got {passed} of {trials}")


@lru_cache(maxsize=65536)
def exact_p_value(recent_passed: int, recent_trials: int, baseline_passed: int, baseline_trials: int, alternative: str) -> float:
    """Boschloo's exact test (``scipy.stats.boschloo_exact``) of the recent against the baseline
    window, one sided: ``alternative`` ``"less"`` asks whether the recent pass rate is below the
    baseline's, ``"greater"`` whether it is above. Returns the p-value in [0, 1].

    SciPy's table has the two independent samples as its *columns*: ``[[recent passed, baseline
    passed], [recent failed, baseline failed]]``. Cached: the counts of nightly histories are
    small integers, so the same tables recur (a page, a simulation). Raises ``ValueError`` for
    impossible counts or another alternative."""
    _check_counts(recent_passed, recent_trials)
    _check_counts(baseline_passed, baseline_trials)
    if alternative not in ("less", "greater"):
        raise ValueError(f"alternative must be less or greater, not {alternative!r}")
    if recent_trials == 0 or baseline_trials == 0:
        return 1.0
    # Imported here, not at the top: scipy.stats costs about 1.5 s of CPU to import, and every
    # process that loads the admin (each worker, each `run-case` of runs/executors/live/__main__.py)
    # imports this module while few of them ever compute a p-value.
    from scipy.stats import boschloo_exact

    table = [[recent_passed, baseline_passed], [recent_trials - recent_passed, baseline_trials - baseline_passed]]
    p = float(boschloo_exact(table, alternative=alternative, n=BOSCHLOO_POINTS).pvalue)
    # SciPy answers NaN for a table with an empty row (everything passed, or everything failed):
    # nothing moved, so nothing is significant.
    return 1.0 if math.isnan(p) else min(1.0, max(0.0, p))


def dispersion_p_value(windows: Sequence[Sequence[tuple[int, int]]]) -> float | None:
    """How well one rate per window explains the nights: the index-of-dispersion statistic
    ``Σ (x - n·p̂)² / (n·p̂·(1 - p̂))`` over every night ``(x passed, n trials)`` with ``p̂`` its
    window's pooled rate, referred to χ² with (nights − windows) degrees of freedom. A small
    p-value says the nights cluster (whole nights pass or fail together) more than independent
    repetitions would. None when there are no spare degrees of freedom."""
    statistic = 0.0
    nights = 0
    for window in windows:
        trials = sum(n for _, n in window)
        passed = sum(x for x, _ in window)
        nights += sum(1 for _, n in window if n)
        if not trials or passed in (0, trials):
            continue  # one outcome throughout: no spread to explain
        rate = passed / trials
        statistic += sum((x - n * rate) ** 2 / (n * rate * (1 - rate)) for x, n in window if n)
    degrees = nights - sum(1 for window in windows if any(n for _, n in window))
    if degrees < 1:
        return None
    from scipy.stats import chi2  # lazily, as in exact_p_value

    return float(chi2.sf(statistic, degrees))


def _window(nights: Sequence[tuple[int, int]]) -> Window:
    return Window(len(nights), sum(x for x, _ in nights), sum(n for _, n in nights))


def assess(history: Sequence[tuple[int, int]], config: SignalConfig = SignalConfig()) -> Signal:
    """The :class:`Signal` of ``history``: ``(passed, trials)`` per night, oldest first (nights
    without trials are ignored). Only the newest ``config.nights`` nights are assessed.
    Raises ``ValueError`` for impossible counts."""
    nights = []
    for passed, trials in history:
        _check_counts(passed, trials)
        if trials:
            nights.append((passed, trials))
    assessed = nights[-config.nights :]
    overall = _window(assessed)
    k = max((n for _, n in assessed), default=0)
    mixed = sum(1 for x, n in assessed if 0 < x < n)
    varies = 0 < overall.passed < overall.trials
    common = {
        "overall": overall,
        "k": k,
        "pass_at_k": pass_at_k(overall.trials, overall.passed, k) if k else None,
        "pass_hat_k": pass_hat_k(overall.trials, overall.passed, k) if k else None,
        "nights_all_passed": sum(1 for x, n in assessed if x == n),
        "varies": varies,
        "mixed_nights": mixed,
    }
    untested_verdict = NO_DATA if not assessed else FLAKY if varies else STABLE
    if len(assessed) < config.nights:
        reason = (
            f"{len(assessed)} scored night{'s' if len(assessed) != 1 else ''} of {config.nights} needed "
            f"({config.baseline_nights} baseline + {config.recent_nights} recent)"
        )
        return Signal(
            **common,
            recent=None,
            baseline=None,
            effect=None,
            p_value=None,
            dispersion_p=None,
            tested=False,
            reason=reason,
            verdict=untested_verdict,
        )
    baseline_nights, recent_nights = assessed[: config.baseline_nights], assessed[config.baseline_nights :]
    baseline, recent = _window(baseline_nights), _window(recent_nights)
    effect = recent.rate - baseline.rate  # both windows are full, so both have trials
    p_value = None
    if effect != 0:
        p_value = exact_p_value(recent.passed, recent.trials, baseline.passed, baseline.trials, "less" if effect < 0 else "greater")
    # Both windows together, and each alone: a baseline of whole-night swings followed by a run of
    # passing nights is a bimodal case's luck, not an improvement.
    tests = [
        dispersion_p_value([baseline_nights, recent_nights]),
        dispersion_p_value([baseline_nights]),
        dispersion_p_value([recent_nights]),
    ]
    dispersion = min((p for p in tests if p is not None), default=None)
    clustered = dispersion is not None and dispersion <= DISPERSION_LEVEL
    if p_value is not None and p_value <= config.alpha and not clustered:
        verdict = REGRESSION if effect < 0 else IMPROVEMENT
    else:
        verdict = FLAKY if varies or clustered else STABLE
    return Signal(
        **common,
        recent=recent,
        baseline=baseline,
        effect=effect,
        p_value=p_value,
        dispersion_p=dispersion,
        tested=True,
        reason="",
        verdict=verdict,
    )


def change_verdict(direction: str, now: Signal, before: Signal | None) -> str:
    """What a change between two runs is, for a case × candidate whose history up to the later run
    is ``now`` and up to the night before it ``before``: ``direction`` is ``"regression"`` or
    ``"improvement"`` (as the compare page found it). ``"significant"`` when ``now`` finds a
    significant change the same way; ``"flaky"`` when the outcomes already varied before (this
    change is the case's usual variation); otherwise ``"noise"`` (one change the history cannot
    tell from chance). Raises ``ValueError`` for another direction."""
    if direction not in (REGRESSION, IMPROVEMENT):
        raise ValueError(f"direction must be regression or improvement, not {direction!r}")
    if now.verdict == direction:
        return SIGNIFICANT
    if before is not None and (before.varies or before.verdict == FLAKY):
        return FLAKY
    return NOISE
