"""The pure statistics of the signal across nights (runs/evaluation/signal.py): the estimators, the
exact test, calibration and power by seeded simulation (vectorised with numpy), the bimodal case,
the clustering guard and the verdicts. No database."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import binom, fisher_exact

from runs.evaluation.signal import (
    DEFAULT_ALPHA,
    FLAKY,
    IMPROVEMENT,
    NO_DATA,
    NOISE,
    REGRESSION,
    SIGNIFICANT,
    STABLE,
    SignalConfig,
    assess,
    change_verdict,
    dispersion_p_value,
    exact_p_value,
    pass_at_k,
    pass_hat_k,
)
from runs.evaluation.stats import wilson_interval

pytestmark = pytest.mark.database_free

CONFIG = SignalConfig()
REPETITIONS = 3
STABLE_RATES = (0.3, 0.5, 0.7, 0.9, 0.95)


def simulate(
    rng: np.random.Generator, histories: int, baseline_rate: float, recent_rate: float, config: SignalConfig = CONFIG
) -> np.ndarray:
    """Passes per night, shape (histories, nights): the baseline nights at ``baseline_rate``, the
    recent ones at ``recent_rate``, three repetitions a night."""
    baseline = rng.binomial(REPETITIONS, baseline_rate, size=(histories, config.baseline_nights))
    recent = rng.binomial(REPETITIONS, recent_rate, size=(histories, config.recent_nights))
    return np.concatenate([baseline, recent], axis=1)


def verdicts(passes: np.ndarray, config: SignalConfig = CONFIG) -> list[str]:
    return [assess([(int(x), REPETITIONS) for x in row], config).verdict for row in passes]


# --- estimators --------------------------------------------------------------------------------


def _brute_force(trials: int, passed: int, k: int) -> tuple[float, float]:
    """pass@k and pass^k by their definition: over every k-subset of the trials, whether any / all passed."""
    outcomes = [True] * passed + [False] * (trials - passed)
    subsets = list(itertools.combinations(outcomes, k))
    return sum(any(s) for s in subsets) / len(subsets), sum(all(s) for s in subsets) / len(subsets)


@pytest.mark.parametrize(("trials", "passed", "k"), [(3, 0, 3), (3, 1, 1), (9, 4, 3), (12, 11, 3), (21, 21, 3), (10, 3, 2)])
def test_pass_at_k_and_pass_hat_k_are_the_chances_over_subsets_of_k(trials: int, passed: int, k: int) -> None:
    expected_any, expected_all = _brute_force(trials, passed, k)
    assert pass_at_k(trials, passed, k) == pytest.approx(expected_any, abs=1e-12)
    assert pass_hat_k(trials, passed, k) == pytest.approx(expected_all, abs=1e-12)


def test_pass_at_k_needs_k_within_the_trials_and_possible_counts() -> None:
    assert pass_at_k(2, 1, 3) is None and pass_hat_k(2, 1, 0) is None
    with pytest.raises(ValueError, match="need 0 <= passed <= trials, got 4 of 3"):
        pass_at_k(3, 4, 1)


# --- the exact test ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("recent", "baseline"), [((0, 9), (12, 12)), ((2, 9), (18, 18)), ((5, 9), (10, 12)), ((3, 9), (9, 18)), ((1, 3), (4, 4))]
)
def test_the_exact_test_is_boschloos_with_the_windows_as_its_two_samples(recent: tuple[int, int], baseline: tuple[int, int]) -> None:
    (x, n), (y, m) = recent, baseline
    # The definition: the largest chance, over a common pass rate, of a table whose Fisher
    # p-value is at most the observed one (computed here over a dense grid of rates).
    fisher = np.array([[fisher_exact([[a, b], [n - a, m - b]], alternative="less").pvalue for b in range(m + 1)] for a in range(n + 1)])
    region = fisher <= fisher[x, y] * (1 + 1e-9)
    rates = np.linspace(0, 1, 20001)
    chance = np.einsum(
        "pa,ab,pb->p",
        binom.pmf(np.arange(n + 1)[None, :], n, rates[:, None]),
        region,
        binom.pmf(np.arange(m + 1)[None, :], m, rates[:, None]),
    )
    assert exact_p_value(x, n, y, m, "less") == pytest.approx(chance.max(), rel=1e-4)
    # "greater" is the same test with passes and failures swapped.
    assert exact_p_value(x, n, y, m, "greater") == pytest.approx(exact_p_value(n - x, n, m - y, m, "less"), rel=1e-6)


def test_the_exact_test_is_more_powerful_than_fishers_at_the_default_windows() -> None:
    n, m = REPETITIONS * CONFIG.recent_nights, REPETITIONS * CONFIG.baseline_nights
    recent, baseline = binom.pmf(np.arange(n + 1), n, 0.4), binom.pmf(np.arange(m + 1), m, 0.9)
    boschloo = sum(recent[x] * baseline[y] for x in range(n + 1) for y in range(m + 1) if exact_p_value(x, n, y, m, "less") <= 0.05)
    fisher = sum(
        recent[x] * baseline[y]
        for x in range(n + 1)
        for y in range(m + 1)
        if fisher_exact([[x, y], [n - x, m - y]], alternative="less").pvalue <= 0.05
    )
    assert boschloo >= 0.85 > 0.8 > fisher


def _exact_size(config: SignalConfig, alternative: str, rates: np.ndarray) -> float:
    """The largest chance, over a common true rate, that the pooled test rejects: enumerated, not simulated."""
    n, m = REPETITIONS * config.recent_nights, REPETITIONS * config.baseline_nights
    rejects = np.array([[exact_p_value(x, n, y, m, alternative) <= config.alpha for y in range(m + 1)] for x in range(n + 1)], dtype=float)
    recent = binom.pmf(np.arange(n + 1)[None, :], n, rates[:, None])
    baseline = binom.pmf(np.arange(m + 1)[None, :], m, rates[:, None])
    return float(np.einsum("px,xy,py->p", recent, rejects, baseline).max())


@pytest.mark.parametrize("alternative", ["less", "greater"])
def test_the_size_of_the_test_never_exceeds_its_level_at_any_true_rate(alternative: str) -> None:
    # A regression needs the pooled test to reject, so this bounds the false-positive rate of
    # significant_regression (and improvement) exactly, at every rate from 0.001 to 0.999.
    assert _exact_size(CONFIG, alternative, np.linspace(0.001, 0.999, 999)) <= CONFIG.alpha


# --- calibration and power (seeded simulation) -------------------------------------------------


def test_stable_histories_raise_false_regressions_at_most_at_the_configured_level() -> None:
    rng = np.random.default_rng(20261201)
    # 1,000 stable histories: 200 at each true rate from 0.3 to 0.95, the same rate every night.
    passes = np.concatenate([simulate(rng, 200, rate, rate) for rate in STABLE_RATES])
    found = verdicts(passes)
    assert len(found) == 1000
    false_regressions = found.count(REGRESSION) / len(found)
    false_improvements = found.count(IMPROVEMENT) / len(found)
    assert false_regressions <= DEFAULT_ALPHA, false_regressions
    assert false_improvements <= DEFAULT_ALPHA, false_improvements
    # The test is not vacuous: it does find some, as a level-0.05 test on stable data must now and then.
    assert found.count(REGRESSION) > 0


def test_a_stricter_level_is_kept_too() -> None:
    strict = SignalConfig(alpha=0.01)
    rng = np.random.default_rng(7)
    passes = np.concatenate([simulate(rng, 200, rate, rate, strict) for rate in STABLE_RATES])
    assert verdicts(passes, strict).count(REGRESSION) / 1000 <= 0.01


def test_a_drop_from_90_to_40_percent_over_the_recent_window_is_found_four_times_in_five() -> None:
    rng = np.random.default_rng(16)
    found = verdicts(simulate(rng, 1000, 0.9, 0.4))
    assert found.count(REGRESSION) / 1000 >= 0.80, found.count(REGRESSION)
    # The drop is never called an improvement.
    assert IMPROVEMENT not in found


def test_a_rise_from_40_to_90_percent_is_a_significant_improvement() -> None:
    rng = np.random.default_rng(61)
    found = verdicts(simulate(rng, 1000, 0.4, 0.9))
    assert found.count(IMPROVEMENT) / 1000 >= 0.80 and REGRESSION not in found


# --- flaky, stable and bimodal -----------------------------------------------------------------


@pytest.mark.parametrize("phase", [0, 1])
def test_a_bimodal_case_is_flaky_and_never_a_regression(phase: int) -> None:
    # Whole nights pass (3/3) or fail (0/3), alternating: however many nights and wherever the
    # windows fall, the case is flaky, never a significant change.
    for nights in range(2, 25):
        history = [(3 * ((night + phase) % 2), 3) for night in range(nights)]
        signal = assess(history)
        assert signal.verdict == FLAKY, (nights, signal)
        assert signal.varies and signal.mixed_nights == 0
        if signal.tested:
            assert signal.dispersion_p is not None and signal.dispersion_p < 0.01


def test_bimodal_nights_that_happen_to_line_up_with_the_windows_are_flaky_not_a_regression() -> None:
    # The worst alignment for a pooled test: the baseline's nights passed, the recent ones failed,
    # but the baseline itself already held whole failed nights — nights cluster, so no test.
    history = [(3, 3), (0, 3), (3, 3), (3, 3), (0, 3), (3, 3), (0, 3), (0, 3), (3, 3)]
    signal = assess(history)
    assert signal.verdict == FLAKY


def test_a_bimodal_baseline_followed_by_a_run_of_passing_nights_is_flaky_not_an_improvement() -> None:
    # Whole nights swung in the baseline; three passing nights in a row are a bimodal case's luck
    # (one chance in eight), not evidence that it improved.
    history = [(3, 3), (0, 3), (3, 3), (0, 3), (3, 3), (0, 3), (3, 3), (3, 3), (3, 3)]
    signal = assess(history)
    assert signal.p_value < 0.05  # the pooled counts alone would call it
    assert signal.verdict == FLAKY and signal.dispersion_p < 0.01


def test_a_case_whose_repetitions_disagree_within_a_night_is_flaky() -> None:
    signal = assess([(3, 3), (3, 3), (2, 3)])
    assert (signal.verdict, signal.varies, signal.mixed_nights, signal.tested) == (FLAKY, True, 1, False)
    assert signal.reason == "3 scored nights of 9 needed (6 baseline + 3 recent)"


def test_outcomes_that_never_vary_are_stable() -> None:
    for passes in (3, 0):
        signal = assess([(passes, 3)] * 12)
        assert (signal.verdict, signal.varies, signal.tested) == (STABLE, False, True)
        assert signal.effect == 0 and signal.p_value is None


def test_only_the_newest_nights_are_assessed_and_unscored_nights_are_ignored() -> None:
    old_failures = [(0, 3)] * 5
    signal = assess([*old_failures, (0, 0), *[(3, 3)] * 9])
    assert signal.verdict == STABLE and signal.overall.trials == 27
    assert assess([]).verdict == NO_DATA and assess([(0, 0)]).verdict == NO_DATA


def test_the_signal_reports_rate_interval_effect_and_estimators() -> None:
    history = [(3, 3)] * 6 + [(1, 3), (0, 3), (1, 3)]
    signal = assess(history)
    assert signal.verdict == REGRESSION and signal.significant
    assert (signal.baseline.passed, signal.baseline.trials, signal.recent.passed, signal.recent.trials) == (18, 18, 2, 9)
    assert signal.effect == pytest.approx(2 / 9 - 1)
    assert signal.p_value == exact_p_value(2, 9, 18, 18, "less") and signal.p_value < 0.001
    assert signal.overall.interval == wilson_interval(20, 27)
    assert signal.k == 3 and signal.nights_all_passed == 6
    assert signal.pass_at_k == pytest.approx(1 - math.comb(7, 3) / math.comb(27, 3))
    assert signal.pass_hat_k == pytest.approx(math.comb(20, 3) / math.comb(27, 3))


def test_the_clustering_guard_tells_whole_night_swings_from_independent_repetitions() -> None:
    homogeneous = [[(2, 3), (1, 3), (2, 3), (2, 3)], [(1, 3), (2, 3), (1, 3)]]
    clustered = [[(3, 3), (0, 3), (3, 3), (0, 3)], [(0, 3), (3, 3), (0, 3)]]
    assert dispersion_p_value(homogeneous) > 0.5
    assert dispersion_p_value(clustered) < 0.01
    assert dispersion_p_value([[(3, 3)], [(0, 3)]]) is None  # no nights to spare


# --- changes between two runs and bad input ----------------------------------------------------


def test_a_change_is_significant_flaky_or_noise() -> None:
    regressed = assess([(3, 3)] * 6 + [(1, 3), (0, 3), (1, 3)])
    varied_before = assess([(3, 3), (2, 3), (3, 3)])
    steady_before = assess([(3, 3), (3, 3)])
    assert change_verdict(REGRESSION, regressed, varied_before) == SIGNIFICANT
    assert change_verdict(IMPROVEMENT, regressed, steady_before) == NOISE
    assert change_verdict(REGRESSION, assess([(3, 3), (2, 3), (3, 3), (2, 3)]), varied_before) == FLAKY
    assert change_verdict(REGRESSION, assess([(3, 3), (3, 3), (2, 3)]), steady_before) == NOISE
    with pytest.raises(ValueError, match="direction must be regression or improvement, not 'sideways'"):
        change_verdict("sideways", regressed, None)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"recent_nights": 0}, "recent_nights must be a whole number of nights of at least 1, not 0"),
        ({"baseline_nights": True}, "baseline_nights must be a whole number of nights of at least 1, not True"),
        ({"alpha": 0.0}, r"alpha must be a level in \(0, 0.5\], not 0.0"),
        ({"alpha": 0.9}, r"alpha must be a level in \(0, 0.5\], not 0.9"),
    ],
)
def test_unusable_windows_or_levels_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SignalConfig(**kwargs)


def test_impossible_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="need 0 <= passed <= trials, got 4 of 3"):
        assess([(4, 3)])
    with pytest.raises(ValueError, match="alternative must be less or greater, not 'two-sided'"):
        exact_p_value(1, 3, 2, 3, "two-sided")
