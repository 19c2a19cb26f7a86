"""Device and dtype selection from the config's ``device`` and ``dtype`` strings."""

from __future__ import annotations

from typing import Literal

import torch

from attnsweep.errors import ConfigError

DeviceName = Literal["auto", "cpu", "cuda"]
DtypeName = Literal["float32", "float64"]
DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "float64": torch.float64}


def resolve_device(name: DeviceName) -> torch.device:
    """``auto`` takes CUDA when present; ``cuda`` without a GPU is a ConfigError."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device", "cuda requested but torch sees no CUDA device")
    if name not in ("cpu", "cuda"):
        raise ConfigError("device", f"unknown device {name!r} (auto, cpu or cuda)")
    return torch.device(name)


def resolve_dtype(name: DtypeName) -> torch.dtype:
    if name not in DTYPES:
        raise ConfigError("dtype", f"unknown dtype {name!r} (float32 or float64)")
    return DTYPES[name]
