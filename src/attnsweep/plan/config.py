r"""Config loading and validation into a :class:`Sweep` of :class:`~attnsweep.plan.experiment_plan.Plan`\ s.

Validation runs in stages, all before any job: finite numbers, the JSON schema in the package's
``workflow/schemas/config.schema.yaml`` (which also fills the schema's defaults), counts against
their caps, the experiment's axis domains on the expanded grids, then the time and memory of the
biggest job. Every failure is a :class:`~attnsweep.errors.ConfigError` whose message names the
offending key.
"""

from __future__ import annotations

import copy
import functools
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from attnsweep import project_files, registry
from attnsweep.errors import ConfigError
from attnsweep.grid import SEED, expand, expand_seeds, format_value
from attnsweep.jobspec import JobSpec
from attnsweep.plan.cost import hours
from attnsweep.plan.experiment_plan import Plan, estimate
from attnsweep.plan.refinement import load_record, recorded_blocks
from attnsweep.plan.refinement import settings as refine_settings


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML config; a missing file or bad YAML is a ConfigError."""
    try:
        with open(path) as fh:
            data = yaml.safe_load(fh)
    except OSError as err:
        raise ConfigError(str(path), f"cannot read config: {err.strerror}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(str(path), f"not valid YAML: {where}{problem}") from None
    if not isinstance(data, dict):
        raise ConfigError(str(path), "the config must be a mapping")
    return data


def _schema_error_line(config: dict[str, Any]) -> ConfigError:
    """Re-run the schema with plain jsonschema to name the first offending key in one line."""
    from jsonschema.exceptions import best_match  # the error path only

    error = best_match(_strict_validator()(schema()).iter_errors(config))
    if error is None:  # pragma: no cover - the filling and the plain validator disagree
        return ConfigError("config", "rejected by the schema")
    while error.parent is not None and error.parent.validator == "oneOf":
        error = error.parent  # best_match descends into branches; judge from the oneOf itself
    while error.validator == "oneOf" and error.context:
        # A value fitting no branch: blame the branch of its own kind (a mapping's keys), or
        # say what the branches accept when the value is of no accepted kind at all.
        deeper = [e for e in error.context if not (e.validator == "type" and not e.path)]
        if not deeper:
            key = ".".join(map(str, error.absolute_path))
            accepted = error.schema.get("description", "see the schema").strip()
            return ConfigError(key, f"{error.instance!r} is not accepted here: {accepted}")
        branches: dict[Any, list] = {}
        for e in deeper:
            branches.setdefault(e.relative_schema_path[0], []).append(e)
        error = best_match(min(branches.values(), key=len))  # the branch the value nearly fits
    key = ".".join(str(p) for p in error.absolute_path) or "config"
    message = error.message
    if error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        allowed = ", ".join(sorted(error.schema.get("properties", {})))
        key = ".".join([*map(str, error.absolute_path), extra[0]]) if extra else key
        message = f"unknown key (allowed: {allowed})"
    elif error.validator == "required":
        missing = [p for p in error.validator_value if p not in error.instance]
        key = ".".join([*map(str, error.absolute_path), *missing[:1]])
        message = "required key is missing"
    return ConfigError(key, message)


def schema() -> dict[str, Any]:
    """A copy of the config's JSON schema (:func:`_schema`)."""
    return copy.deepcopy(_schema())


@functools.cache
def _schema() -> dict[str, Any]:
    """The config's JSON schema: the global keys of the shipped ``workflow/schemas/config.schema.yaml``,
    and one section per registered experiment (:meth:`~attnsweep.contract.Experiment.config_schema`)."""
    text = project_files.path("workflow", "schemas", "config.schema.yaml").read_text()
    schema = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    schema["properties"]["experiments"]["properties"] = {
        name: registry.get(name).config_schema() for name in registry.names()}
    return schema


@functools.cache
def _strict_validator() -> type[jsonschema.Validator]:
    """Draft 2020-12 where an integer is an int: JSON Schema also takes 4.0 and 1e300, which
    reach ``range`` and ``len`` as floats."""
    integer = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _, value: isinstance(value, int) and not isinstance(value, bool))
    return jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=integer)


@functools.cache
def _filling_validator() -> jsonschema.Validator:
    """The schema's validator that also fills defaults: the jsonschema FAQ recipe that
    ``snakemake.utils.validate`` uses, built once. (Snakemake's re-reads and re-parses the schema
    on every call, ~160 ms, and shares each default object among configs.)"""
    properties = _strict_validator().VALIDATORS["properties"]

    def fill(validator: Any, schemas: dict, instance: Any, schema: dict) -> Any:
        if isinstance(instance, dict):
            for name, subschema in schemas.items():
                if "default" in subschema:
                    instance.setdefault(name, copy.deepcopy(subschema["default"]))
        yield from properties(validator, schemas, instance, schema)

    return jsonschema.validators.extend(_strict_validator(), {"properties": fill})(_schema())


def validate_schema(config: dict[str, Any]) -> dict[str, Any]:
    """Validate against the JSON schema and fill defaults; returns a new dict."""
    config = copy.deepcopy(config)
    try:
        _filling_validator().validate(config)
    except jsonschema.ValidationError:
        raise _schema_error_line(config) from None
    return config


@dataclass(frozen=True)
class Sweep:
    """A validated config: global settings and one plan per experiment."""

    config: dict[str, Any]
    plans: dict[str, Plan]
    job_mib: int = 0  # estimated peak memory of the largest simulate job, MiB

    @property
    def results(self) -> str:
        return self.config["results"]

    @property
    def logs(self) -> str:
        return self.config["logs"]


def check_numbers(config: dict[str, Any]) -> None:
    """NaN is refused everywhere, +-inf everywhere but in grid values (whose axes say whether
    they take it): JSON-schema bounds let both through, as every comparison with NaN is false."""

    def walk(value: Any, key: str, grid_value: bool) -> None:
        if isinstance(value, float) and not math.isfinite(value):
            if math.isnan(value):
                raise ConfigError(key, "NaN is not a value")
            if not grid_value:
                raise ConfigError(key, f"{format_value(value)} is not a value here: a finite number is needed")
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{key}.{k}", grid_value)
        elif isinstance(value, list):
            for v in value:
                walk(v, key, grid_value)

    for key, value in config.items():
        if key != "experiments" or not isinstance(value, dict):
            walk(value, str(key), False)
            continue
        for name, section in value.items():
            prefix = f"experiments.{name}"
            if not isinstance(section, dict):
                walk(section, prefix, False)
                continue
            axes = registry.get(name).axis_names if name in registry.names() else ()
            for k, v in section.items():
                walk(v, f"{prefix}.{k}", k in axes)


def plan_experiment(name: str, section: dict[str, Any], dtype: str, block_mib: int = 256,
                    limits: dict[str, float] | None = None) -> Plan:
    """Expand and check one experiment section (already schema-validated); ``dtype`` is the
    global one, which the section's own ``dtype`` overrides. ``limits`` (``max_axis_values``,
    ``max_jobs``, ``max_outputs``) are checked on counts, before anything is expanded."""
    limits = {"max_axis_values": math.inf, "max_jobs": math.inf, "max_outputs": math.inf, **(limits or {})}
    prefix = f"experiments.{name}"
    try:
        experiment = registry.get(name)
    except KeyError as err:
        raise ConfigError(prefix, str(err.args[0])) from None
    axis_limit = limits["max_axis_values"]
    grid = {
        axis.name: axis.check(f"{prefix}.{axis.name}",
                              expand(section[axis.name], f"{prefix}.{axis.name}", axis_limit))
        for axis in experiment.axes
    }
    seeds = expand_seeds(section["seeds"], f"{prefix}.seeds", axis_limit)
    wildcards = tuple(section.get("wildcards", experiment.default_wildcards))
    known = (*experiment.axis_names, SEED)
    for axis in wildcards:
        if axis not in known:
            raise ConfigError(f"{prefix}.wildcards", f"unknown axis {axis!r} (axes: {', '.join(known)})")
    jobs = math.prod(len(seeds) if axis == SEED else len(grid[axis]) for axis in wildcards)
    if jobs > limits["max_jobs"]:
        raise ConfigError(f"{prefix}.wildcards", f"{jobs} jobs (one per value of {' x '.join(wildcards)}), "
                                                 f"over max_jobs = {limits['max_jobs']}: batch more axes")
    dtype = section.get("dtype", dtype)
    axis_keys = {*experiment.axis_names, "seeds", "wildcards", "dtype", "refine"}
    options = {k: v for k, v in section.items() if k not in axis_keys}
    for key, records in experiment.records(options).items():
        if records > limits["max_outputs"]:
            raise ConfigError(f"{prefix}.{key}", f"{format_value(records)} records a system, over "
                                                 f"max_outputs = {limits['max_outputs']}")
    experiment.check(options, grid, prefix)
    plan = Plan(experiment, grid, seeds, wildcards, options, dtype, block_mib)
    if "refine" in section:
        plan = replace(plan, refine=refine_settings(experiment, len(plan.seeds), section["refine"], options,
                                                    f"{prefix}.refine"))
    return plan


def load_sweep(config: dict[str, Any]) -> Sweep:
    """Validate a config dict (numbers, schema, counts, domains, then the time and memory of the
    biggest job) and plan every experiment."""
    check_numbers(config)
    config = validate_schema(config)
    limits = {key: config[key] for key in ("max_axis_values", "max_jobs", "max_outputs")}
    plans = {
        name: plan_experiment(name, section, config["dtype"], config["block_mib"], limits)
        for name, section in config["experiments"].items()
    }
    for plan in plans.values():
        check_job_time(plan, config["max_job_hours"], config["max_job_mib"])
    job_mib = max((check_job_memory(plan, config["max_job_mib"]) for plan in plans.values()), default=0)
    for name, plan in plans.items():
        if plan.refine is not None:
            check_budget(plan)
            plans[name] = plan.with_extra(recorded_blocks(plan.grid, load_record(config["results"], name), plan.refine))
    return Sweep(config, plans, job_mib)


def check_budget(plan: Plan) -> None:
    """Refuse a refinement whose base grid alone is estimated over its ``core_hours``."""
    base = hours(sum(plan.seconds().values()))
    if base >= plan.refine.core_hours:
        raise ConfigError(f"experiments.{plan.name}.refine.core_hours",
                          f"no budget left: the base grid alone is about {base:.3g} core-hours, over "
                          f"core_hours = {format_value(plan.refine.core_hours)}")


def check_job_time(plan: Plan, max_job_hours: float, max_job_mib: int) -> None:
    """Refuse a plan whose slowest job is estimated over ``max_job_hours`` on one core, naming the
    key to change: ``block_mib`` where a larger one within ``max_job_mib`` brings it under the
    limit (a memory budget changes no number), else, of the keys whose default would, a number (a
    size, a step) before a choice (a method), else the one whose default shortens it most."""
    seconds = plan.seconds()
    path = max(seconds, key=seconds.get)
    if not hours(seconds[path]) > max_job_hours:
        return
    larger = larger_block(plan, path, max_job_hours, max_job_mib)
    if larger is not None:
        block, after, need = larger
        raise ConfigError("block_mib", f"job {path} would take about {hours(seconds[path]):.3g} hours on one core "
                          f"with block_mib = {plan.block_mib}, over max_job_hours = {format_value(max_job_hours)}: "
                          f"block_mib = {block} brings it to {hours(after):.3g} hours and {need / 2**30:.3g} GiB")
    job, defaults = plan.blocks()[path], experiment_defaults(plan.name)

    def reset(key: str) -> float:
        """The job's estimate with ``key`` at its default (a fanned-out axis at its first value)."""
        grid, seeds, options = dict(job.grid), job.seeds, {**plan.options}
        if key == "seeds":
            seeds = expand_seeds(defaults[key], key)[: 1 if SEED in plan.wildcards else None]
        elif key in grid:
            grid[key] = expand(defaults[key], key)[: 1 if key in plan.wildcards else None]
        else:
            options[key] = defaults[key]
        spec = JobSpec(plan.name, grid, seeds, plan.experiment.result_options(options, grid), job.dtype,
                       job.version, job.block_mib)
        return estimate(plan.experiment.job_seconds, spec)

    def rank(key: str) -> tuple[bool, bool, float]:
        value, after = (plan.seeds if key == "seeds" else plan.grid.get(key, plan.options.get(key))), reset(key)
        numeric = isinstance(value, (int, float, list)) and not isinstance(value, bool)
        return hours(after) > max_job_hours, not numeric, after

    culprit = min((k for k in (*plan.grid, "seeds", *plan.options) if k in defaults), key=rank)
    raise ConfigError(
        f"experiments.{plan.name}.{culprit}",
        f"job {path} would take about {hours(seconds[path]):.3g} hours on one core, over max_job_hours = "
        f"{format_value(max_job_hours)}: change {culprit}, make more axes wildcards, or raise max_job_hours",
    )


def larger_block(plan: Plan, path: str, max_job_hours: float, max_job_mib: int) -> tuple[int, float, float] | None:
    """The smallest doubling of ``block_mib`` that brings job ``path`` under ``max_job_hours``
    within ``max_job_mib``, with the job's seconds and bytes under it, or None. A kernel that takes
    its faster route only where the operand fits one block (exact eta's n x n squared Gram) needs it."""
    job, block = plan.blocks()[path], plan.block_mib
    while (block := 2 * block) <= max_job_mib:
        larger = replace(job, block_mib=block)
        seconds = estimate(plan.experiment.job_seconds, larger)
        if hours(seconds) <= max_job_hours:
            need = estimate(plan.experiment.job_memory_bytes, larger)
            return (block, seconds, need) if need <= max_job_mib << 20 else None
    return None


def check_job_memory(plan: Plan, max_job_mib: int) -> int:
    """The estimated peak MiB of the plan's biggest job; refused if over ``max_job_mib``."""
    memory = plan.memory()
    path = max(memory, key=memory.get)
    need = memory[path]
    if need > max_job_mib << 20:
        raise ConfigError(
            f"experiments.{plan.name}",
            f"job {path} would need about {need / 2**30:.3g} GiB, over max_job_mib = {max_job_mib}: "
            "make more axes wildcards, lower block_mib, or raise max_job_mib",
        )
    return math.ceil(need / 2**20)


def experiment_defaults(name: str) -> dict[str, Any]:
    """The schema defaults of one experiment section."""
    return copy.deepcopy(_defaults(name))


@functools.cache
def _defaults(name: str) -> dict[str, Any]:
    return validate_schema({"experiments": {name: {}}})["experiments"][name]
