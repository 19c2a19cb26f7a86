"""Property: any config is either accepted or refused with one line naming a key, quickly.

A seeded mutator takes the default config and every ``config/sweeps/*.yaml`` and applies one to
three random mutations to random places of the tree (type swaps, NaN and infinities, huge, tiny,
negative and zero numbers, empty and duplicated lists, unknown and missing keys, wrong nesting).
Each result goes through ``attnsweep validate`` in this process (``cli.main``, the code of the
command, which also plans the figures as the workflow does). It must exit 0, or exit 2 with
exactly one stderr line ``attnsweep: config error: KEY: message`` whose KEY is a dotted path
starting at a key of the config or the schema; any other exception, a second line, or a case
over ``SECONDS`` fails the test with the base, the seed and the mutated YAML to reproduce it.
A base that names a checkpoint (``config/sweeps/cluster_emergence_albert.yaml``, whose directory
the user fills) is pointed at one the test writes, of the sizes it asks for, so that the mutations
reach the checks behind the checkpoint's (its refusal alone: ``test_cluster_emergence_checkpoint``).
"""

from __future__ import annotations

import copy
import math
import random
import re
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import albert_checkpoint

from attnsweep import cli
from attnsweep.plan.config import schema

REPO = Path(__file__).resolve().parents[2]
BASES = [REPO / "config" / "config.yaml", *sorted((REPO / "config" / "sweeps").glob("*.yaml"))]
ALBERT = REPO / "config" / "sweeps" / "cluster_emergence_albert.yaml"
TOP_KEYS = set(schema()["properties"])
SECONDS = 5.0  # per case; validation of a refused config takes milliseconds
LINE = re.compile(r"^attnsweep: config error: ([^\s:]+): \S")

OTHER_TYPES: list[Any] = ["text", 7, 0.5, True, None, [1, 2], {"start": 1}, "inf"]
HUGE: list[Any] = [1e300, 10**18, 10**9, 2**31, 1e12]
TINY: list[Any] = [1e-300, 1e-12, 5e-324]


def places(tree: Any, path: tuple = ()) -> list[tuple]:
    """Every (path) to a value in the tree, dict keys and list indices alike."""
    found = [path] if path else []
    if isinstance(tree, dict):
        for key, value in tree.items():
            found += places(value, (*path, key))
    elif isinstance(tree, list):
        for index, value in enumerate(tree):
            found += places(value, (*path, index))
    return found


def mutate(config: dict, rng: random.Random) -> str:
    """Apply one random mutation in place; a description of it."""
    path = rng.choice(places(config))
    parent = config
    for step in path[:-1]:
        parent = parent[step]
    key, value = path[-1], parent[path[-1]]
    kind = rng.choice(["type", "nan", "inf", "huge", "tiny", "negative", "zero", "empty", "duplicate",
                       "unknown", "delete", "nest", "unnest"])
    if kind == "type":
        parent[key] = rng.choice([v for v in OTHER_TYPES if type(v) is not type(value)])
    elif kind == "nan":
        parent[key] = math.nan
    elif kind == "inf":
        parent[key] = rng.choice([math.inf, -math.inf])
    elif kind == "huge":
        parent[key] = rng.choice(HUGE)
    elif kind == "tiny":
        parent[key] = rng.choice(TINY)
    elif kind == "negative":
        parent[key] = -abs(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value else -1
    elif kind == "zero":
        parent[key] = 0
    elif kind == "empty":
        parent[key] = rng.choice([[], {}, ""])
    elif kind == "duplicate":
        parent[key] = value + value if isinstance(value, list) and value else [value, value]
    elif kind == "unknown":
        target = value if isinstance(value, dict) else parent if isinstance(parent, dict) else config
        target[f"unknown_{rng.randrange(100)}"] = 1
    elif kind == "delete":
        del parent[key]
    elif kind == "nest":
        parent[key] = rng.choice([[value], {"start": value}])
    elif kind == "unnest":
        if isinstance(value, list) and value:
            parent[key] = value[0]
        elif isinstance(value, dict) and value:
            parent[key] = next(iter(value.values()))
    return f"{kind} at {'.'.join(map(str, path))}"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkpoint of the sizes ALBERT asks for: heads of d_h = its d, its head among them."""
    section = yaml.safe_load(ALBERT.read_text())["experiments"]["cluster_emergence"]
    directory = tmp_path_factory.mktemp("albert") / "checkpoint"
    return albert_checkpoint.write_random(directory, heads=section["head"], size=section["d"][0])


def check_case(base: Path, seed: int, tmp_path: Path, capsys: pytest.CaptureFixture, checkpoint: Path) -> None:
    rng = random.Random(f"{base.name}:{seed}")
    config = copy.deepcopy(yaml.safe_load(base.read_text()))
    for section in config["experiments"].values():
        if "checkpoint" in section:
            section["checkpoint"] = str(checkpoint)
    done = [mutate(config, rng) for _ in range(rng.randint(1, 3))]
    path = tmp_path / "case.yaml"
    path.write_text(yaml.safe_dump(config))
    context = f"{base.name} seed {seed}: {'; '.join(done)}\n{path.read_text()}"
    start = time.perf_counter()
    try:
        status = cli.main(["validate", str(path)])
    except BaseException as error:  # a traceback where one line was due
        pytest.fail(f"{type(error).__name__}: {error}\n{context}")
    elapsed = time.perf_counter() - start
    err = capsys.readouterr().err.strip().splitlines()
    assert elapsed < SECONDS, f"{elapsed:.1f} s\n{context}"
    if status == 0:
        assert not err, context
        return
    assert status == 2 and len(err) == 1, f"{err}\n{context}"
    match = LINE.match(err[0])
    assert match, f"{err[0]}\n{context}"
    assert match.group(1).split(".")[0] in TOP_KEYS | set(config), f"{err[0]}\n{context}"


@pytest.mark.parametrize("base", BASES, ids=lambda p: p.stem)
def test_mutated_configs_fast(base: Path, tmp_path: Path, capsys: pytest.CaptureFixture, checkpoint: Path) -> None:
    """20 mutations of each base config (fast tier)."""
    for seed in range(20):
        check_case(base, seed, tmp_path, capsys, checkpoint)


def richest_per_experiment(bases: list[Path]) -> list[Path]:
    """The default config, and for each experiment the sweep config with the most places to mutate:
    the configs of one experiment share its schema and checks, and each has its 20 in the fast tier."""
    richest: dict[tuple[str, ...], Path] = {}
    for base in bases[1:]:
        config = yaml.safe_load(base.read_text())
        key = tuple(sorted(config["experiments"]))
        if key not in richest or len(places(config)) > len(places(yaml.safe_load(richest[key].read_text()))):
            richest[key] = base
    return [bases[0], *sorted(richest.values())]


@pytest.mark.slow
@pytest.mark.parametrize("base", richest_per_experiment(BASES), ids=lambda p: p.stem)
def test_mutated_configs_many(base: Path, tmp_path: Path, capsys: pytest.CaptureFixture, checkpoint: Path) -> None:
    """100 more mutations of the default config and of the richest config of each experiment."""
    for seed in range(20, 120):
        check_case(base, seed, tmp_path, capsys, checkpoint)
