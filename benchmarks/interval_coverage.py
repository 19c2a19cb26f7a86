"""Coverage of boundary intervals: how often a nominal 95% interval holds the truth, by method.

    python benchmarks/interval_coverage.py synthetic [--groups 400] [--seeds 4 8 16 32 64]
    python benchmarks/interval_coverage.py experiments results/coverage [--seeds 4 8 16 32 64]

``synthetic``: curves with a known crossing (steep and flat, monotone and not, fractions in [0, 1]
and unbounded, Gaussian and skewed noise), ``--groups`` fresh draws of S seeds each. The truth is
the crossing of the exact mean curve.

``experiments``: the many-seed runs of ``benchmarks/coverage/truth.yaml`` (every experiment with a
boundary). The arrays each experiment's ``boundary`` passes to ``crossing_interval`` are recorded
(the experiment's own code path) and cut into disjoint groups of S seeds; the truth is the
crossing of the all-seed mean on the fine grid. S is kept to at most 1/16 of the seeds, so that
the truth's own share of a group moves coverage by under 0.01.

Every group is scored on the fine grid and on a coarse one (every 4th value), so interpolation
error counts. Methods: ``percentile`` (the percentile bootstrap of the crossing, 1000 draws, as
shipped until issue 63: read from git revision ``--baseline``), ``jackknife`` (delete-one-seed
standard error of the chord crossing, Student's t), ``t-linear`` and ``t-cubic`` (the inverted t
test of :mod:`attnsweep.reduce.inversion`, chord and cubic interpolation, every seed count
allowed). Per (case, grid, S, method) a row: coverage (an end past the grid counts as open),
misses below and above the truth, the bias of the estimate, the mean width over the width the
estimates' spread calls for (2 x 1.96 x their standard deviation), and the bias over the mean
half-width (the precision the interval states).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from unittest import mock

import numpy as np
from scipy import optimize, special, stats

from attnsweep import registry
from attnsweep.reduce import crossing as grid_crossing
from attnsweep.reduce.inversion import crossing_interval
from attnsweep.stores.io import open_store

CROSSING = "src/attnsweep/reduce/crossing.py"
BASELINE = "f6163bb"  # the last revision whose boundaries used the percentile bootstrap
COARSE = 4  # the coarse grid: every 4th value of the fine one
METHODS = ("percentile", "jackknife", "t-linear", "t-cubic", "t-cubic+bracket")

Interval = tuple[np.ndarray, np.ndarray, np.ndarray]  # estimate, low, high over the groups
_BASELINES: dict[str, ModuleType] = {}


@dataclass
class Case:
    """One boundary: a grid, a level, a truth and a way to draw groups of S seeds (G, S, len(x))."""

    name: str
    x: np.ndarray
    level: float
    truth: float
    groups: Callable[[int, int], np.ndarray]


def baseline(rev: str) -> ModuleType:
    """``attnsweep.reduce.crossing`` as of git revision ``rev``."""
    repo = Path(__file__).resolve().parents[1]
    text = subprocess.run(["git", "show", f"{rev}:{CROSSING}"], cwd=repo, check=True, capture_output=True,
                          text=True).stdout
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"crossing_{rev}.py"
        path.write_text(text)
        module = importlib.util.module_from_spec(importlib.util.spec_from_file_location(path.stem, path))
        module.__spec__.loader.exec_module(module)
    return module


def jackknife(x: np.ndarray, samples: np.ndarray, level: float, confidence: float = 0.95) -> Interval:
    """Delete-one-seed jackknife standard error of the chord crossing of the seed mean, t_{S-1}."""
    s = samples.shape[-2]
    estimate = grid_crossing.first_crossing(x, samples.mean(-2), level)
    left_out = (samples.sum(-2, keepdims=True) - samples) / (s - 1)  # (..., S, G): the mean without seed i
    theta = grid_crossing.first_crossing(x, left_out, level)
    se = np.sqrt((s - 1) / s * np.square(theta - theta.mean(-1, keepdims=True)).sum(-1))
    half = stats.t.ppf((1 + confidence) / 2, s - 1) * se
    return estimate, estimate - half, estimate + half


def methods(rev: str) -> dict[str, Callable[[np.ndarray, np.ndarray, float], Interval]]:
    """Each method by name; the baseline module is read from git at its first use."""
    def percentile(x: np.ndarray, samples: np.ndarray, level: float) -> Interval:
        if rev not in _BASELINES:
            _BASELINES[rev] = baseline(rev)
        return _BASELINES[rev].bootstrap_crossing(x, samples, level)

    def inverted(order: int, bracket: bool) -> Callable[[np.ndarray, np.ndarray, float], Interval]:
        def run(x: np.ndarray, samples: np.ndarray, level: float) -> Interval:
            found = crossing_interval(x, samples, level, order=order, bracket=bracket, min_seeds=2)
            return found.estimate, found.low, found.high
        return run

    return {"percentile": percentile, "jackknife": jackknife,
            "t-linear": inverted(1, False), "t-cubic": inverted(3, False), "t-cubic+bracket": inverted(3, True)}


def score(interval: Interval, truth: float) -> dict[str, float]:
    """Coverage, misses each side, bias, and width over the spread's width, over the groups."""
    est, low, high = interval
    crossed = np.isfinite(est)
    below = crossed & (np.nan_to_num(high, nan=np.inf) < truth)  # the interval lies below the truth
    above = crossed & (np.nan_to_num(low, nan=-np.inf) > truth)
    n = crossed.sum()
    spread = 2 * 1.96 * np.std(est[crossed], ddof=1) if n > 1 else np.nan
    bounded = crossed & np.isfinite(low) & np.isfinite(high)
    return {"groups": int(n), "coverage": 1 - (below.sum() + above.sum()) / max(n, 1),
            "below": int(below.sum()), "above": int(above.sum()), "open": int((crossed & ~bounded).sum()),
            "bias": float(np.mean(est[crossed]) - truth) if n else np.nan,
            "width": float(np.mean((high - low)[bounded]) / spread) if bounded.any() and spread > 0 else np.nan,
            "bias_half": (float(abs(np.mean(est[crossed]) - truth) / np.mean((high - low)[bounded] / 2))
                          if bounded.any() else np.nan)}


def table(cases: list[Case], seeds: list[int], scorers: dict, groups: int, rows: list[dict]) -> Iterator[str]:
    """The markdown rows of every (case, grid, S, method); each row's numbers also go to ``rows``."""
    yield ("| case | grid | S | groups | method | coverage | misses below / above | open | bias | "
           "width / spread | bias / half-width |")
    yield "|---|---|---|---|---|---|---|---|---|---|---|"
    for case in cases:
        for grid, step in (("fine", 1), ("coarse", COARSE)):
            x = case.x[::step]
            for s in seeds:
                samples = case.groups(s, groups)
                if samples is None:
                    continue
                samples = samples[..., ::step]
                for name, method in scorers.items():
                    r = score(method(x, samples, case.level), case.truth)
                    rows.append({"case": case.name, "grid": grid, "seeds": s, "method": name, **r})
                    yield (f"| {case.name} | {grid} ({x[1] - x[0]:.3g}) | {s} | {r['groups']} | {name} | "
                           f"{r['coverage']:.3f} | {r['below']} / {r['above']} | {r['open']} | "
                           f"{r['bias']:+.2g} | {r['width']:.2f} | {r['bias_half']:.2f} |")


# --- synthetic curves with a known crossing -------------------------------------------------------

X = np.linspace(0.0, 1.0, 41)  # fine grid 0.025; coarse 0.1
CENTRE = 0.4372  # the crossing of the symmetric cases: off every grid value


def logistic(u: np.ndarray) -> np.ndarray:
    return special.expit(u)


def mean_crossing(curve: Callable[[float], float], level: float, a: float = 0.0, b: float = 1.0) -> float:
    return optimize.brentq(lambda u: curve(u) - level, a, b, xtol=1e-14)


def gauss_hermite_mean(f: Callable[[np.ndarray], np.ndarray], sd: float) -> float:
    """E f(Z sd), Z standard normal, by 80-point Gauss-Hermite quadrature."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    return float((weights * f(nodes * sd)).sum() / weights.sum())


def synthetic(seed: int = 0) -> list[Case]:
    rng = np.random.default_rng(seed)

    def draw(make: Callable[[tuple[int, int]], np.ndarray]) -> Callable[[int, int], np.ndarray]:
        return lambda s, groups: make((groups, s))

    def noise(shape: tuple, sd: float) -> np.ndarray:
        return rng.normal(0, sd, (*shape, len(X)))

    def shift(shape: tuple, sd: float) -> np.ndarray:
        return rng.normal(0, sd, (*shape, 1))

    flat_w, flat_sd, flat_level = 0.3, 0.1, 0.3
    flat_truth = mean_crossing(lambda u: gauss_hermite_mean(lambda d: logistic((u - CENTRE - d) / flat_w), flat_sd),
                               flat_level)
    bump_truth = 0.7 - 0.2 * np.sqrt(np.log(2))
    return [
        Case("linear, Gaussian", X, 0.0, CENTRE,
             draw(lambda sh: (X - CENTRE) + shift(sh, 0.1) + noise(sh, 0.1))),
        Case("steep logistic, seed shifts", X, 0.5, CENTRE,
             draw(lambda sh: logistic((X - CENTRE - shift(sh, 0.05)) / 0.02))),
        Case("flat logistic, level 0.3", X, flat_level, flat_truth,
             draw(lambda sh: logistic((X - CENTRE - shift(sh, flat_sd)) / flat_w) + noise(sh, 0.05))),
        Case("0/1 step per seed", X, 0.5, CENTRE,
             draw(lambda sh: (X >= CENTRE + shift(sh, 0.1)).astype(float))),
        Case("binomial fraction of 30, overdispersed", X, 0.5, CENTRE,
             draw(lambda sh: rng.binomial(30, logistic((X - CENTRE - shift(sh, 0.05)) / 0.08)) / 30)),
        Case("non-monotone bump", X, 0.5, bump_truth,
             draw(lambda sh: np.exp(-np.square((X - 0.7) / 0.2)) + shift(sh, 0.05) + noise(sh, 0.1))),
        Case("convex exponential", X, 0.0, CENTRE,
             draw(lambda sh: np.expm1(4 * (X - CENTRE)) + noise(sh, 0.1))),
        Case("skewed lognormal noise", X, 0.0, CENTRE,
             draw(lambda sh: (X - CENTRE) + 0.1 * (np.exp(rng.normal(0, 1, (*sh, len(X)))) - np.exp(0.5)))),
    ]


# --- the experiments' own boundaries -------------------------------------------------------------

@contextlib.contextmanager
def recorded(module: ModuleType) -> Iterator[list[tuple]]:
    """The (x, samples, level, present) of every crossing_interval call in ``module``."""
    calls: list[tuple] = []

    def record(x, samples, level, present=None, **kwargs):
        calls.append((np.asarray(x, dtype=float), np.asarray(samples, dtype=float),
                      np.broadcast_to(np.asarray(level, dtype=float), np.shape(samples)[:-2]), present))
        return crossing_interval(x, samples, level, present=present, **kwargs)

    with mock.patch.object(module, "crossing_interval", record):
        yield calls


def experiment_cases(results: Path, per_call: int) -> list[Case]:
    """A case per row of every boundary, at most ``per_call`` rows (evenly spaced) of each."""
    cases = []
    for folder in sorted(p for p in results.iterdir() if (p / "sweep.zarr").exists()):
        experiment = registry.get(folder.name)
        sweep = open_store(folder / "sweep.zarr").load()
        summary = open_store(folder / "summary.zarr").load()
        module = importlib.import_module(f"attnsweep.experiments.{folder.name}.reduction")
        with recorded(module) as calls:
            experiment.boundary(sweep, summary)
        for k, (x, samples, level, present) in enumerate(calls):
            if present is not None:
                raise SystemExit(f"{folder}: a refined sweep; the harness needs every seed at every value")
            rows = samples.reshape(-1, *samples.shape[-2:])
            levels = level.reshape(-1)
            truths = crossing_interval(x, rows, levels, min_seeds=2).estimate
            crossed = np.flatnonzero(np.isfinite(truths))
            for r in crossed[np.unique(np.linspace(0, len(crossed) - 1, per_call).round().astype(int))] if len(
                    crossed) else []:
                cases.append(Case(f"{folder.name} #{k}.{r}", x, float(levels[r]), float(truths[r]),
                                  _blocks(rows[r])))
    return cases


def _blocks(samples: np.ndarray) -> Callable[[int, int], np.ndarray | None]:
    """Disjoint groups of S seeds of one row (S <= 1/16 of its seeds), at most ``groups`` of them."""
    def cut(s: int, groups: int) -> np.ndarray | None:
        total = samples.shape[0]
        if 16 * s > total:
            return None
        count = min(groups, total // s)
        return samples[: count * s].reshape(count, s, -1)
    return cut


def summary(rows: list[dict], seeds: list[int]) -> Iterator[str]:
    """Per method and seed count, the least coverage over every case and grid (and where), and
    the median width over the spread's."""
    yield "| method | " + " | ".join(f"S = {s}: least coverage (case, grid); median width" for s in seeds) + " |"
    yield "|---|" + "---|" * len(seeds)
    for method in dict.fromkeys(r["method"] for r in rows):
        cells = []
        for s in seeds:
            mine = [r for r in rows if r["method"] == method and r["seeds"] == s and r["groups"]]
            if not mine:
                cells.append("")
                continue
            worst = min(mine, key=lambda r: r["coverage"])
            width = float(np.nanmedian([r["width"] for r in mine]))
            cells.append(f"{worst['coverage']:.3f} ({worst['case']}, {worst['grid']}); {width:.2f}")
        yield f"| {method} | " + " | ".join(cells) + " |"
    yield ""
    yield "Pooled over every case and grid: intervals holding the truth / groups (binomial standard error)."
    yield ""
    yield "| method | " + " | ".join(f"S = {s}" for s in seeds) + " |"
    yield "|---|" + "---|" * len(seeds)
    for method in dict.fromkeys(r["method"] for r in rows):
        cells = []
        for s in seeds:
            mine = [r for r in rows if r["method"] == method and r["seeds"] == s]
            total = sum(r["groups"] for r in mine)
            held = sum(r["groups"] - r["below"] - r["above"] for r in mine)
            p = held / total if total else np.nan
            cells.append(f"{p:.3f} of {total} ({np.sqrt(p * (1 - p) / total):.3f})" if total else "")
        yield f"| {method} | " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("synthetic", "experiments"))
    parser.add_argument("results", nargs="?", type=Path, default=Path("results/coverage"))
    parser.add_argument("--groups", type=int, default=400, help="groups of seeds per (case, S)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[4, 8, 16, 32, 64])
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--baseline", default=BASELINE, help="git revision of the percentile bootstrap")
    parser.add_argument("--rows", type=int, default=4, help="experiments: rows scored per boundary, evenly spaced")
    args = parser.parse_args(argv)
    cases = synthetic() if args.what == "synthetic" else experiment_cases(args.results, args.rows)
    scorers = {k: v for k, v in methods(args.baseline).items() if k in args.methods}
    rows: list[dict] = []
    for line in table(cases, args.seeds, scorers, args.groups, rows):
        print(line, flush=True)
    print()
    for line in summary(rows, args.seeds):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
