"""Command line: ``attnsweep init | workflow-path | experiments | schema | validate | status | verify |
run | refine | step-check | pack``, and ``job``, ``collect``, ``aggregate`` (what the rules call).

``job``, ``collect`` and ``aggregate`` hand their work to the warm fork server of :mod:`attnsweep.run.worker` when
one runs.
``run`` builds a one-job plan from ``key=value`` arguments, validated by the same schema and
domain checks as the workflow, and runs it through :func:`attnsweep.run.job.run_job`, the code
path of the simulate rule (which calls ``attnsweep job``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any

from attnsweep.errors import INTERRUPTED, BadStoreError, ConfigError
from attnsweep.run import worker

GLOBAL_KEYS = ("device", "dtype", "threads", "block_mib")


def parse_value(text: str) -> Any:
    """``1,1.5,2`` or ``[1,1.5,2]`` -> [1, 1.5, 2]; ``[7]`` -> [7]; empty or ``[]`` -> [];
    ``16`` -> 16; ``float64`` -> "float64"; ``true`` -> True."""
    def scalar(item: str) -> Any:
        for cast in (int, float):
            try:
                return cast(item)
            except ValueError:
                pass
        return {"true": True, "false": False}.get(item.lower(), item)

    bracketed = text.startswith("[") and text.endswith("]")
    if bracketed:
        text = text[1:-1]
    if bracketed or "," in text or not text.strip():
        return [scalar(item.strip()) for item in text.split(",") if item.strip()]
    return scalar(text)


def config_from_pairs(experiment: str, pairs: list[str]) -> dict[str, Any]:
    """A config dict with one experiment section from ``key=value`` pairs; every axis batched."""
    from attnsweep import registry  # numpy and more: kept off the job client's start-up (attnsweep job)

    try:
        axes = registry.get(experiment).axis_names
    except KeyError as err:
        raise ConfigError("experiment", str(err.args[0])) from None
    config: dict[str, Any] = {"experiments": {experiment: {"wildcards": []}}}
    section = config["experiments"][experiment]
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise ConfigError(pair, "expected key=value")
        value = parse_value(text)
        if key in GLOBAL_KEYS:
            config[key] = value
        else:
            if key in axes and not isinstance(value, list):
                value = [value]
            section[key] = value
    return config


def format_duration(seconds: float) -> str:
    """3.2 s, 4.5 min, 2.1 h."""
    if seconds < 60:
        return f"{seconds:.2g} s"
    return f"{seconds / 60:.2g} min" if seconds < 3600 else f"{seconds / 3600:.2g} h"


def cmd_init(args: argparse.Namespace) -> None:
    from attnsweep.scaffold import init  # numpy and more: kept off the job client's start-up (attnsweep job)

    for path in init(args.directory, force=args.force):
        print(path)
    print(f"{args.directory}: a new attnsweep project; run it there with `snakemake`, then "
          "`snakemake --report report.html`")


def cmd_workflow_path(_: argparse.Namespace) -> None:
    from attnsweep.project_files import snakefile  # numpy and more: kept off the job client's start-up (attnsweep job)

    print(snakefile())


def cmd_experiments(_: argparse.Namespace) -> None:
    from attnsweep import registry  # numpy and more: kept off the job client's start-up (attnsweep job)
    from attnsweep.plan.config import experiment_defaults  # jsonschema, idem

    for name in registry.names():
        exp = registry.get(name)
        defaults = experiment_defaults(name)
        print(f"{name}: {exp.title}  [paper {exp.paper}]")
        print(f"  wildcards (default): {', '.join(exp.default_wildcards)}; other axes batched per job")
        for axis in exp.axes:
            print(f"  axis {axis.name:<7} {axis.kind:<5} {axis.domain():<12} default {json.dumps(defaults[axis.name])}"
                  f"  ({axis.long_name})")
        print(f"  seeds   default {json.dumps(defaults['seeds'])}")
        for key, value in defaults.items():
            if key not in (*exp.axis_names, "seeds", "wildcards"):
                print(f"  option  {key} = {json.dumps(value)}")


def cmd_schema(args: argparse.Namespace) -> None:
    import yaml  # idem

    from attnsweep.plan.config import schema  # jsonschema, idem

    document = schema()
    if args.experiment:
        sections = document["properties"]["experiments"]["properties"]
        if args.experiment not in sections:
            raise SystemExit(f"attnsweep: unknown experiment {args.experiment!r} (known: {', '.join(sections)})")
        document = {**sections[args.experiment], "$defs": document["$defs"]}
    print(yaml.safe_dump(document, sort_keys=False, width=100), end="")


def cmd_validate(args: argparse.Namespace) -> None:
    from attnsweep.plan.config import load_sweep, load_yaml  # jsonschema, numpy: not on the job client's path

    sweep = load_sweep(load_yaml(args.config))
    for name, plan in sweep.plans.items():
        sizes = " x ".join(f"{axis} {len(vals)}" for axis, vals in plan.grid.items())
        seconds = plan.seconds()
        memory = max(plan.memory().values())
        figures = plan.experiment.figures(plan.grid, plan.options)  # as the workflow plans them
        theory = [plan.experiment.theory_seconds(job) for job in plan.theory_jobs().values()]
        besides = (f" and {len(theory)} theory jobs ({', '.join(plan.experiment.theory_axes)}; about "
                   f"{sum(theory) / 3600:.2g} core-hours)" if theory else "")
        print(f"{name}: {len(plan.jobs())} jobs ({sizes} x seeds {len(plan.seeds)}; "
              f"wildcards {', '.join(plan.wildcards) or 'none'}){besides}, {len(figures)} figures; about "
              f"{sum(seconds.values()) / 3600:.2g} core-hours, the largest job "
              f"{format_duration(max(seconds.values()))} and {memory / 2**20:.0f} MiB")
    print(f"{args.config}: valid (times are estimates on one CPU core: attnsweep.plan.cost)")


def cmd_status(args: argparse.Namespace) -> None:
    from attnsweep import status
    from attnsweep.plan.config import load_sweep, load_yaml  # jsonschema, numpy: not on the job client's path

    show = status.STATES if args.all else ("running", "interrupted", "failed", "bad")
    print(status.report(load_sweep(load_yaml(args.config)), show))


def cmd_verify(args: argparse.Namespace) -> None:
    from tqdm import tqdm  # verify's progress only

    from attnsweep.plan.config import load_sweep, load_yaml
    from attnsweep.run.lock import claim
    from attnsweep.stores import verify  # heavy: xarray, zarr

    sweep = load_sweep(load_yaml(args.config))
    lock = claim(sweep.results) if args.quarantine else None  # no run may write what is moved
    findings = verify.verify_tree(sweep, lambda stores: tqdm(stores, desc="verify", leave=False,
                                                             disable=not sys.stderr.isatty()))
    bad = [f for f in findings if f.bad]
    for finding in findings:
        print(finding)
    if args.quarantine and bad:
        for source, target in verify.quarantine(sweep.results, bad):
            print(f"moved {source} -> {target}")
    if lock is not None:
        lock.close()
    if not bad:
        print(f"{args.config}: every store sound")
    elif args.quarantine:
        print(f"{args.config}: {len(bad)} bad stores, quarantined: `snakemake` recomputes them")
    else:
        print(f"{args.config}: {len(bad)} bad stores: `attnsweep verify {args.config} --quarantine`, then "
              "`snakemake` recomputes them")
    if bad:
        raise SystemExit(1)


def cmd_refine(args: argparse.Namespace) -> None:
    from attnsweep.refine.loop import drive  # heavy (xarray, zarr): only this command needs it

    status = drive(args.config, args.snakemake)
    if status:
        raise SystemExit(status)


def cmd_step_check(args: argparse.Namespace) -> None:
    from attnsweep.step_check import drive  # heavy (xarray, zarr): only this command needs it

    status = drive(args.config, args.halvings, args.snakemake)
    if status:
        raise SystemExit(status)


def cmd_run(args: argparse.Namespace) -> None:
    from attnsweep.plan.config import load_sweep  # jsonschema, numpy: not on the job client's path
    from attnsweep.run.job import run_job  # heavy: torch, xarray, zarr

    sweep = load_sweep(config_from_pairs(args.experiment, args.pairs))
    (spec,) = sweep.plans[args.experiment].jobs().values()
    run_job(spec, args.out, device=sweep.config["device"], threads=sweep.config["threads"],
            progress=not args.quiet)
    print(args.out)


def cmd_job(args: argparse.Namespace) -> None:
    from attnsweep.stores.marker import running_marker  # kept off the other commands: only this one marks stores

    spec = {**json.loads(args.spec), "block_mib": args.block_mib}
    request = {"spec": spec, "out": args.out, "device": args.device,
               "threads": args.threads}
    # The marker at once (the job re-marks it with its own pid): a job killed while starting
    # reads as interrupted, and an unwritable results directory fails here, in one line.
    with running_marker(args.out):
        status = worker.run(request)
    if status:
        raise SystemExit(status)


def cmd_collect(args: argparse.Namespace) -> None:
    """``attnsweep.reduce.aggregate.collect``, its arguments read from a JSON file (the list of
    run stores can exceed the length of one command-line argument), as the aggregate steps go."""
    with open(args.arguments) as fh:
        status = worker.run({"step": "collect", "args": json.load(fh)})
    if status:
        raise SystemExit(status)


def cmd_pack(args: argparse.Namespace) -> None:
    from tqdm import tqdm  # pack's progress only

    from attnsweep.stores import legacy

    stores = legacy.run_stores(args.results)
    files = sum(len(names) for store in stores for _, _, names in os.walk(store))
    for store in tqdm(stores, desc="pack", disable=not sys.stderr.isatty()):
        legacy.pack(store)
    print(f"{args.results}: {len(stores)} directory run stores packed into one file each "
          f"({files} files -> {len(stores)})")


def cmd_aggregate(args: argparse.Namespace) -> None:
    status = worker.run({"step": args.step, "args": json.loads(args.arguments)})
    if status:
        raise SystemExit(status)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attnsweep", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("init", help="start a project in DIR: a Snakefile using the installed workflow as a "
                                    "module, the default config, the profiles")
    p.add_argument("directory", metavar="DIR")
    p.add_argument("--force", action="store_true", help="overwrite the files of an earlier project there")
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("workflow-path", help="the installed workflow's Snakefile (module attnsweep: snakefile:)")
    p.set_defaults(func=cmd_workflow_path)

    p = sub.add_parser("experiments", help="list experiments with their axes and defaults")
    p.set_defaults(func=cmd_experiments)

    p = sub.add_parser("schema", help="the config's JSON schema, every experiment's section composed in")
    p.add_argument("experiment", nargs="?", help="only this experiment's section")
    p.set_defaults(func=cmd_schema)

    p = sub.add_parser("validate", help="check a config as the workflow would")
    p.add_argument("config")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("status", help="jobs done, running, interrupted, failed and pending of a sweep")
    p.add_argument("config", nargs="?", default="config/config.yaml")
    p.add_argument("--all", action="store_true", help="list every job, not only running and failed ones")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("verify", help="check every store of a sweep's results against what it must hold",
                       epilog="exit status 1 if a store is bad; see docs/verify.md")
    p.add_argument("config", nargs="?", default="config/config.yaml")
    p.add_argument("--quarantine", action="store_true",
                   help="move bad stores (an aggregate with what is built from it) to RESULTS.quarantine/UTC-TIME/, "
                        "so that `snakemake` recomputes exactly them")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("refine", help="refine the boundaries of a config's refine sections, round by round",
                       epilog="example: attnsweep refine my_refinement.yaml --cores all (a config whose experiments "
                              "have a refine section)")
    p.add_argument("config")
    p.add_argument("snakemake", nargs=argparse.REMAINDER, help="options for every Snakemake run (--cores, --profile)")
    p.set_defaults(func=cmd_refine)

    p = sub.add_parser("step-check", help="run a config at its dt and at halvings of it, and say whether its "
                                          "boundaries still move within their intervals",
                       epilog="example: attnsweep step-check --halvings 2 my_sweep.yaml --cores all (tables in "
                              "RESULTS.step_check/; exit status 1 where the finest pair still moves)")
    p.add_argument("--halvings", type=int, default=2,
                   help="how many times to halve dt (default 2: dt, dt/2, dt/4); before CONFIG, since what follows "
                        "it goes to Snakemake")
    p.add_argument("config")
    p.add_argument("snakemake", nargs=argparse.REMAINDER, help="options for every Snakemake run (--cores, --profile)")
    p.set_defaults(func=cmd_step_check)

    p = sub.add_parser("run", help="run one job outside Snakemake",
                       epilog="example: attnsweep run critical_scaling n=256 d=64 gamma=1,1.5,2 "
                              "seeds=16 dtype=float64 --out point.zarr")
    p.add_argument("experiment")
    p.add_argument("pairs", nargs="*", metavar="key=value",
                   help="axis values (comma lists), seeds (count or list), options, device, dtype, threads")
    p.add_argument("--out", required=True, help="output zarr store")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("job", help="run a JSON job spec (what the simulate rule calls)")
    p.add_argument("spec")
    p.add_argument("--out", required=True)
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--block-mib", type=int, default=256, help="memory budget of one row block (MiB)")
    p.set_defaults(func=cmd_job)

    p = sub.add_parser("collect", help="gather run stores into a sweep.zarr, as the collect rule does")
    p.add_argument("arguments", help="a JSON file of the keyword arguments of attnsweep.reduce.aggregate.collect")
    p.set_defaults(func=cmd_collect)

    p = sub.add_parser("pack", help="rewrite the directory run stores of earlier versions under a results "
                                    "tree as one file each (what new jobs write); nothing reruns")
    p.add_argument("results", nargs="?", default="results")
    p.set_defaults(func=cmd_pack)

    p = sub.add_parser("aggregate", help="one reduction step of a sweep (what the reduce, boundary and "
                                         "figure rules call)")
    p.add_argument("step", help="reduce, boundary or figure (attnsweep.reduce.aggregate.STEPS; checked where it runs)")
    p.add_argument("arguments", help="the keyword arguments of attnsweep.reduce.aggregate.<step>, as JSON")
    p.set_defaults(func=cmd_aggregate)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr)
    try:
        args.func(args)
        sys.stdout.flush()  # a closed pipe surfaces here, not in the interpreter's exit
    except ConfigError as err:
        print(f"attnsweep: config error: {err}", file=sys.stderr)
        return 2
    except BadStoreError as err:
        print(f"attnsweep: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(INTERRUPTED, file=sys.stderr)
        return 130  # as a shell reports a command ended by SIGINT (128 + 2)
    except BrokenPipeError:
        # the reader stopped early (attnsweep status CONFIG | head): stop quietly, as cat does;
        # stdout goes to devnull so the interpreter's final flush does not raise again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as err:
        # A store that cannot be written (disk full, read-only): one line, no traceback. The
        # store module is looked up, not imported, so the light `job` client stays light.
        store = sys.modules.get("attnsweep.stores.io")
        if store is None or not isinstance(err, store.StoreWriteError):
            raise
        print(f"attnsweep: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
