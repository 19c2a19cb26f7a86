"""Counter-based seeding: one generator per (experiment, random point, seed, stream).

The key hashes only the axes that shape the random draws (for example n and d), never the
batched axes such as rho or gamma, so every job partition draws the same numbers and the
batched axes share common random numbers. Draws are made on the CPU in float64 and then
moved and cast, so CPU and CUDA runs, float32 and float64 runs, see the same inputs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import torch

from attnsweep.grid import format_value


def seed_key(experiment: str, point: Mapping[str, float], seed: int, stream: str) -> int:
    """63-bit integer from SHA-256 of ``experiment|a=v|...|seed=k|stream``, axes sorted by name."""
    parts = [experiment, *(f"{k}={format_value(point[k])}" for k in sorted(point))]
    text = "|".join([*parts, f"seed={seed}", stream])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


def generator(experiment: str, point: Mapping[str, float], seed: int, stream: str) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded by :func:`seed_key`."""
    return torch.Generator(device="cpu").manual_seed(seed_key(experiment, point, seed, stream))
