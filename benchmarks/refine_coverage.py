"""Refinement against a known truth: how often a refined boundary lies within its stated precision.

    python benchmarks/refine_coverage.py truth OUT [--case critical_scaling sphere_clustering]
    python benchmarks/refine_coverage.py repeat OUT --case critical_scaling [--first 0] [--repeats 40]
                                                    [--rule inverted|percentile]
    python benchmarks/refine_coverage.py report OUT

``truth``: per case, a many-seed sweep (``TRUTH_SEEDS`` seeds, 0 up) on a fine grid; the truth of a
row is its boundary's estimate there (its own half-width is printed: it must be small beside the
precision). ``repeat``: refinement ``k`` of a case starts from the case's base grid with the seed
block ``[B + k M, B + k M + 8)`` (``B`` the truth's seeds, ``M`` the case's ``max_seeds``: refine
counts new seeds on from a row's least one, so blocks and truth never share a seed) and runs
:func:`attnsweep.refine.rules.assess` round by round to its end, as ``attnsweep refine`` does, in
this process (each round: the jobs of the plan not yet stored, ``collect``, ``reduce``,
``boundary`` of :mod:`attnsweep.reduce.aggregate`, then ``assess``). ``--rule percentile``
replaces every boundary interval with the percentile bootstrap of the chord crossing as shipped
until issue 63 (git revision ``BASELINE``): the stop rule before it. ``report``: per case, rule and
row, the share of refinements whose estimate lies within its stated precision of the truth
(|estimate - truth| <= precision x |estimate|, relative precision), the share whose interval holds
the truth, how they ended, and their cost: simulated (point, seed) pairs and the cost model's
core-seconds (:meth:`attnsweep.contract.Experiment.job_seconds`), with the measured job seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import shutil
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import numpy as np

from attnsweep.plan.config import load_sweep
from attnsweep.plan.refinement import load_record, save_record
from attnsweep.reduce import aggregate
from attnsweep.reduce.inversion import CrossingInterval, crossing_interval
from attnsweep.refine.rules import assess
from attnsweep.run.job import run_job
from attnsweep.stores.io import open_store

sys.path.insert(0, str(Path(__file__).resolve().parent))
from interval_coverage import BASELINE, baseline  # noqa: E402

TRUTH_SEEDS = 4096
BASE_SEEDS = 8

#: Each case: its experiment section (base grid and ``refine``), the fine grid of its truth run,
#: the boundary refined.
CASES = {
    "critical_scaling": {
        "section": {"n": [64], "d": [16, 128], "rho": [0.5], "gamma": {"start": 1.0, "stop": 4.0, "num": 7},
                    "alpha": [0.0], "wildcards": ["n", "d"], "eta_method": "none",
                    "refine": {"precision": 0.04, "boundaries": ["gamma_star_lambda"], "max_seeds": 256,
                               "rounds": 12, "core_hours": 10}},
        "truth": {"gamma": {"start": 1.5, "stop": 2.5, "num": 41}},  # around both crossings
        "boundary": "gamma_star_lambda",
    },
    "sphere_clustering": {
        "section": {"n": [32], "d": [2, 8], "beta": [1.0], "wildcards": ["n", "d"], "t_max": 30.0,
                    "outputs": 121, "snapshot_times": [],
                    "refine": {"precision": 0.03, "max_seeds": 256, "rounds": 12, "core_hours": 10}},
        "truth": {},
        "boundary": "t_star",
    },
}


def config(folder: Path, case: str, seeds: list[int], grid: dict | None = None, refine: bool = True) -> dict:
    """The sweep config of one run of ``case`` in ``folder``."""
    section = {**CASES[case]["section"], **(grid or {}), "seeds": seeds}
    if not refine:
        section.pop("refine")
    return {"results": str(folder / "results"), "logs": str(folder / "logs"), "device": "cpu",
            "dtype": "float64", "threads": 1, "experiments": {case: section}}


def run_round(folder: Path, sweep_config: dict, case: str) -> tuple[int, float]:
    """The plan's jobs not yet stored, then collect, reduce and boundary, as the workflow's rules
    do; the simulated (point, seed) pairs of the jobs run and their wall seconds."""
    plan = load_sweep(sweep_config).plans[case]
    results = Path(sweep_config["results"], case)
    stores, pairs, seconds = [], 0, 0.0
    for key, spec in plan.jobs(sweep_config["results"]).items():
        path = results / "runs" / f"{key}.zarr"
        stores.append(path)
        if not path.exists():
            start = time.perf_counter()
            run_job(spec, path, device="cpu", threads=1, progress=False)
            seconds += time.perf_counter() - start
            pairs += len(spec.seeds) * int(np.prod([len(v) for v in spec.grid.values()]))
    for name in ("sweep.zarr", "summary.zarr", "boundary.zarr"):
        shutil.rmtree(results / name, ignore_errors=True)
    aggregate.collect(stores, results / "sweep.zarr", **plan.layout())
    aggregate.reduce(results / "sweep.zarr", results / "summary.zarr")
    aggregate.boundary(results / "sweep.zarr", results / "summary.zarr", results / "boundary.csv",
                       results / "boundary.zarr")
    return pairs, seconds


@contextlib.contextmanager
def rule(case: str, name: str) -> Iterator[None]:
    """``inverted``: the boundary as shipped; ``percentile``: its interval from the percentile
    bootstrap of the chord crossing (git ``BASELINE``), every other part of it as shipped."""
    if name == "inverted":
        yield
        return
    old = baseline(BASELINE)
    module = importlib.import_module(f"attnsweep.experiments.{case}.reduction")

    def percentile(x, samples, level, present=None, **kwargs) -> CrossingInterval:
        shipped = crossing_interval(x, samples, level, present=present, **kwargs)
        estimate, low, high = old.bootstrap_crossing(x, samples, level, present=present)
        return CrossingInterval(estimate, low, high, shipped.seeds, np.full_like(shipped.spacing, np.nan),
                                np.zeros_like(shipped.flag))

    with mock.patch.object(module, "crossing_interval", percentile):
        yield


def refine(folder: Path, case: str, seeds: list[int], rule_name: str) -> dict:
    """One refinement to its end; its rows' last estimate and interval, its record and cost."""
    sweep_config = config(folder, case, seeds)
    results = Path(sweep_config["results"])
    pairs, seconds = 0, 0.0
    with rule(case, rule_name):
        while True:
            p, s = run_round(folder, sweep_config, case)
            pairs, seconds = pairs + p, seconds + s
            plan = load_sweep(sweep_config).plans[case]
            record = assess(plan, results, load_record(results, case))
            save_record(results, case, record)
            if "final" in record:
                break
    plan = load_sweep(sweep_config).plans[case]
    model_seconds = sum(plan.experiment.job_seconds(job) for job in plan.jobs().values())
    return {"rows": rows(results / case / "boundary.zarr", CASES[case]["boundary"]),
            "final": record["final"]["reason"], "rounds": len(record["rounds"]),
            "actions": [d["action"] for d in record["final"]["assessment"]],
            "pairs": pairs, "job_seconds": seconds, "model_seconds": model_seconds}


def rows(path: Path, name: str) -> list[dict]:
    """Each row of boundary ``name``: its coordinates, estimate, interval and seeds."""
    found = open_store(path).load()
    est = found[name]
    out = []
    for at in np.ndindex(est.shape):
        where = {dim: found[dim].values[i].item() for dim, i in zip(est.dims, at)}
        out.append({"row": where, **{part: float(found[f"{name}{part and '_' + part}"].values[at])
                                     for part in ("", "low", "high", "seeds")}})
    return out


def truth(out: Path, case: str) -> None:
    folder = out / case / "truth"
    sweep_config = config(folder, case, list(range(TRUTH_SEEDS)), CASES[case]["truth"], refine=False)
    start = time.perf_counter()
    pairs, seconds = run_round(folder, sweep_config, case)
    found = rows(Path(sweep_config["results"], case, "boundary.zarr"), CASES[case]["boundary"])
    (out / case / "truth.json").write_text(json.dumps({"rows": found, "pairs": pairs, "job_seconds": seconds,
                                                        "wall_s": time.perf_counter() - start}, indent=1))
    for r in found:
        print(case, r["row"], f"truth {r['']:.5g} [{r['low']:.5g}, {r['high']:.5g}] from {r['seeds']:.0f} seeds",
              flush=True)


def repeat(out: Path, case: str, first: int, repeats: int, rule_name: str) -> None:
    block = CASES[case]["section"]["refine"]["max_seeds"]
    for k in range(first, first + repeats):
        done = out / case / rule_name / f"{k:03d}.json"
        if done.exists():
            continue
        folder = out / case / rule_name / f"{k:03d}"
        shutil.rmtree(folder, ignore_errors=True)
        start = TRUTH_SEEDS + k * block
        begin = time.perf_counter()
        result = refine(folder, case, list(range(start, start + BASE_SEEDS)), rule_name)
        result["wall_s"] = time.perf_counter() - begin
        done.write_text(json.dumps(result, indent=1))
        shutil.rmtree(folder)
        print(case, rule_name, k, result["final"], result["rounds"], "rounds", result["pairs"], "pairs",
              f"{result['wall_s']:.1f} s", [(round(r[""], 4), round(r["low"], 4), round(r["high"], 4))
                                           for r in result["rows"]], flush=True)


def summarise(out: Path) -> list[dict]:
    """Per case, rule and row: the refinements scored against the truth, and their cost."""
    table = []
    for case_dir in sorted(p for p in out.iterdir() if (p / "truth.json").exists()):
        case = case_dir.name
        precision = CASES[case]["section"]["refine"]["precision"]
        truths = json.loads((case_dir / "truth.json").read_text())["rows"]
        for rule_dir in sorted(p for p in case_dir.iterdir() if p.is_dir() and p.name != "truth"):
            runs = [json.loads(p.read_text()) for p in sorted(rule_dir.glob("*.json"))]
            for i, t in enumerate(truths if runs else []):
                got = [r["rows"][i] for r in runs]
                varies = [k for k in t["row"] if len({x["row"][k] for x in truths}) > 1]
                table.append({
                    "case": case, "row": " ".join(f"{k}={t['row'][k]:g}" for k in varies) or "-",
                    "truth": t[""], "truth_half": (t["high"] - t["low"]) / 2, "rule": rule_dir.name,
                    "runs": len(runs), "precision": precision,
                    "within": sum(abs(g[""] - t[""]) <= precision * abs(g[""]) for g in got),
                    "holds": sum(g["low"] <= t[""] <= g["high"] for g in got),
                    "precise": sum(r["actions"][i] == "precise" for r in runs),
                    "bias": float(np.mean([g[""] for g in got]) - t[""]),
                    "seeds": statistics.median(g["seeds"] for g in got),
                    "pairs": [r["pairs"] for r in runs], "model_seconds": [r["model_seconds"] for r in runs],
                    "job_seconds": [r["job_seconds"] for r in runs]})
    return table


def report(out: Path) -> None:
    print("| case | row | truth (its half-width) | rule | refinements | within precision | interval holds "
          "truth | ended precise | bias / precision | median seeds | pairs: median (mean) | model core-s: "
          "median (mean) | job s: median |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in summarise(out):
        n = r["runs"]
        wanted = r["precision"] * abs(r["truth"])
        print(f"| {r['case']} | {r['row']} | {r['truth']:.4g} ({r['truth_half']:.2g}) | {r['rule']} | {n} | "
              f"{r['within']} ({r['within'] / n:.3f}) | {r['holds']} ({r['holds'] / n:.3f}) | {r['precise']} | "
              f"{r['bias'] / wanted:+.2f} | {r['seeds']:.0f} | {statistics.median(r['pairs']):.0f} "
              f"({np.mean(r['pairs']):.0f}) | {statistics.median(r['model_seconds']):.3g} "
              f"({np.mean(r['model_seconds']):.3g}) | {statistics.median(r['job_seconds']):.3g} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("truth", "repeat", "report"))
    parser.add_argument("out", type=Path)
    parser.add_argument("--case", nargs="+", choices=list(CASES), default=list(CASES))
    parser.add_argument("--first", type=int, default=0, help="repeat: the first refinement's index")
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--rule", choices=("inverted", "percentile"), default="inverted")
    args = parser.parse_args(argv)
    for case in args.case:
        (args.out / case / args.rule).mkdir(parents=True, exist_ok=True)
        if args.what == "truth":
            truth(args.out, case)
        elif args.what == "repeat":
            repeat(args.out, case, args.first, args.repeats, args.rule)
    if args.what == "report":
        report(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
