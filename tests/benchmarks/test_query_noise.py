"""benchmarks/query_noise.py, the measurement behind query_tokens' default advice: on small sizes.

Truth: sampling every token (m = n) is the whole layer in another order, so each sampled lambda is
the whole one up to roundoff and the within-seed spread vanishes; m < n samples really differ."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import query_noise  # noqa: E402


def test_every_token_sampled_is_the_whole_layer():
    n = 48
    whole, sampled = query_noise.lambdas(n, 8, 0.3, 1.5, seed=1, tokens=[n, 12], repeats=3, dtype=torch.float64)
    # float64, n^2 = 2304 terms summed in another order: relative error below 1e-12
    np.testing.assert_allclose(sampled[n], whole, rtol=1e-12)
    assert len(set(sampled[12])) == 3 and all(v > 0 for v in sampled[12])


def test_the_table(capsys):
    assert query_noise.main(["--n", "40", "--d", "6", "--rho", "0.25", "--gamma", "1.3", "--seeds", "3",
                             "--tokens", "40", "10", "--repeats", "2", "--dtype", "float64"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split("|")[1].strip(): line for line in lines if line.startswith("| 40 ") or line.startswith("| 10 ")}
    assert set(rows) == {"40", "10"}
    assert float(rows["40"].split("|")[2]) == 0.0  # m = n: no spread within a seed (5 decimals)
    assert float(rows["10"].split("|")[2]) > 0.0
