"""attnsweep as an installed package: the files it ships (attnsweep.shipped), ``attnsweep init``.

Truths: the checkout's Snakefile, config/config.yaml and profiles are links to the package's own
files, and ``init`` writes exactly those; ``init`` refuses, writing nothing, where any of them
exists, unless ``--force``; a shipped file that is missing is one line naming it and how to get it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from attnsweep import cli, shipped
from attnsweep.errors import SetupError
from attnsweep.project import FILES

REPO = Path(__file__).resolve().parents[1]


def test_the_checkout_links_the_shipped_project() -> None:
    for name in FILES:
        assert (REPO / name).resolve() == shipped.path("project", name).resolve(), name


def test_init_writes_the_project_and_refuses_to_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    target = tmp_path / "my-sweep"
    assert cli.main(["init", str(target)]) == 0
    for name in FILES:
        assert (target / name).read_bytes() == shipped.path("project", name).read_bytes(), name
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
    assert config.read_bytes() == shipped.path("project", "config/config.yaml").read_bytes()
    assert (target / "Snakefile").exists()


def test_a_missing_shipped_file_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shipped.resources, "files", lambda _: tmp_path)  # an install without package data
    with pytest.raises(SetupError) as missing:
        cli.main(["workflow-path"])
    message = str(missing.value)
    assert message == (f"attnsweep: missing {tmp_path / 'workflow' / 'Snakefile'}, a file the package ships: "
                       "reinstall attnsweep (pip install --force-reinstall git+URL, or pip install . in a checkout)")
    assert missing.value.code == message  # SystemExit: printed as it is, status 1


def test_workflow_path_is_the_shipped_snakefile(capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["workflow-path"]) == 0
    assert capsys.readouterr().out == f"{REPO / 'workflow/attnsweep/workflow/Snakefile'}\n"
