"""A trained ALBERT's attention heads as the (Q, K, V) of paper 004 (Section 11.2, Fig. 10).

A local checkpoint in the Hugging Face layout: a directory holding ``config.json`` and the weights,
``model.safetensors`` (read by the ``safetensors`` package) or else ``pytorch_model.bin``
(``torch.load(..., weights_only=True)``). ALBERT shares one layer's weights across depth: its
Q, K, V are time-independent, as in Eq. 1.1. With torch Linear weights W (out x in), head h
(numbered from 1, as the paper does) owns the rows s_h = [(h-1) d_h, h d_h) of the query, key and
value projections and the columns s_h of the output projection W_O (``attention.dense``),
d_h = hidden_size / num_attention_heads:

- its value map in model space, W_O[:, s_h] W_V[s_h, :], has rank d_h; its nonzero eigenvalues
  are those of V_h = W_V[s_h, :] W_O[:, s_h] (d_h x d_h), the head's map on its own value
  coordinates u (V_h u = lambda u sends x = W_O[:, s_h] u to lambda x);
- its attention form in model space is B_h = W_Q[s_h, :]^T W_K[s_h, :] / sqrt(d_h) (the model's own
  scale), on u: A_h = W_O[:, s_h]^T B_h W_O[:, s_h] = Q_h^T K_h with
  Q_h = W_Q[s_h, :] W_O[:, s_h] / d_h^{1/4}, K_h = W_K[s_h, :] W_O[:, s_h] / d_h^{1/4}.

Biases and layer norms are dropped (Eq. 1.1 has none). numpy and safetensors only; torch is
imported for a ``pytorch_model.bin`` alone. docs/papers/004.md §7.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CONFIG = "config.json"
WEIGHTS = ("model.safetensors", "pytorch_model.bin")  # the first present is read
PREFIXES = ("albert.", "")  # AlbertFor* models, and an AlbertModel saved alone
LAYER = "encoder.albert_layer_groups.0.albert_layers.0.attention.{}.weight"
PROJECTIONS = ("query", "key", "value", "dense")


class CheckpointError(ValueError):
    """A checkpoint that cannot serve; the message is one line naming the file (and its key)."""


@dataclass(frozen=True)
class Heads:
    """The attention projections of the layer read (hidden x hidden, float64) and the head count."""

    query: np.ndarray
    key: np.ndarray
    value: np.ndarray
    dense: np.ndarray
    count: int

    @property
    def size(self) -> int:
        """d_h = hidden_size / num_attention_heads."""
        return self.query.shape[0] // self.count

    def rows(self, h: int) -> slice:
        """s_h of head h = 1..count."""
        return slice((h - 1) * self.size, h * self.size)

    def output(self, h: int) -> np.ndarray:
        """W_O[:, s_h] (hidden x d_h): the head's value coordinates u into model space."""
        return self.dense[:, self.rows(h)]

    def value_matrix(self, h: int) -> np.ndarray:
        """V_h = W_V[s_h, :] W_O[:, s_h] (d_h x d_h)."""
        return self.value[self.rows(h)] @ self.output(h)

    def query_key(self, h: int) -> tuple[np.ndarray, np.ndarray]:
        """(Q_h, K_h), each d_h x d_h: W_Q[s_h, :] W_O[:, s_h] / d_h^{1/4} and the same with W_K,
        so that <Q_h u, K_h w> = (W_O[:, s_h] u)^T B_h (W_O[:, s_h] w)."""
        scale = self.size ** 0.25
        return (self.query[self.rows(h)] @ self.output(h) / scale,
                self.key[self.rows(h)] @ self.output(h) / scale)


def read_config(directory: str | Path) -> dict:
    """config.json of an ALBERT checkpoint, its sizes checked."""
    path = Path(directory, CONFIG)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such file (a Hugging Face checkpoint holds config.json)")
    try:
        config = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{path} is not readable JSON ({error})") from None
    if not isinstance(config, dict):
        raise CheckpointError(f"{path} holds a JSON {type(config).__name__}, not an object")
    if config.get("model_type") != "albert":
        raise CheckpointError(f"{path}: model_type is {config.get('model_type')!r}, not 'albert'")
    for key in ("num_hidden_groups", "inner_group_num"):
        config.setdefault(key, 1)  # Hugging Face's AlbertConfig defaults
    for key in ("hidden_size", "num_attention_heads", "num_hidden_groups", "inner_group_num"):
        if key not in config:
            raise CheckpointError(f"{path} has no key {key}")
        value = config[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise CheckpointError(f"{path}: {key} is {value!r}, not a positive integer")
    if config["hidden_size"] % config["num_attention_heads"]:
        raise CheckpointError(f"{path}: hidden_size {config['hidden_size']} is not a multiple of "
                              f"num_attention_heads {config['num_attention_heads']}")
    return config


def weights_file(directory: str | Path) -> Path:
    """The weights the checkpoint is read from: model.safetensors, else pytorch_model.bin."""
    for name in WEIGHTS:
        if Path(directory, name).is_file():
            return Path(directory, name)
    raise CheckpointError(f"{directory}: holds neither {' nor '.join(WEIGHTS)}")


def _signature(path: Path) -> tuple[str, int, int, int]:
    """A file's path, size, modification time and inode: the key of the weights read once a
    process (a job reads them once a seed), which a file rewritten meanwhile changes."""
    stat = path.stat()
    return str(path.resolve()), stat.st_size, stat.st_mtime_ns, stat.st_ino


def read(directory: str | Path, layer: str = "shared") -> Heads:
    """The attention heads of the checkpoint in ``directory``; a :class:`CheckpointError` (one
    line naming the file and the key) where it cannot serve. ``layer`` ``shared`` refuses a model
    whose depths do not share one layer; ``group0_layer0`` takes group 0, layer 0 of any."""
    if not Path(directory).is_dir():
        raise CheckpointError(f"{directory} is not a directory (a Hugging Face checkpoint: {CONFIG} and "
                              f"{' or '.join(WEIGHTS)})")
    config = read_config(directory)
    if layer == "shared" and (config["num_hidden_groups"], config["inner_group_num"]) != (1, 1):
        raise CheckpointError(
            f"{Path(directory, CONFIG)}: num_hidden_groups {config['num_hidden_groups']}, inner_group_num "
            f"{config['inner_group_num']}: the depths do not share one layer; checkpoint_layer: group0_layer0 "
            "takes group 0, layer 0")
    return _heads(_signature(weights_file(directory)), config["hidden_size"], config["num_attention_heads"])


@functools.lru_cache(maxsize=2)
def _heads(weights: tuple[str, int, int, int], hidden: int, count: int) -> Heads:
    """The projections of the weights file (its :func:`_signature`), checked against hidden_size."""
    path = Path(weights[0])
    tensors = _load(path, [LAYER.format(name) for name in PROJECTIONS])
    for key, tensor in tensors.items():
        if tensor.shape != (hidden, hidden):
            raise CheckpointError(f"{path}: {key} has shape {tensor.shape}, not ({hidden}, {hidden}) "
                                  f"(hidden_size of {CONFIG})")
        if not np.isfinite(tensor).all():
            raise CheckpointError(f"{path}: {key} holds entries that are not finite")
    query, key, value, dense = tensors.values()
    return Heads(query, key, value, dense, count)


def _load(path: Path, names: list[str]) -> dict[str, np.ndarray]:
    """The tensors ``names`` (each under a prefix of :data:`PREFIXES`) of a weights file, float64,
    keyed by the name found."""
    if path.suffix == ".safetensors":
        from safetensors import SafetensorError, safe_open

        unreadable = (SafetensorError, OSError, TypeError, ValueError)  # TypeError: a dtype numpy lacks
        try:
            opened = safe_open(path, framework="numpy")
        except unreadable as error:
            raise CheckpointError(f"{path} is not a readable safetensors file ({_line(error)})") from None
        with opened as weights:
            found = _keys(path, set(weights.keys()), names)
            try:
                return {key: weights.get_tensor(key).astype(np.float64) for key in found}
            except unreadable as error:
                raise CheckpointError(f"{path} is not a readable safetensors file ({_line(error)})") from None
    import torch  # heavy: a pytorch_model.bin alone needs it

    try:
        state = torch.load(path, weights_only=True, map_location="cpu")
    except Exception as error:  # a damaged file raises anything from EOFError to KeyError
        raise CheckpointError(f"{path} is not a readable PyTorch file ({type(error).__name__}: "
                              f"{_line(error)})") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{path} holds a {type(state).__name__}, not a state dict")
    found = _keys(path, set(state), names)
    if not all(isinstance(state[key], torch.Tensor) and state[key].is_floating_point() for key in found):
        raise CheckpointError(f"{path}: {', '.join(found)} must be floating-point tensors")
    return {key: state[key].detach().to(torch.float64).numpy() for key in found}


def _keys(path: Path, held: set[str], names: list[str]) -> list[str]:
    """Each name as held, with the first prefix of :data:`PREFIXES` that the file has."""
    found = []
    for name in names:
        keys = [prefix + name for prefix in PREFIXES if prefix + name in held]
        if not keys:
            raise CheckpointError(f"{path} has no key {PREFIXES[0]}{name} (nor {name})")
        found.append(keys[0])
    return found


def _line(error: BaseException) -> str:
    """The first line of an error's text, at most 160 characters."""
    text = str(error).strip().splitlines()
    return text[0][:160] if text else type(error).__name__


def fingerprint(directory: str | Path) -> dict[str, str]:
    """SHA-256 of config.json and of the weights file read: part of the job identity, so a
    changed checkpoint at the same path reruns the jobs."""
    return {path.name: _sha256(path) for path in (Path(directory, CONFIG), weights_file(directory))}


def _sha256(path: Path) -> str:
    """Read anew at every call (0.15 s for ALBERT-xlarge-v2's 235 MB): no cache to go stale."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def verify(directory: str | Path, planned: dict[str, str]) -> None:
    """Refuse a checkpoint whose files changed since the jobs were planned (their SHA-256)."""
    now = fingerprint(directory)
    if now != planned:
        changed = sorted(name for name in {*now, *planned} if now.get(name) != planned.get(name))
        raise CheckpointError(f"{directory}: {', '.join(changed)} changed since the jobs were planned "
                              "(SHA-256); run snakemake again")


def job_bytes(directory: str | Path) -> int:
    """Memory of reading a checkpoint in a job: the weights file (a pytorch_model.bin loads whole)
    and the four projections in float64."""
    hidden = read_config(directory)["hidden_size"]
    return weights_file(directory).stat().st_size + 4 * hidden * hidden * 8


def job_seconds(directory: str | Path) -> float:
    """Time of reading a checkpoint in a job: hashing and reading its files (~0.2 GB/s taken, a
    busy disk) and an eigendecomposition of every head's V_h (~30 d_h^3 flops at 1 Gflop/s)."""
    config = read_config(directory)
    size = sum(Path(directory, name).stat().st_size for name in (CONFIG, weights_file(directory).name))
    head = config["hidden_size"] // config["num_attention_heads"]
    return 2 * size / 2e8 + config["num_attention_heads"] * 30 * head ** 3 / 1e9
