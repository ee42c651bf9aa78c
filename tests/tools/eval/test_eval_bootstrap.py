"""Paired bootstrap: deterministic, centred on the observed difference, sane p-values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragspine_core.errors import ConfigError, DatasetError
from ragspine_tools.eval.metrics import BootstrapResult, paired_bootstrap


def _scores(seed: int, n: int = 200, shift: float = 0.0, noise: float = 0.15):
    rng = np.random.default_rng(seed)
    a = rng.uniform(size=n)
    b = np.clip(a + shift + rng.normal(scale=noise, size=n), 0.0, 1.0)
    return {f"q{i}": float(x) for i, x in enumerate(a)}, {f"q{i}": float(x) for i, x in enumerate(b)}


def test_same_seed_same_result_and_dict_order_does_not_matter():
    a, b = _scores(1)
    first = paired_bootstrap(a, b, n_resamples=2000, seed=7)
    shuffled_a = dict(reversed(list(a.items())))
    second = paired_bootstrap(shuffled_a, b, n_resamples=2000, seed=7)
    assert isinstance(first, BootstrapResult)
    assert first == second
    assert paired_bootstrap(a, b, n_resamples=2000, seed=8).ci_low != first.ci_low


def test_identical_systems_differ_by_zero_with_p_value_one():
    a, _ = _scores(2)
    result = paired_bootstrap(a, dict(a), n_resamples=1000)
    assert result.mean_difference == 0.0
    assert result.ci_low == 0.0 and result.ci_high == 0.0
    assert result.p_value == 1.0


def test_interval_contains_the_observed_mean_difference_b_minus_a():
    a, b = _scores(3, shift=0.02)
    result = paired_bootstrap(a, b, n_resamples=5000, seed=0)
    expected = sum(b[q] - a[q] for q in a) / len(a)
    assert result.mean_difference == pytest.approx(expected, abs=1e-12)
    assert result.mean_b - result.mean_a == pytest.approx(expected, abs=1e-12)
    assert result.ci_low <= result.mean_difference <= result.ci_high
    # Percentile CI width ~ 2 * 1.96 * sd / sqrt(n) for a mean.
    diffs = np.array([b[q] - a[q] for q in a])
    normal_width = 2 * 1.959964 * diffs.std(ddof=1) / math.sqrt(len(diffs))
    assert result.ci_high - result.ci_low == pytest.approx(normal_width, rel=0.1)


def test_clear_improvement_has_small_p_value_and_interval_above_zero():
    a, b = _scores(4, shift=0.1, noise=0.05)
    result = paired_bootstrap(a, b, n_resamples=5000)
    assert result.ci_low > 0
    assert result.p_value == pytest.approx(1 / 5001)  # no null resample comes close


def test_no_real_difference_gives_a_large_p_value():
    a, b = _scores(5, shift=0.0)
    assert paired_bootstrap(a, b, n_resamples=5000).p_value > 0.05


def test_swapping_systems_flips_the_sign():
    a, b = _scores(6, shift=0.03)
    ab = paired_bootstrap(a, b, n_resamples=1000, seed=1)
    ba = paired_bootstrap(b, a, n_resamples=1000, seed=1)
    assert ba.mean_difference == pytest.approx(-ab.mean_difference)
    assert ba.ci_low == pytest.approx(-ab.ci_high)
    assert ba.p_value == ab.p_value


def test_different_query_sets_are_refused_with_the_difference_named():
    with pytest.raises(DatasetError, match=r"only in A: \['q2'\]"):
        paired_bootstrap({"q1": 0.1, "q2": 0.2}, {"q1": 0.3})
    with pytest.raises(DatasetError, match="no queries"):
        paired_bootstrap({}, {})


def test_out_of_range_settings_are_config_errors():
    with pytest.raises(ConfigError, match="n_resamples"):
        paired_bootstrap({"q": 0.1}, {"q": 0.2}, n_resamples=0)
    with pytest.raises(ConfigError, match="confidence"):
        paired_bootstrap({"q": 0.1}, {"q": 0.2}, confidence=1.5)
