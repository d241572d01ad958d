"""The Wilson score interval against values computed independently (R's ``prop.test(correct=FALSE)``
and statsmodels' ``proportion_confint(method="wilson")`` give the same)."""

from __future__ import annotations

import pytest

from runs.evaluation.stats import wilson_interval

pytestmark = pytest.mark.database_free


@pytest.mark.parametrize(
    ("successes", "trials", "low", "high"),
    [
        (8, 10, 0.4902, 0.9433),
        (0, 10, 0.0, 0.2775),
        (10, 10, 0.7225, 1.0),
        (1, 2, 0.0945, 0.9055),
        (3, 3, 0.4385, 1.0),
        (0, 3, 0.0, 0.5615),
        (50, 100, 0.4038, 0.5962),
        (1, 1, 0.2065, 1.0),
    ],
)
def test_the_interval_matches_known_values(successes: int, trials: int, low: float, high: float) -> None:
    interval = wilson_interval(successes, trials)
    assert interval is not None
    assert interval[0] == pytest.approx(low, abs=5e-5)
    assert interval[1] == pytest.approx(high, abs=5e-5)


def test_no_trials_gives_no_interval() -> None:
    assert wilson_interval(0, 0) is None


def test_the_interval_always_contains_the_observed_rate_and_stays_in_bounds() -> None:
    for trials in range(1, 30):
        for successes in range(trials + 1):
            low, high = wilson_interval(successes, trials)
            assert 0.0 <= low <= successes / trials <= high <= 1.0


def test_a_wider_quantile_gives_a_wider_interval() -> None:
    narrow = wilson_interval(8, 10, z=1.0)
    wide = wilson_interval(8, 10)
    assert wide[0] < narrow[0] and narrow[1] < wide[1]


@pytest.mark.parametrize(("successes", "trials"), [(-1, 3), (4, 3), (0, -1)])
def test_impossible_counts_are_refused(successes: int, trials: int) -> None:
    with pytest.raises(ValueError, match="need 0 <= successes <= trials"):
        wilson_interval(successes, trials)
