"""benchmarks/interval_coverage.py: its scoring, seed blocks and jackknife against hand-made cases, and a
small synthetic table end to end."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import interval_coverage as coverage  # noqa: E402


def test_score_counts_misses_each_side_and_open_ends() -> None:
    """Truth 0.5: [0, 1] holds it, [2, 3] lies above, [-1, 0] below, an interval open below
    (NaN low) up to 5 holds it, one open above from 1 lies above; a group without a crossing
    is not counted."""
    est = np.array([0.5, 2.5, -0.5, 1.0, 2.0, np.nan])
    low = np.array([0.0, 2.0, -1.0, np.nan, 1.0, np.nan])
    high = np.array([1.0, 3.0, 0.0, 5.0, np.nan, np.nan])
    r = coverage.score((est, low, high), 0.5)
    assert (r["groups"], r["below"], r["above"], r["open"]) == (5, 1, 2, 2)
    assert r["coverage"] == pytest.approx(2 / 5)
    assert r["bias"] == pytest.approx(np.mean(est[:5]) - 0.5)
    assert r["bias_half"] == pytest.approx(abs(np.mean(est[:5]) - 0.5) / 0.5)  # the bounded ones: half-width 0.5


def test_blocks_are_disjoint_and_leave_the_truth_its_share() -> None:
    samples = np.arange(64 * 3, dtype=float).reshape(64, 3)  # seed s holds 3s, 3s + 1, 3s + 2
    cut = coverage._blocks(samples)
    groups = cut(4, 100)
    assert groups.shape == (16, 4, 3)
    assert len(np.unique(groups[..., 0])) == 64  # every seed once
    assert cut(4, 5).shape == (5, 4, 3)
    assert cut(8, 100) is None  # 16 x 8 > 64 seeds: the truth would lean on the group


def test_jackknife_of_straight_curves_is_the_standard_error_of_their_shifts() -> None:
    """Curves y_s = x - c_s cross 0 at c_s, and their mean at mean(c): the jackknife of a mean is
    exact, so the half-width is t_{S-1} sd(c) / sqrt(S)."""
    x = np.linspace(0.0, 1.0, 11)
    c = np.array([0.41, 0.47, 0.52, 0.44, 0.5, 0.39, 0.46, 0.55])
    est, low, high = coverage.jackknife(x, x - c[:, None], 0.0)
    half = stats.t.ppf(0.975, 7) * c.std(ddof=1) / np.sqrt(8)
    assert est == pytest.approx(c.mean()) and high - est == pytest.approx(half) and est - low == pytest.approx(half)


def test_the_synthetic_truths_are_the_mean_curves_crossings() -> None:
    """Each case's truth (closed form, or quadrature for the flat logistic) against the chord
    crossing of the mean of 200,000 of its seeds on its grid of 0.025: the mean's Monte Carlo
    error (sd under 0.3 / sqrt(2e5) = 7e-4, over slopes of at least 1) and the chord's bias
    (h^2 |f''| / (8 |f'|) under 1e-3 for every case at h = 0.025) leave under 2e-3."""
    from attnsweep.reduce.crossing import first_crossing

    for case in coverage.synthetic(seed=1):
        mean = case.groups(1, 200_000)[:, 0].mean(0)
        assert float(first_crossing(case.x, mean, case.level)) == pytest.approx(case.truth, abs=2e-3), case.name


def test_a_small_synthetic_table(capsys) -> None:
    assert coverage.main(["synthetic", "--groups", "20", "--seeds", "8", "--methods", "t-cubic+bracket"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [line for line in out if line.startswith("| ") and "t-cubic+bracket" in line]
    assert len(rows) == 8 * 2 + 2  # cases x grids, the least coverage's line and the pooled one
    assert out[-1].startswith("| t-cubic+bracket | ")
    assert " of 320 (" in out[-1]  # 16 (case, grid) cells of 20 groups, pooled
