"""attnsweep as an installed package: the files it ships (attnsweep.project_files), ``attnsweep init``,
and a wheel in a fresh venv.

Truths: the files the package ships are the checkout's own top-level files (an editable install
finds them there; pyproject.toml lists every package of src/), and ``init`` writes exactly those
(docs/extending.md shows its Snakefile as it is); ``init`` refuses, writing nothing, where any of
them exists, unless ``--force``; a shipped file that is missing is one line naming it and how to
get it.
The wheel built from the checkout's files, alone in a venv, validates and lists from any
directory, and the project ``init`` makes there runs a tiny sweep to a report holding every
figure; without its schema, the command line and snakemake say so in one line, status 1.
Run from a source tree without an install, the package records its pyproject.toml's version.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from helpers import processes
from helpers.project import BUILT_IN, CONFIGS, doc_files

from attnsweep import cli, project_files, scaffold
from attnsweep.errors import SetupError

REPO = Path(__file__).resolve().parents[2]


def test_the_checkout_is_the_shipped_project() -> None:
    """In an editable install the shipped files are the checkout's, real files (no link), and
    ``init`` writes every sweep of config/sweeps/ beside the fixed files."""
    assert project_files.root() == REPO
    for name in scaffold.files():
        assert not (REPO / name).is_symlink() and project_files.path(name) == REPO / name, name
    assert {Path(n).name for n in scaffold.files() if n.startswith("config/sweeps/")} == {
        p.name for p in (REPO / "config/sweeps").glob("*.yaml")}


def test_pyproject_lists_every_package() -> None:
    """The wheel's packages are listed by hand (a mapped folder is not found): none may be missing."""
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(init.parent.relative_to(REPO / "src").parts) for init in (REPO / "src").rglob("__init__.py")}
    assert listed == found | {"attnsweep.project"}


def test_the_docs_show_the_snakefile_init_writes() -> None:
    shown = doc_files("docs/extending.md", "## A project from the installed package")["Snakefile"]
    assert shown == project_files.path("Snakefile").read_text()


def test_init_writes_the_project_and_refuses_to_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    target = tmp_path / "my-sweep"
    assert cli.main(["init", str(target)]) == 0
    for name in scaffold.files():
        assert (target / name).read_bytes() == project_files.path(name).read_bytes(), name
    assert "snakemake --report report.html" in capsys.readouterr().out

    config = target / "config/config.yaml"
    config.write_text("experiments: {}\n")
    (target / "Snakefile").unlink()
    with pytest.raises(SetupError) as refused:
        cli.main(["init", str(target)])
    message = str(refused.value)
    assert message.startswith("attnsweep: init would overwrite ") and "\n" not in message, message
    assert str(config) in message and "--force" in message
    assert not (target / "Snakefile").exists() and config.read_text() == "experiments: {}\n"  # nothing written

    assert cli.main(["init", str(target), "--force"]) == 0
    assert config.read_bytes() == project_files.path("config/config.yaml").read_bytes()
    assert (target / "Snakefile").exists()
    before = {name: (REPO / name).read_bytes() for name in scaffold.files()}
    assert cli.main(["init", str(REPO), "--force"]) == 0  # the checkout's own files: left as they are
    assert before == {name: (REPO / name).read_bytes() for name in scaffold.files()}


def test_a_missing_shipped_file_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(project_files, "root", lambda: tmp_path)  # an install without package data
    with pytest.raises(SetupError) as missing:
        cli.main(["workflow-path"])
    message = str(missing.value)
    assert message == (f"attnsweep: missing {tmp_path / 'workflow' / 'Snakefile'}, a file the package ships: "
                       "reinstall attnsweep (pip install --force-reinstall git+URL, or pip install . in a checkout)")
    assert missing.value.code == message  # SystemExit: printed as it is, status 1


def test_workflow_path_is_the_shipped_snakefile(capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["workflow-path"]) == 0
    assert capsys.readouterr().out == f"{REPO / 'workflow/Snakefile'}\n"


# ------------------------------------------------------------------ a wheel in a fresh venv

def run(*cmd: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    """``cmd`` in a process group of its own, ended with everything it started (tests/helpers/processes.py;
    the whole test takes 14 to 15 s on 2 shared cores, its slowest command 6 to 9 s)."""
    return processes.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL)


def ok(*cmd: str | Path, cwd: Path) -> str:
    done = run(*cmd, cwd=cwd)
    assert done.returncode == 0, f"{cmd}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    return done.stdout + done.stderr


def wheel_venv(tmp_path: Path) -> Path:
    """A fresh venv holding the wheel built from the checkout's files (what a clone holds); its
    dependencies are this venv's, through a plain path line in a .pth (which does not run the
    .pth files there: this venv's editable attnsweep stays out). Returns its bin directory."""
    source = tmp_path / "clone"
    listed = processes.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, listed):
        if (REPO / name).is_symlink() or (REPO / name).is_file():  # not a file deleted and not yet committed
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name, follow_symlinks=False)
    ok(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", tmp_path / "dist", ".",
       cwd=source)
    (wheel,) = (tmp_path / "dist").glob("attnsweep-*.whl")
    venv = tmp_path / "venv"
    ok(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    ok(sys.executable, "-m", "pip", "--python", venv / "bin/python", "install", "--no-deps", wheel, cwd=tmp_path)
    site = ok(venv / "bin/python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=tmp_path)
    ours = dict.fromkeys(sysconfig.get_path(kind) for kind in ("purelib", "platlib"))
    Path(site.strip(), "test-dependencies.pth").write_text("".join(f"{path}\n" for path in ours))
    return venv / "bin"


@pytest.mark.slow
def test_a_wheel_runs_a_project_anywhere(tmp_path: Path) -> None:
    """From a directory outside the repository, with only the wheel's attnsweep: validate,
    experiments, init, then the project's snakemake run of a tiny config up to its report; with
    a shipped file removed, one line and status 1."""
    bin_ = wheel_venv(tmp_path)
    work = tmp_path / "elsewhere"
    work.mkdir()
    module = ok(bin_ / "python", "-c", "import attnsweep; print(attnsweep.__file__)", cwd=work).strip()
    assert Path(module).resolve().is_relative_to((tmp_path / "venv").resolve()), module
    snakefile = Path(ok(bin_ / "attnsweep", "workflow-path", cwd=work).strip())
    assert snakefile.is_file() and snakefile.resolve().is_relative_to((tmp_path / "venv").resolve()), snakefile

    assert "valid" in ok(bin_ / "attnsweep", "validate", CONFIGS / "critical_scaling.yaml", cwd=work)
    listed = ok(bin_ / "attnsweep", "experiments", cwd=work)
    assert all(f"{name}: " in listed for name in BUILT_IN), listed

    ok(bin_ / "attnsweep", "init", "my-sweep", cwd=work)
    project = work / "my-sweep"
    assert all((project / name).is_file() for name in scaffold.files())
    again = run(bin_ / "attnsweep", "init", "my-sweep", cwd=work)
    assert again.returncode == 1 and again.stderr.startswith("attnsweep: init would overwrite ")
    assert again.stderr.count("\n") == 1, again.stderr

    shutil.copy(CONFIGS / "critical_scaling.yaml", project / "config/config.yaml")
    said = ok(bin_ / "python", "-m", "snakemake", cwd=project)  # the project's profiles/default: --cores all
    assert "Using workflow specific profile profiles/default " in said, said[-2000:]
    assert (project / "results/critical_scaling/boundary.csv").stat().st_size > 0
    ok(bin_ / "python", "-m", "snakemake", "--report", "report.html", cwd=project)
    ok(bin_ / "python", REPO / "scripts/check-report.py", "report.html", "config/config.yaml", cwd=project)
    assert "attnsweep sweep of self-attention dynamics" in (project / "report.html").read_text()  # its caption

    schema = Path(module).parent / "project/workflow/schemas/config.schema.yaml"
    schema.unlink()
    for cmd in ([bin_ / "attnsweep", "validate", "config/config.yaml"], [bin_ / "attnsweep", "experiments"],
                [bin_ / "python", "-m", "snakemake", "--dry-run"]):
        broken = run(*cmd, cwd=project)
        line = f"attnsweep: missing {schema}, a file the package ships: reinstall attnsweep"
        assert broken.returncode == 1 and line in broken.stderr and "Traceback" not in broken.stderr, broken.stderr
        assert broken.stderr.splitlines()[-1].startswith(line), broken.stderr  # snakemake says first which profile


def test_a_source_tree_without_an_install_records_its_version(tmp_path: Path) -> None:
    """``python -S`` sees no site-packages, and a copy of the package has no egg-info beside it, so
    no attnsweep is installed: the version stores record is then that of the pyproject.toml of the
    tree it runs from, and ``0+unknown`` where the tree has none."""
    def version_from(root: Path) -> str:
        shutil.copytree(REPO / "src" / "attnsweep", root / "src" / "attnsweep",
                        ignore=shutil.ignore_patterns("__pycache__"))
        code = "import sys; sys.path.insert(0, sys.argv[1]); import attnsweep; print(attnsweep.__version__)"
        return subprocess.run([sys.executable, "-S", "-c", code, str(root / "src")], capture_output=True,
                              text=True, check=True, cwd=root).stdout.strip()

    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "pyproject.toml").write_text('[project]\nname = "attnsweep"\nversion = "9.8.7"\n')
    assert version_from(tmp_path / "tree") == "9.8.7"
    assert version_from(tmp_path / "bare") == "0+unknown"
