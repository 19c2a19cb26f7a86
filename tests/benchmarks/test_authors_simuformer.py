"""benchmarks/authors_simuformer.py: it runs only simuformer's own files (their git blob hashes),
and its Monte Carlo comparison tells agreement from a difference beyond the error."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import authors_simuformer  # noqa: E402


def test_a_folder_whose_files_are_not_the_commit_s_is_refused(tmp_path: Path) -> None:
    for name in authors_simuformer.BLOBS:
        (tmp_path / name).write_text("print('not simuformer')\n")
    with pytest.raises(SystemExit, match="is not runner.py of"):
        authors_simuformer.read_scripts(tmp_path, authors_simuformer.COMMIT)


def test_the_blob_hash_is_git_s() -> None:
    assert authors_simuformer.git_blob(b"") == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"  # git's empty blob


def test_agreement_within_and_beyond_the_monte_carlo_error() -> None:
    """Four standard errors of the difference of two means of 400 fractions, sqrt(2 p (1 - p)/400),
    plus 1e-3: at p = 0.5 that is 0.1414 + 0.001."""
    assert authors_simuformer.agreement(np.array([0.44]), np.array([0.56]), 400)[0]  # 0.12 apart
    ok, diff, z = authors_simuformer.agreement(np.array([0.42]), np.array([0.58]), 400)
    assert not ok and diff == pytest.approx(0.16) and z == pytest.approx(0.16 / np.sqrt(2 * 0.25 / 400))
