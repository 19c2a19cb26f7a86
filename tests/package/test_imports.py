"""The package's import graph: no module imports itself back through others.

The graph is read from the source (``ast``), every ``import`` counted wherever it stands: at
module level, inside a function, or under ``TYPE_CHECKING`` (a cycle there is a cycle in what
a reader must hold in mind, and one edit away from a runtime one). ``from P import m`` of a
submodule ``m`` counts as an import of ``P.m`` only: Python imports a submodule's parent
package first whatever imports it, so that edge is in every package and is not a cycle.
No cycle is allowed, the registration of experiments included (the registry loads them from a
table of entry points; they import their types from the contract).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "attnsweep"


def modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package at ``root``."""
    out = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (see the module docstring)."""
    mods = modules(root)
    top = root.name

    def owner(name: str) -> str | None:  # the module a dotted name lives in
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for module, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                subs = [f"{node.module}.{alias.name}" for alias in node.names]
                names = [s for s in subs if s in mods] + ([node.module] if any(s not in mods for s in subs) else [])
            else:
                continue
            for name in names:
                target = owner(name) if name.split(".")[0] == top else None
                if target and target != module:
                    graph[module].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(component)
    return found


#: What each part of the package may import (docs/development.md draws it): the vocabulary at the
#: bottom, the stages in the order a sweep's data flows, the commands on top. A module is its
#: stage package's (``attnsweep.plan.config`` -> ``plan``) or, at the top level, its own.
MAY_IMPORT = {
    "errors": set(),
    "grid": {"errors"},
    "jobspec": {"grid"},
    "project_files": {"errors"},
    "contract": {"grid", "jobspec"},
    "registry": {"contract", "errors"},
    "dynamics": {"errors"},
    "stores": {"attnsweep", "errors", "grid", "jobspec"},
    "plan": {"contract", "errors", "grid", "jobspec", "project_files", "registry", "stores"},
    "reduce": {"errors", "registry", "stores"},
    "run": {"dynamics", "errors", "grid", "jobspec", "reduce", "registry", "stores"},
    "refine": {"contract", "errors", "grid", "plan", "run", "stores"},
    "experiments": {"contract", "dynamics", "errors", "grid", "jobspec", "plan", "reduce", "run", "stores"},
    "status": {"errors", "grid", "jobspec", "plan", "stores"},
    "step_check": {"errors", "grid", "plan", "refine"},
    "scaffold": {"errors", "project_files"},
    "testing": {"contract", "grid", "plan", "reduce", "registry", "run", "stores"},
    "cli": {"errors", "plan", "project_files", "reduce", "refine", "registry", "run", "scaffold", "status",
            "step_check", "stores"},
}


def part(module: str) -> str:
    """The part of the package a module belongs to (see MAY_IMPORT)."""
    return module.split(".")[1] if "." in module else module


def test_each_part_imports_only_what_it_may():
    parts = {part(m) for m in import_graph(PACKAGE)} - {"attnsweep"}
    assert parts == set(MAY_IMPORT), f"parts without a rule, or rules without a part: {parts ^ set(MAY_IMPORT)}"
    crossing = sorted((a, b) for a, targets in import_graph(PACKAGE).items() for b in targets
                      if part(a) != part(b) and part(b) not in MAY_IMPORT.get(part(a), set()))
    assert not crossing, "imports across the layers: " + "; ".join(f"{a} -> {b}" for a, b in crossing)


def test_no_import_cycle():
    found = cycles(import_graph(PACKAGE))
    assert not found, "import cycles: " + "; ".join(" <-> ".join(sorted(c)) for c in found)


@pytest.mark.parametrize(("files", "expected"), [
    ({"a.py": "from pkg import b", "b.py": "import pkg.a"}, [{"pkg.a", "pkg.b"}]),
    ({"a.py": "def f():\n    from pkg.b import x", "b.py": "from typing import TYPE_CHECKING\n"
      "if TYPE_CHECKING:\n    from pkg.a import y"}, [{"pkg.a", "pkg.b"}]),
    ({"a.py": "from pkg.b import x", "b.py": "from pkg.c import y", "c.py": "from pkg import a"},
     [{"pkg.a", "pkg.b", "pkg.c"}]),
    # a submodule importing a sibling through the parent, which imports it lazily: no cycle
    ({"__init__.py": "def f():\n    from pkg import fig", "fig.py": "from pkg import theory", "theory.py": ""}, []),
    # ... but a constant of the parent is one
    ({"__init__.py": "X = 1\ndef f():\n    from pkg import fig", "fig.py": "from pkg import X"},
     [{"pkg", "pkg.fig"}]),
    ({"a.py": "import pkg.b", "b.py": "import json"}, []),
])
def test_cycle_finder(tmp_path, files, expected):
    """The finder itself, on small packages whose cycles are known."""
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    for name, text in files.items():
        (root / name).write_text(text)
    graph = import_graph(root)
    assert sorted(map(sorted, cycles(graph))) == sorted(map(sorted, expected))
