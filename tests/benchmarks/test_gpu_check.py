"""benchmarks/gpu_check.py without a GPU: its CPU mode (``--dry``, toy sizes) as CI runs it, and the
plan of its paper-scale jobs, so that the command prepared for a GPU lease does not rot."""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import pytest
from helpers import processes
from helpers.project import BUILT_IN

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_check  # noqa: E402

SECTIONS = ["tests", "ceilings", "jobs", "authors", "estimate"]
#: The job each experiment measures at paper scale: the longest of its config by the cost model.
PAPER_JOBS = {
    "critical_scaling": "n~4096/d~1024/seed~0",
    "sphere_clustering": "n~32/d~32",
    "causal_clustering": "n~200/d~2",
    "cluster_emergence": "n~256/d~128",
    "mixture_training": "K~8/L~3/m~1024",
}


def test_every_built_in_has_a_case():
    """An experiment added to the repository needs a case in benchmarks/gpu_check.py (docs/extending.md)."""
    missing, extra = sorted(set(BUILT_IN) - set(gpu_check.CASES)), sorted(set(gpu_check.CASES) - set(BUILT_IN))
    assert not missing, f"benchmarks/gpu_check.py: add a case to CASES for {missing} (its longest job)"
    assert not extra, f"benchmarks/gpu_check.py: CASES names {extra}, which are not built-in experiments"


@pytest.fixture(scope="module")
def dry(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str, str]:
    """The JSON, the markdown table and the stdout of one ``--dry`` run (no authors' file)."""
    out = tmp_path_factory.mktemp("gpu_check")
    # --dry's budgets are hang guards (gpu_check.DRY_BUDGET_SCALE); this one guards the whole command
    done = processes.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--dry", "--out", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=processes.HANG_S)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads((out / "gpu_check.json").read_text()), (out / "gpu_check.md").read_text(), done.stdout


@pytest.mark.slow  # the dry run (~14 s of toy jobs) is the full suite's; the plans below are the fast tier's
def test_every_section_and_experiment_in_the_json(dry: tuple[dict, str, str]) -> None:
    data = dry[0]
    sections = data["sections"]
    assert list(sections) == SECTIONS
    assert sorted(sections["jobs"]) == sorted(sections["estimate"]) == BUILT_IN == sorted(gpu_check.CASES)
    tests = sections["tests"]["pytest tests/dynamics/test_cuda.py"]
    assert tests["status"] == "ok" and sum(tests["counts"].values()) >= 8  # skipped without CUDA
    ceilings = sections["ceilings"]["cpu"]
    assert ceilings["status"] == "ok" and ceilings["copy_bytes_per_s"] > 0
    assert set(ceilings["mm_flops_per_s"]) == {"float32", "float64"}
    (authors,) = sections["authors"].values()
    assert authors["status"] == "not given"
    for name, job in sections["jobs"].items():
        assert job["status"] == "ok", (name, job["summary"])
        assert job["config"] == gpu_check.CASES[name].config
        assert 0 < job["length_run"] <= job["length"]
        assert job["units"] > 0 and job["seconds"] > 0 and job["full_job_s"] > 0
        assert job["flops_per_unit"] > 0 and job["bytes_per_unit"] > 0 and job["of_mm"] > 0 and job["of_copy"] > 0
    for name, estimate in sections["estimate"].items():
        assert estimate["status"] == "ok" and estimate["seconds"] > 0, (name, estimate["summary"])
    assert data["meta"]["device_name"] and "dry" in data["meta"]["mode"]


@pytest.mark.slow
def test_one_table_row_per_entry_printed_last(dry: tuple[dict, str, str]) -> None:
    data, markdown, stdout = dry
    rows = [line.split(" | ")[:3] for line in markdown.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[0] == ["| section", "item", "status"]
    assert rows[1:] == [[f"| {section}", item, entry["status"]]
                        for section, items in data["sections"].items() for item, entry in items.items()]
    assert stdout.endswith(markdown)


@pytest.mark.parametrize("name", sorted(PAPER_JOBS))
def test_paper_jobs_and_their_cuts(name: str) -> None:
    """At paper scale (planned, not run): the job each case measures, and a cut to k units of
    its length (the calibration's k, twice that, all) is the same job with k steps (k rho
    values), as many units per step, and valid."""
    case = gpu_check.CASES[name]
    config = gpu_check.paper_config(case, name, toy=False)
    plan = gpu_check.planned(config, name)
    estimates = plan.seconds()
    assert max(estimates, key=estimates.get) == PAPER_JOBS[name]
    full = plan.blocks()[PAPER_JOBS[name]]
    length = case.length(plan)
    k0 = math.ceil(gpu_check.CALIBRATION * length)
    for k in (k0, 2 * k0, length):
        cut = gpu_check.planned(config, name, case.cut(plan, k))
        job = cut.blocks()[PAPER_JOBS[name]]
        assert case.length(cut) == k
        assert case.units(job) * length == pytest.approx(case.units(full) * k)
        assert case.work(job) == case.work(full)  # the work of a unit does not depend on the cut


def test_a_failing_section_is_recorded_and_the_next_runs(tmp_path: Path) -> None:
    report = gpu_check.Report(tmp_path, limit_s=600, meta={"device_name": "cpu", "mode": "test", "torch": "",
                                                           "date": ""})

    def broken(budget: float) -> dict:
        raise ValueError("broken on purpose")

    failed = report.run("jobs", "a", 60, broken)
    passed = report.run("jobs", "b", 60, lambda budget: {"summary": f"budget {budget:g}"})
    assert failed["status"] == "error" and "ValueError: broken on purpose" in failed["summary"]
    assert passed["status"] == "ok" and passed["summary"] == "budget 60"
    written = json.loads((tmp_path / "gpu_check.json").read_text())["sections"]["jobs"]
    assert [written["a"]["status"], written["b"]["status"]] == ["error", "ok"]
    assert "| jobs | a | error |" in (tmp_path / "gpu_check.md").read_text()
    skipped = gpu_check.Report(tmp_path, limit_s=0, meta=report.data["meta"]).run("jobs", "c", 60, broken)
    assert skipped["status"] == "skipped"  # past the command's limit nothing starts
    scaled = gpu_check.Report(tmp_path, limit_s=70, meta=report.data["meta"], scale=gpu_check.DRY_BUDGET_SCALE)
    said = scaled.run("jobs", "d", 60, lambda budget: {"summary": f"budget {budget:g}"})["summary"]
    assert said == f"budget {60 * gpu_check.DRY_BUDGET_SCALE:g}"  # --dry: budgets and limit scaled alike


def test_deadline_stops_a_section() -> None:
    start = time.perf_counter()
    with pytest.raises(gpu_check.Timeout), gpu_check.deadline(0.2):
        while True:
            time.sleep(0.01)
    assert time.perf_counter() - start < 2


def test_the_fit_takes_the_widest_baseline_and_bounds_what_it_cannot_separate() -> None:
    """Timings of an H200 run (2026-11-26): sphere_clustering's calibration runs of 3 and 6 steps
    took 0.61 and 0.59 s (set-up and noise), its measured run 202 steps in 2.78 s; causal_clustering
    took 16.57 s for 50 steps (warm-up) and 15.77 s for 153 (the set-up, ~16 s, varies more than
    the steps add)."""
    sphere = gpu_check.fit([(3, 0.5946), (3, 0.6053), (6, 0.5925)], (202, 2.776))
    per_step = (2.776 - 0.6053) / (202 - 3)  # the line through (3, 0.6053) and (202, 2.776)
    assert sphere == pytest.approx((0.6053 - 3 * per_step, per_step, True), rel=1e-12)
    fixed, per_step, resolved = gpu_check.fit([(50, 16.57)], (153, 15.77))
    assert not resolved and (fixed, per_step) == (0.0, 15.77 / 153)  # an upper bound: no set-up
