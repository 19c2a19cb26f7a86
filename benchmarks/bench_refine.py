"""Adaptive refinement (``attnsweep refine``) against a dense grid and against python-adaptive.

- ``critical``: critical_scaling's gamma*(rho) (both boundaries, lambda and eta) from a coarse
  start (``--gamma-num`` values in [0.5, 12], ``--seeds`` seeds) refined until every 95%
  interval half-width and bracket half-width is at most ``--precision`` x gamma* (or the
  limits stop it). Then the dense uniform grid that matches it everywhere: gamma spacing
  2 p min(gamma*) (so every bracket half-width is at most p gamma*) and, at every point, the
  most seeds the refinement put at any point (the intervals of both are printed: where the
  seeds cap the refinement, they cap the dense grid too). Both run as a user runs them (``--cores 2``,
  default profile, every figure), each in an empty directory, timed from outside. Prints
  simulated (rho, gamma, seed) points, wall time, and per row whether the two answers agree
  (their intervals overlap). ``--dense-rows K`` runs the dense grid on K of the rho rows only
  and scales its wall time by rows (its points are counted in full): a row's cost does not
  depend on rho.
- ``adaptive``: a refinement of gamma*_lambda alone (``boundaries: [gamma_star_lambda]``, the
  same start and settings as ``critical``; each learner targets that one crossing too), then on
  each of its rows that cross, python-adaptive's learners sample the same function with the same
  number of simulated (gamma, seed) points as the refinement used in that row:
  ``AverageLearner1D`` (chooses between new gamma and more seeds) and ``Learner1D`` on the seed
  mean of a fixed seed count, with a loss that targets the level crossing. The interval of each is
  the boundary step's own statistic (``crossing_interval``) on the samples the learner chose;
  half-widths side by side. Needs ``pip install adaptive`` (the ``bench`` extra); the pipeline
  does not.
- ``sphere``: sphere_clustering's t*(beta) refined along beta (``curve``) and seeds from a
  coarse beta grid, against the dense beta grid reaching the same spacing with the most seeds
  any refined row holds.

usage: python benchmarks/bench_refine.py critical OUT [--n 256] [--d 16 128] [--rho-num 20]
           [--gamma-num 8] [--seeds 4] [--precision 0.01] [--repeats 1] [--dense-rows K]
       python benchmarks/bench_refine.py adaptive OUT [critical's options] [--compare-d 16] [--rho-every K]
       python benchmarks/bench_refine.py sphere OUT [--d 2 8 32] [--beta-num 6] [--precision 0.05]
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import xarray as xr
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))

from attnsweep.plan.config import load_sweep  # noqa: E402
from attnsweep.stores.io import open_store  # noqa: E402

GAMMA = (0.5, 12.0)
RHO = (0.05, 0.95)
BETA = (0.1, 9.0)
SNAKEMAKE = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--cores", "2"]


def timed(cmd: list[str], cwd: Path) -> float:
    """Wall seconds of ``cmd`` run in ``cwd`` (its output in ``cwd/run.log``); fails loudly."""
    cwd.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with open(cwd / "run.log", "w") as log:
        done = subprocess.run(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - start
    if done.returncode:
        sys.exit(f"{' '.join(cmd)} failed in {cwd}: see {cwd / 'run.log'}")
    return wall


def config_text(name: str, section: dict, dtype: str) -> str:
    return yaml.safe_dump({"device": "cpu", "dtype": dtype, "experiments": {name: section}})


def write_config(where: Path, name: str, section: dict, dtype: str) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    path = where / "config.yaml"
    path.write_text(config_text(name, section, dtype))
    return path


def run_once(work: Path, name: str, section: dict, dtype: str, cmd: list[str]) -> float:
    """Wall seconds of ``cmd`` on the config ``section`` in ``work`` from an empty directory; an
    earlier run of the very same config there is reused (its wall time kept in ``wall.json``)."""
    done = work / "wall.json"
    if done.exists() and (work / "config.yaml").read_text() == config_text(name, section, dtype):
        print(f"reusing the run in {work}", flush=True)
        return json.loads(done.read_text())["wall_s"]
    if work.exists():
        shutil.rmtree(work)  # a refinement continues from the results it finds: start empty
    write_config(work, name, section, dtype)
    wall = timed(cmd, work)
    done.write_text(json.dumps({"wall_s": wall}))
    return wall


def refine_runs(out: Path, name: str, section: dict, dtype: str, repeats: int) -> tuple[Path, list[float]]:
    """``attnsweep refine`` of ``section`` in ``repeats`` fresh directories: the first one, walls."""
    cmd = [sys.executable, "-m", "attnsweep.cli", "refine", "config.yaml", "-s", str(REPO / "Snakefile"),
           "--cores", "2"]
    walls = []
    for k in range(repeats):
        walls.append(run_once(out / f"refine-{k}", name, section, dtype, cmd))
        print(f"refinement {k + 1}/{repeats}: {walls[-1]:.1f} s", flush=True)
    return out / "refine-0", walls


def points(work: Path, name: str) -> int:
    """Simulated points (every axis and seed) of a finished sweep."""
    return int(open_store(work / "results" / name / "sweep.zarr")["simulated"].sum())


def held_seeds(work: Path, name: str) -> int:
    """The most seeds any point of a finished sweep holds."""
    return int(open_store(work / "results" / name / "sweep.zarr")["simulated"].sum("seed").max())


def boundary(work: Path, name: str) -> xr.Dataset:
    return open_store(work / "results" / name / "boundary.zarr").load()


def record(work: Path, name: str) -> dict:
    return json.loads((work / "results" / name / "refine.json").read_text())


def compare(refined: xr.Dataset, dense: xr.Dataset, variable: str, precision: float) -> dict:
    """Rows with a crossing on both sides; how many agree (intervals overlap); precision reached."""
    names = [variable, f"{variable}_low", f"{variable}_high"]
    r, d = xr.align(refined[names], dense[names], join="inner")  # the rows the dense grid ran
    (est_r, lo_r, hi_r), (est_d, lo_d, hi_d) = ([ds[v].values.ravel() for v in names] for ds in (r, d))
    both = np.isfinite(est_r) & np.isfinite(est_d)
    overlap = (lo_r <= hi_d) & (lo_d <= hi_r)
    half_r, half_d = (hi_r - lo_r) / 2 / est_r, (hi_d - lo_d) / 2 / est_d
    return {"rows": int(both.size), "crossing_both": int(both.sum()),
            "crossing_refined_only": int((np.isfinite(est_r) & ~np.isfinite(est_d)).sum()),
            "crossing_dense_only": int((~np.isfinite(est_r) & np.isfinite(est_d)).sum()),
            "agree": int((overlap & both).sum()),
            "max_rel_diff": float(np.max(np.abs(est_r - est_d)[both] / est_d[both])),
            "refined_precise": int((half_r[both] <= precision).sum()),
            "dense_precise": int((half_d[both] <= precision).sum()),
            "refined_median_rel_half": float(np.median(half_r[both])),
            "dense_median_rel_half": float(np.median(half_d[both]))}


def dense_gamma(gamma_star: np.ndarray, precision: float) -> dict:
    """The uniform gamma grid over GAMMA whose bracket half-width is <= precision x every gamma*."""
    spacing = 2 * precision * np.nanmin(gamma_star)
    num = math.ceil((GAMMA[1] - GAMMA[0]) / spacing) + 1
    return {"start": GAMMA[0], "stop": GAMMA[1], "num": int(num)}


def critical_sections(args: argparse.Namespace, boundaries: list[str] | None = None) -> tuple[dict, dict]:
    """critical_scaling's coarse start and that start with its ``refine`` section (every boundary,
    or ``boundaries`` only)."""
    base = {"n": [args.n], "d": args.d, "rho": {"start": RHO[0], "stop": RHO[1], "num": args.rho_num},
            "gamma": {"start": GAMMA[0], "stop": GAMMA[1], "num": args.gamma_num}, "alpha": [0.0],
            "seeds": args.seeds, "wildcards": ["n", "d", "rho"]}
    refine = {"precision": args.precision, "max_seeds": args.max_seeds, "rounds": args.rounds}
    return base, {**base, "refine": refine if boundaries is None else {**refine, "boundaries": boundaries}}


def critical(args: argparse.Namespace) -> None:
    name = "critical_scaling"
    out = Path(args.out)
    base, section = critical_sections(args)
    work, walls = refine_runs(out, name, section, args.dtype, args.repeats)
    rec = record(work, name)
    refined = boundary(work, name)
    stars = np.concatenate([refined[f"gamma_star_{o}"].values.ravel() for o in ("lambda", "eta")])
    gamma = dense_gamma(stars, args.precision)
    seeds = held_seeds(work, name)
    rho = np.linspace(RHO[0], RHO[1], args.rho_num)
    rows = rho if args.dense_rows is None else rho[np.linspace(0, len(rho) - 1, args.dense_rows).round().astype(int)]
    dense_section = {**base, "gamma": gamma, "seeds": seeds,
                     "rho": base["rho"] if args.dense_rows is None else [float(r) for r in rows]}
    dense_work = out / "dense"
    dense_wall = run_once(dense_work, name, dense_section, args.dtype, [*SNAKEMAKE, "--configfile", "config.yaml"])
    dense = boundary(dense_work, name)
    scale = len(rho) / len(rows)
    dense_points = points(dense_work, name) * scale
    refined_points = points(work, name)
    summary = {
        "config": section, "dtype": args.dtype, "rounds": len(rec["rounds"]), "stop": rec["final"]["reason"],
        "refined_points": refined_points, "refined_wall_s": walls, "refined_wall_median_s": statistics.median(walls),
        "round_points": [r["new_points"] for r in rec["rounds"]], "max_seeds_held": seeds,
        "dense_gamma": gamma, "dense_seeds": seeds, "dense_rows_run": len(rows), "dense_points": dense_points,
        "dense_wall_s": dense_wall * scale, "dense_wall_measured_s": dense_wall,
        "points_ratio": dense_points / refined_points,
        "wall_ratio": dense_wall * scale / statistics.median(walls),
        "compare": {f"gamma_star_{o}": compare(refined, dense, f"gamma_star_{o}", args.precision)
                    for o in ("lambda", "eta")},
    }
    (out / "critical.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: v for k, v in summary.items() if k != "config"}, indent=1))


def core_hours(config: Path, name: str) -> float:
    """The cost model's core-hours of every job of a config's sweep (``attnsweep.plan.cost``)."""
    plan = load_sweep(yaml.safe_load(config.read_text())).plans[name]
    return sum(plan.seconds().values()) / 3600


def sphere(args: argparse.Namespace) -> None:
    """t*(beta) of sphere_clustering: the curve resolved along beta, against the dense beta grid."""
    name = "sphere_clustering"
    out = Path(args.out)
    base = {"n": [args.n], "d": args.d, "beta": {"start": BETA[0], "stop": BETA[1], "num": args.beta_num},
            "seeds": args.seeds, "t_max": 30.0, "outputs": 61, "snapshot_times": [0.0, 30.0]}
    section = {**base, "refine": {"precision": args.precision, "curve": ["beta"], "max_seeds": args.max_seeds,
                                  "rounds": args.rounds}}
    work, walls = refine_runs(out, name, section, args.dtype, args.repeats)
    rec = record(work, name)
    refined = boundary(work, name)
    held = open_store(work / "results" / name / "sweep.zarr")["simulated"].any("seed")
    spacing = min(float(np.diff(held["beta"].values[held.sel(d=d).squeeze().values]).min()) for d in args.d)
    seeds = held_seeds(work, name)
    num = math.ceil((BETA[1] - BETA[0]) / spacing - 1e-9) + 1
    dense_section = {**base, "beta": {"start": BETA[0], "stop": BETA[1], "num": num}, "seeds": seeds}
    dense_work = out / "dense"
    if args.run_dense:
        dense_wall = run_once(dense_work, name, dense_section, args.dtype, [*SNAKEMAKE, "--configfile", "config.yaml"])
    else:
        write_config(dense_work, name, dense_section, args.dtype)
        dense_wall = math.nan
    refined_hours = core_hours(work / "config.yaml", name) + sum(r["core_hours"] for r in rec["rounds"])
    dense_hours = core_hours(dense_work / "config.yaml", name)
    summary = {"config": section, "dtype": args.dtype, "rounds": len(rec["rounds"]), "stop": rec["final"]["reason"],
               "round_points": [r["new_points"] for r in rec["rounds"]], "refined_points": points(work, name),
               "refined_core_hours_estimated": refined_hours, "refined_wall_s": walls,
               "refined_wall_median_s": statistics.median(walls), "dense_beta": dense_section["beta"],
               "dense_seeds": seeds, "dense_points": num * seeds * len(args.d),
               "dense_core_hours_estimated": dense_hours, "dense_wall_s": dense_wall,
               "rows": int(np.isfinite(refined["t_star"]).sum())}
    summary["points_ratio"] = summary["dense_points"] / summary["refined_points"]
    summary["core_hours_ratio"] = dense_hours / refined_hours
    summary["wall_ratio"] = dense_wall / summary["refined_wall_median_s"]
    if args.run_dense:
        summary["compare"] = compare_curve(refined, boundary(dense_work, name), args.precision)
    (out / "sphere.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: v for k, v in summary.items() if k != "config"}, indent=1))


def compare_curve(refined: xr.Dataset, dense: xr.Dataset, precision: float) -> dict:
    """The refined t*(beta) rows against the dense curve linearly interpolated at their beta."""
    worst, agree, rows = 0.0, 0, 0
    for d in refined["d"].values:
        r, g = refined.sel(d=d).squeeze(drop=True), dense.sel(d=d).squeeze(drop=True)
        ok = np.isfinite(r["t_star"].values)
        beta = r["beta"].values[ok]
        dense_at = {v: np.interp(beta, g["beta"].values, g[v].values) for v in ("t_star", "t_star_low", "t_star_high")}
        est, low, high = (r[v].values[ok] for v in ("t_star", "t_star_low", "t_star_high"))
        rows += len(beta)
        agree += int(((low <= dense_at["t_star_high"]) & (dense_at["t_star_low"] <= high)).sum())
        worst = max(worst, float(np.max(np.abs(est - dense_at["t_star"]) / dense_at["t_star"])))
    return {"rows": rows, "agree": agree, "max_rel_diff": worst, "precision": precision}


def crossing_loss(xs: tuple, ys: tuple) -> float:
    """Learner1D loss on one interval of ``y - level``: its length where the sign changes
    (the crossing is inside), a hundredth of it elsewhere (other crossings stay findable)."""
    dx = xs[1] - xs[0]
    return dx if ys[0] * ys[1] <= 0 else 0.01 * dx


def adaptive_rows(args: argparse.Namespace) -> None:
    """python-adaptive on the lambda rows of a refinement of gamma*_lambda alone (each learner
    targets that one crossing too), at equal point counts."""
    import adaptive
    import torch

    from attnsweep.experiments.critical_scaling.theory import lambda_critical
    from attnsweep.reduce.inversion import crossing_interval

    name = "critical_scaling"
    work = Path(args.out) / "refine-lambda"
    _, section = critical_sections(args, boundaries=["gamma_star_lambda"])
    wall = run_once(work, name, section, args.dtype, [sys.executable, "-m", "attnsweep.cli", "refine", "config.yaml",
                                                      "-s", str(REPO / "Snakefile"), "--cores", "2"])
    print(f"refinement of gamma*_lambda alone: {wall:.1f} s, {points(work, name)} points", flush=True)
    torch.set_num_threads(1)  # as the jobs ran (config threads: 1): more threads change last bits
    plan = load_sweep(yaml.safe_load((work / "config.yaml").read_text())).plans[name]
    dtype = torch.float64 if plan.dtype == "float64" else torch.float32
    sweep = open_store(work / "results" / name / "sweep.zarr").load()
    ours = boundary(work, name)
    rows = []
    for d in args.compare_d or args.d:
        for rho in sweep["rho"].values[:: args.rho_every]:
            row = dict(n=sweep["n"].values[0], d=d, rho=rho, alpha=0.0)
            est = float(ours["gamma_star_lambda"].sel(row))
            if not np.isfinite(est):
                continue
            held = sweep["simulated"].sel(row)  # (gamma, seed)
            budget, seeds_max = int(held.sum()), int(held.sum("seed").max())
            level = float(lambda_critical(rho, 0.0))

            def simulate(gamma: float, seeds: list[int], row=row) -> np.ndarray:
                grid = {**plan.grid, "d": [row["d"]], "rho": [row["rho"]], "gamma": [gamma]}
                out = plan.experiment.simulate(plan.spec(grid, seeds), torch.device("cpu"), dtype, progress=False)
                return out["lambda"].transpose("seed", ...).values.reshape(len(seeds))

            gamma0 = float(held["gamma"].values[held.any("seed").values][0])  # the same numbers as the sweep's
            check = sweep["lambda"].sel(row).sel(gamma=gamma0, seed=0).item()
            assert simulate(gamma0, [0])[0] == check, "a point's numbers depend on its job"
            intervals = {"refined": (est, float(ours["gamma_star_lambda_low"].sel(row)),
                                     float(ours["gamma_star_lambda_high"].sel(row)))}
            samples: dict[str, dict[float, dict[int, float]]] = {}

            average = adaptive.AverageLearner1D(lambda sx: simulate(sx[1], [sx[0]])[0] - level, GAMMA,
                                                loss_per_interval=crossing_loss, min_samples=args.seeds,
                                                max_samples=seeds_max)
            adaptive.runner.simple(average, goal=lambda lr: lr.nsamples >= budget)
            samples["AverageLearner1D"] = {x: dict(ys) for x, ys in average._data_samples.items()}

            fixed = list(range(seeds_max))
            means: dict[float, np.ndarray] = {}

            def mean_of(gamma: float) -> float:
                means[gamma] = simulate(gamma, fixed)
                return float(means[gamma].mean()) - level

            single = adaptive.Learner1D(mean_of, GAMMA, loss_per_interval=crossing_loss)
            adaptive.runner.simple(single, goal=lambda lr: (lr.npoints + 1) * seeds_max > budget)
            samples["Learner1D"] = {x: dict(enumerate(v)) for x, v in means.items()}

            for learner, data in samples.items():
                xs = np.array(sorted(data))
                seeds = max(max(ys) for ys in data.values()) + 1
                values = np.zeros((seeds, len(xs)))
                present = np.zeros((seeds, len(xs)), dtype=bool)
                for j, x in enumerate(xs):
                    for seed, y in data[x].items():
                        values[seed, j] = y if learner == "Learner1D" else y + level
                        present[seed, j] = True
                found = crossing_interval(xs, values, level, present=present)
                intervals[learner] = (float(found.estimate), float(found.low), float(found.high))
            points_used = {"refined": budget, "AverageLearner1D": average.nsamples,
                           "Learner1D": single.npoints * seeds_max}
            rows.append({"d": int(d), "rho": float(rho), "points": points_used, "seeds_max": seeds_max,
                         "intervals": intervals})
            half = {k: (v[2] - v[1]) / 2 / v[0] for k, v in intervals.items()}
            print(f"d={d} rho={rho:.3f} points {points_used} relative half-widths "
                  + " ".join(f"{k} {v:.4f}" for k, v in half.items()), flush=True)
    (Path(args.out) / "adaptive.json").write_text(json.dumps(rows, indent=1))
    ours = np.array([r["intervals"]["refined"] for r in rows])
    for learner in ("AverageLearner1D", "Learner1D"):
        theirs = np.array([r["intervals"][learner] for r in rows])
        ratio = (ours[:, 2] - ours[:, 1]) / (theirs[:, 2] - theirs[:, 1])
        ratio = np.where(np.isfinite(ratio), ratio, 0.0)  # no interval of the learner's: ours narrower
        disjoint = (theirs[:, 1] > ours[:, 2]) | (theirs[:, 2] < ours[:, 1])
        print(f"ours / {learner} half-width over {len(rows)} rows: median {np.median(ratio):.3f}, geometric mean "
              f"{np.exp(np.log(ratio[ratio > 0]).mean()):.3f}, ours at least as narrow in {(ratio <= 1).sum()}; "
              f"intervals disjoint from ours in {disjoint.sum()} (d, rho: "
              f"{[(r['d'], round(r['rho'], 3)) for r, x in zip(rows, disjoint) if x]})")


def refinement_options(parser: argparse.ArgumentParser, precision: float, max_seeds: int) -> None:
    """The options of a refinement run (``critical``, ``adaptive`` and ``sphere``)."""
    parser.add_argument("out")
    parser.add_argument("--precision", type=float, default=precision)
    parser.add_argument("--max-seeds", type=int, default=max_seeds)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--dtype", default="float32")


def critical_options(parser: argparse.ArgumentParser) -> None:
    """critical_scaling's coarse start and refinement (``critical`` and ``adaptive``)."""
    refinement_options(parser, precision=0.01, max_seeds=64)
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--d", type=int, nargs="+", default=[16, 128])
    parser.add_argument("--rho-num", type=int, default=20)
    parser.add_argument("--gamma-num", type=int, default=8)
    parser.add_argument("--seeds", type=int, default=4, help="the start's seeds (AverageLearner1D's min_samples)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    crit = sub.add_parser("critical")
    critical_options(crit)
    crit.add_argument("--repeats", type=int, default=1, help="refinements from an empty directory")
    crit.add_argument("--dense-rows", type=int, default=None, help="run the dense grid on this many rho rows")
    ada = sub.add_parser("adaptive")
    critical_options(ada)
    ada.add_argument("--compare-d", type=int, nargs="+", default=None, help="the d rows compared (default: all)")
    ada.add_argument("--rho-every", type=int, default=1, help="every k-th rho row only")
    sph = sub.add_parser("sphere")
    refinement_options(sph, precision=0.05, max_seeds=256)
    sph.add_argument("--repeats", type=int, default=1, help="refinements from an empty directory")
    sph.add_argument("--n", type=int, default=32)
    sph.add_argument("--d", type=int, nargs="+", default=[2, 8, 32])
    sph.add_argument("--beta-num", type=int, default=6)
    sph.add_argument("--seeds", type=int, default=16)
    sph.add_argument("--run-dense", action="store_true", help="run the dense grid too (else its cost is estimated)")
    args = parser.parse_args()
    {"critical": critical, "adaptive": adaptive_rows, "sphere": sphere}[args.what](args)


if __name__ == "__main__":
    main()
