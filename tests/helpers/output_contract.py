"""workflow/OUTPUTS.md read as the contract of the aggregate stores, and a store checked against it
(test_experiments_e2e over every experiment's tiny run, the checkpoint run of cluster_emergence)."""

from __future__ import annotations

import re
from pathlib import Path

import xarray as xr

#: Attrs every aggregate store carries.
COMMON_ATTRS = {"experiment", "paper", "dtype", "step", "attnsweep_version", "git_commit", "torch_version",
                "numpy_version", "xarray_version", "python_version", "hostname"}


def output_contract() -> dict[str, dict[str, dict]]:
    """workflow/OUTPUTS.md as {experiment: {store: {variable: (dims, units, long_name, required)}},
    with ``boundary.csv`` -> its list of columns."""
    text = (Path(__file__).resolve().parents[2] / "workflow" / "OUTPUTS.md").read_text()
    contract: dict[str, dict[str, dict]] = {}
    experiment = store = None
    for line in text.splitlines():
        if line.startswith("## "):
            experiment = line[3:].strip()
            contract[experiment] = {}
        elif line.startswith("### ") and experiment:
            store = line[4:].strip().strip("`")
            contract[experiment][store] = {}
        elif experiment and store == "boundary.csv" and line.startswith("Columns: "):
            contract[experiment][store] = re.findall(r"`([^`]+)`", line)
        elif experiment and store and line.startswith("| `"):
            cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            name = re.match(r"`([^`]+)`", cells[0]).group(1)
            required = "(with" not in cells[0]
            contract[experiment][store][name] = (tuple(cells[1].split(", ")), cells[2], cells[3], required)
    return contract


def documented_stores(experiment: str, stores: tuple[str, ...]) -> dict[str, dict]:
    """The section ``## <experiment>`` of workflow/OUTPUTS.md, holding each of ``stores``: an
    AssertionError names the heading to add where the section or a store's heading is missing."""
    section = output_contract().get(experiment)
    headings = ", ".join(f"'### `{store}`'" for store in stores)
    assert section is not None, (
        f"workflow/OUTPUTS.md has no section '## {experiment}': add it, with the headings {headings} (under a "
        "store a table of its variables, under boundary.csv a line 'Columns: ...'; docs/extending.md: "
        "in this repository, what the tests need)")
    missing = [store for store in stores if store not in section]
    assert not missing, (f"workflow/OUTPUTS.md, section '## {experiment}': add "
                         + ", ".join(f"'### `{store}`'" for store in missing))
    return section


def store_problems(store: str, ds: xr.Dataset, documented: dict[str, tuple], every: bool = False) -> list[str]:
    """How ``ds`` (the aggregate ``store``) departs from its documented variables: one undocumented,
    one missing (those marked "(with ...)" only when ``every``), other dims, units or long_name, a
    common attr absent."""
    problems = [f"{store}: {v} is not documented" for v in ds.data_vars if v not in documented]
    problems += [f"{store}: {v} is missing" for v, spec in documented.items() if (every or spec[3]) and v not in ds]
    for v in set(ds.data_vars) & set(documented):
        have = (ds[v].dims, ds[v].attrs.get("units"), ds[v].attrs.get("long_name"))
        if have != documented[v][:3]:
            problems.append(f"{store}: {v} is {have}, documented {documented[v][:3]}")
    return problems + [f"{store}: no attr {a}" for a in sorted(COMMON_ATTRS - set(ds.attrs))]
