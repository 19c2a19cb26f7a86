"""Training runs of mixture_training (paper 002): torch, imported by jobs only, never by the planner.

For every (K, L, m) of a job, every (omega, lr, b, seed, mode) trains as one system of a tensor
batch, one batch per engine. Initial attention weights are i.i.d. N(0, 1) keyed by (K, m, seed)
and scaled by omega / sqrt(m), so every omega, lr, b, mode and engine starts from the same draw
(common random numbers; the two engines then agree to rounding), and nothing depends on the job
cut. m = inf is the infinite-width model: S = 0, K~ = Q~ = omega^2 I, the same for every seed.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import torch
import xarray as xr
from torch import Tensor
from tqdm import tqdm

from attnsweep.contract import JobSpec
from attnsweep.experiments.mixture_training import (
    MODES,
    data,
    engines,
    images,
    model,
    theory,
)
from attnsweep.experiments.mixture_training.resources import SERIES, recorded_steps, three_stage_steps
from attnsweep.grid import Axis
from attnsweep.run import rng
from attnsweep.stores.labels import label

NAME = "mixture_training"
GRID = ("K", "L", "omega", "m", "lr", "b")
DIMS = (*GRID, "seed", "mode", "engine")

# Extra dimensions of each recorded variable (after ``step``).
SHAPES = {
    **{var: () for var in SERIES},
    "s_same": ("head",), "s_cross": ("head",),
    "loss_opposing": ("opposing",),
    "align": ("head", "kind", "k"),
    "score": ("head", "key_kind", "key_k", "query_kind", "query_k"),
}


def initial_weights(K: int, m: int, seed: int, d: int) -> Tensor:
    """i.i.d. N(0, 1) entries of W_K+-, W_Q+- (2 heads, 2 matrices, m, d), float64 on the CPU."""
    gen = rng.generator(NAME, {"K": K, "m": m}, seed, "attention")
    return torch.randn(2, 2, m, d, generator=gen, dtype=torch.float64)


def fixed_readout(K: int, seed: int, d: int) -> Tensor:
    """w_+- (2, d) with i.i.d. N(0, 1) coordinates: the frozen neurons of Fig. 3."""
    gen = rng.generator(NAME, {"K": K}, seed, "readout")
    return torch.randn(2, d, generator=gen, dtype=torch.float64)


def training_set(K: int, L: int, opts: dict[str, Any]) -> data.Samples:
    """The exact population (source synthetic), or ``samples`` draws with digit images as the
    classification signals (source digits), drawn once per (K, L) and shared by every seed."""
    if opts["source"] == "synthetic":
        return data.exact(K, L)
    gen = np.random.default_rng(rng.seed_key(NAME, {"K": K, "L": L}, 0, "digits"))
    return data.of_images(images.classes(opts["image_file"], opts["classes"]), L, opts["samples"], gen)


def minibatches(K: int, L: int, seed: int, steps: int, batch: int, size: int) -> Tensor:
    """Sample indices (steps, batch) into the population of ``size``: i.i.d. draws of Definition 2.1."""
    gen = rng.generator(NAME, {"K": K, "L": L}, seed, "minibatch")
    return torch.randint(size, (steps, batch), generator=gen, dtype=torch.int32)


class Batch:
    """The systems of one (K, L, m, engine): their parameters, schedules and data."""

    def __init__(self, K: int, L: int, m: float, engine: str, systems: list[dict[str, Any]], opts: dict[str, Any],
                 device: torch.device, dtype: torch.dtype):
        self.K, self.L, self.opts = K, L, opts
        samples = training_set(K, L, opts)
        as_tensor = {"device": device, "dtype": dtype}
        self.sequences = model.Sequences.of(torch.tensor(samples.X, **as_tensor))
        self.y = torch.tensor(samples.label, **as_tensor)
        self.hard = torch.tensor(samples.hard, device=device)
        self.opposing = torch.tensor(samples.opposing, device=device)
        self.basis = torch.tensor(samples.basis, **as_tensor)
        self.types = model.Sequences.of(torch.tensor(samples.types, **as_tensor))
        d = samples.X.shape[-1]
        self.omega, self.lr, self.b = (torch.tensor([s[key] for s in systems], **as_tensor)
                                       for key in ("omega", "lr", "b"))
        modes = [s["mode"] for s in systems]
        stages = [three_stage_steps(opts, K, s["omega"], s["lr"], s["b"]) if s["mode"] == "three_stage" else (0, 0)
                  for s in systems]
        self.mode = np.array([MODES.index(mo) for mo in modes])
        self.stage_1 = torch.tensor([n for n, _ in stages], device=device)
        self.stage_2_end = torch.tensor([n1 + n2 for n1, n2 in stages], device=device)
        self.three_stage = torch.tensor([mo == "three_stage" for mo in modes], device=device)
        self.train_w = torch.tensor([mo != "attention_only" for mo in modes], device=device)
        self.stages = stages
        seeds = [s["seed"] for s in systems]
        readout = torch.stack([fixed_readout(K, s, d) if mo == "attention_only" else torch.zeros(2, d)
                               for s, mo in zip(seeds, modes)]).to(**as_tensor)
        self.engine = self._engine(engine, K, m, seeds, readout, as_tensor)
        self.batches = None
        if opts["data"] == "minibatch":
            self.batches = torch.stack([minibatches(K, L, s, opts["steps"], opts["batch"], len(self.y))
                                        for s in seeds]).to(device=device, dtype=torch.int64)  # (B, steps, batch)

    def _engine(self, engine: str, K: int, m: float, seeds: list[int], w: Tensor, as_tensor: dict):
        B, d = len(seeds), w.shape[-1]
        if math.isinf(m):
            eye = torch.eye(d, **as_tensor).expand(B, 2, d, d)
            scale = (self.omega**2)[:, None, None, None]
            return engines.Gram(w, torch.zeros(B, 2, d, d, **as_tensor), scale * eye, scale * eye)
        m = int(m)
        W = torch.stack([initial_weights(K, m, s, d) for s in seeds]).to(**as_tensor)  # (B, 2, 2, m, d)
        W = W * (self.omega / math.sqrt(m))[:, None, None, None, None]
        if engine == "direct":
            return engines.Direct(w, W[:, :, 0], W[:, :, 1])
        return engines.Gram.from_weights(w, W[:, :, 0], W[:, :, 1])

    def weights(self, step: int) -> tuple[Tensor, Tensor, Tensor]:
        """Sample weights (B, N) of each system's objective at ``step``, and the step sizes of w and
        of the attention (B,): joint, attention only, or the stage of Algorithm 1 (stage 2 on the
        conflicting samples' conditional mean)."""
        stage_2 = self.three_stage & (step >= self.stage_1) & (step < self.stage_2_end)
        stage_13 = self.three_stage & ~stage_2
        counts = torch.ones_like(self.y).expand(len(self.lr), -1)
        if self.batches is not None:
            counts = torch.zeros_like(counts).scatter_add_(1, self.batches[:, step], torch.ones_like(counts))
        hard = counts * self.hard
        mean_all = counts / counts.sum(-1, keepdim=True)
        mean_hard = hard / hard.sum(-1, keepdim=True).clamp_min(1)
        weight = torch.where(stage_2[:, None], mean_hard, mean_all)
        lr_w = torch.where(self.train_w & ~stage_2, self.lr, 0.0)
        lr_att = torch.where(stage_13, 0.0, self.lr)
        return weight, lr_w, lr_att

    @torch.no_grad()
    def observe(self) -> dict[str, Tensor]:
        """Every recorded observable of every system, (B, ...) on the CPU in float64."""
        K, seq, y, hard = self.K, self.sequences, self.y, self.hard
        w, S, b = self.engine.w, self.engine.scores, self.b
        f = model.output(w, S, seq, b)
        loss, margin = model.loss(f, y), y * f
        correct = (margin > 0).to(f.dtype) + 0.5 * (margin == 0).to(f.dtype)
        out = {
            "loss_pop": loss.mean(-1), "loss_easy": loss[:, ~hard].mean(-1), "loss_hard": loss[:, hard].mean(-1),
            "acc_easy": correct[:, ~hard].mean(-1), "acc_hard": correct[:, hard].mean(-1),
            "margin_easy": margin[:, ~hard].amin(-1), "margin_hard": margin[:, hard].amin(-1),
            "loss_opposing": torch.stack([loss[:, self.opposing == o].mean(-1) for o in range(self.L - 1)], -1),
        }
        basis = self.basis  # rows c_1..c_K, v_1..v_K
        align = (w @ basis.T).reshape(len(b), 2, 2, K)
        score = (basis @ S @ basis.T).reshape(len(b), 2, 2, K, 2, K)
        out["align"], out["score"] = align, score
        same = torch.diagonal(score[:, :, 0, :, 1, :], dim1=-2, dim2=-1)  # c_k^T S v_k
        out["s_same"] = same.mean(-1)
        out["s_cross"] = (score[:, :, 0, :, 1, :].sum((-2, -1)) - same.sum(-1)) / (K * (K - 1))
        sign = torch.tensor([1.0, -1.0], dtype=f.dtype, device=f.device)  # (-1)^[mu in V]
        out["sym_align"] = (align[:, 1] - sign[:, None] * align[:, 0]).abs().amax((-2, -1))
        flip = sign[:, None, None, None] * sign[None, None, :, None]
        out["sym_score"] = (score[:, 1] - flip * score[:, 0]).abs().amax((-4, -3, -2, -1))
        features = y[:, None] * model.features(w, S, seq, b)  # (B, N, 2d + 1)
        out["gamma"] = torch.tensor([theory.max_margin(z) for z in features.cpu().double().numpy()])
        return {k: v.cpu().double() for k, v in out.items()}

    @torch.no_grad()
    def maps(self) -> Tensor:
        """Attention maps p (B, 2, types, L, L) of both heads on the sample types (Fig. 2)."""
        return model.attention(self.engine.scores, self.types).cpu().double()

    def run(self, record: np.ndarray, map_steps: list[int], progress: bool) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Train every system for ``steps``; the observables at ``record`` (B, R, ...) and the maps at
        ``map_steps`` (B, M, ...), float64. Each is written into one array allocated at its first
        record: kept as a thousand small tensors among every step's temporaries, the records of the
        paper's K = 8 job (1001, 20 steps apart; 0.3 GB) fragmented the heap to 4.1 GiB (12.3 GiB
        in the fork server)."""
        rows, map_rows = {s: r for r, s in enumerate(record.tolist())}, {s: r for r, s in enumerate(map_steps)}
        series: dict[str, np.ndarray] = {}
        maps: dict[str, np.ndarray] = {}
        steps = self.opts["steps"]
        for step in tqdm(range(steps + 1), disable=not progress, desc=f"K={self.K} L={self.L}", leave=False):
            if step in rows:
                _put(series, self.observe(), rows[step], len(rows))
            if step in map_rows:
                _put(maps, {"attention": self.maps()}, map_rows[step], len(map_rows))
            if step < steps:
                self.engine.step(self.sequences, self.y, self.b, *self.weights(step))
        return series, maps["attention"]


def _put(arrays: dict[str, np.ndarray], values: dict[str, Tensor], row: int, rows: int) -> None:
    """Write each (B, ...) value at ``row`` of its (B, rows, ...) array, allocated on first use."""
    for key, value in values.items():
        if key not in arrays:
            arrays[key] = np.empty((value.shape[0], rows, *value.shape[1:]))
        arrays[key][:, row] = value.numpy()


def simulate(job: JobSpec, axes: tuple[Axis, ...], device: torch.device, dtype: torch.dtype,
             progress: bool = True) -> xr.Dataset:
    """Every observable at every recorded step of every system of ``job`` (NaN where K or L is
    below the job's largest: the signal and position dimensions follow the largest)."""
    grid, opts, seeds = job.grid, job.options, job.seeds
    record = recorded_steps(opts["steps"], opts["record_every"])
    map_steps = sorted({*opts["map_steps"], opts["steps"]})
    K_max, L_max = int(max(grid["K"])), int(max(grid["L"]))
    modes, kinds = opts["modes"], opts["engines"]
    sizes = {**{a: len(grid[a]) for a in GRID}, "seed": len(seeds), "mode": len(modes), "engine": len(kinds),
             "step": len(record), "head": 2, "opposing": L_max - 1, "kind": 2, "k": K_max, "key_kind": 2,
             "key_k": K_max, "query_kind": 2, "query_k": K_max, "map_step": len(map_steps),
             "sample": 2 ** (L_max - 1), "query": L_max, "key": L_max}

    def shape(dims: tuple[str, ...]) -> tuple[int, ...]:
        return tuple(sizes[d] for d in dims)

    values = {var: np.full(shape((*DIMS, "step", *extra)), np.nan) for var, extra in SHAPES.items()}
    attention = np.full(shape((*DIMS, "map_step", "head", "sample", "query", "key")), np.nan)
    stage = np.full((*shape(DIMS), 2), np.nan)  # steps of stages 1 and 2 (three_stage only)
    batched = ("omega", "lr", "b")
    for (iK, K), (iL, L), (im, m) in itertools.product(*(enumerate(grid[a]) for a in ("K", "L", "m"))):
        K, L = int(K), int(L)
        extent = {"k": K, "key_k": K, "query_k": K, "opposing": L - 1}
        for ie, engine in enumerate(kinds):
            index = list(itertools.product(*(range(len(grid[a])) for a in batched), range(len(seeds)),
                                           range(len(modes))))
            systems = [{**{a: grid[a][i] for a, i in zip(batched, idx)}, "seed": seeds[idx[3]], "mode": modes[idx[4]]}
                       for idx in index]
            batch = Batch(K, L, m, engine, systems, opts, device, dtype)
            series, maps = batch.run(record, map_steps, progress)
            io, ilr, ib, isd, imo = (np.array(col) for col in zip(*index))
            at = (iK, iL, io, im, ilr, ib, isd, imo, ie)
            for var, extra in SHAPES.items():
                cut = tuple(slice(0, extent.get(dim)) for dim in extra)
                values[var][(*at, slice(None), *cut)] = series[var]
            types = 2 ** (L - 1)
            attention[(*at, slice(None), slice(None), slice(0, types), slice(0, L), slice(0, L))] = maps
            stage[at] = np.array([s if mo == "three_stage" else (np.nan, np.nan)
                                  for s, mo in zip(batch.stages, (s["mode"] for s in systems))], float)
    return dataset(job, axes, record, map_steps, values, attention, stage)


def dataset(job: JobSpec, axes: tuple[Axis, ...], record: np.ndarray, map_steps: list[int],
            values: dict[str, np.ndarray], attention: np.ndarray, stage: np.ndarray) -> xr.Dataset:
    """The job's arrays as a Dataset with coordinates and CF attrs (flags name the categories)."""
    grid, opts = job.grid, job.options
    K_max, L_max = int(max(grid["K"])), int(max(grid["L"]))
    signals, kinds = np.arange(1, K_max + 1), np.arange(2)
    coords = {**{a: grid[a] for a in GRID}, "seed": job.seeds, "mode": np.arange(len(opts["modes"])),
              "engine": np.arange(len(opts["engines"])), "step": record, "head": np.arange(2),
              "opposing": np.arange(L_max - 1), "kind": kinds, "k": signals, "key_kind": kinds, "key_k": signals,
              "query_kind": kinds, "query_k": signals, "map_step": np.asarray(map_steps, dtype=np.int64),
              "sample": np.arange(2 ** (L_max - 1)), "query": np.arange(1, L_max + 1),
              "key": np.arange(1, L_max + 1), "stage": [1, 2]}
    result = xr.Dataset(
        {var: ((*DIMS, "step", *extra), values[var], VARIABLES[var]) for var, extra in SHAPES.items()},
        coords=coords)
    result["attention"] = ((*DIMS, "map_step", "head", "sample", "query", "key"), attention, VARIABLES["attention"])
    result["stage_steps"] = ((*DIMS, "stage"), stage, VARIABLES["stage_steps"])
    label(result, axes, COORDINATES)
    label(result, (), {name: {"flag_values": list(range(len(opts[f"{name}s"]))),
                              "flag_meanings": " ".join(opts[f"{name}s"])} for name in ("mode", "engine")})
    result.attrs.update(mode_names=" ".join(opts["modes"]), engine_names=" ".join(opts["engines"]),
                        data=opts["data"], source=opts["source"], steps=opts["steps"],
                        record_every=opts["record_every"],
                        stage_2_objective="conditional mean over the conflicting samples "
                                          "(docs/papers/002.md §7 item 2)")
    if opts["source"] == "digits":
        result.attrs.update(classes=list(opts["classes"]), samples=opts["samples"],
                            images=opts["image_file"] or "scikit-learn digits (8 x 8)",
                            signals="c_k: random unit vectors; v_k: unit mean image of class k (App. A.5)")
    return result


VARIABLES: dict[str, dict[str, str]] = {
    "loss_pop": {"long_name": "population loss E l(y f(X)) (Section 2.2)", "units": "nat"},
    "loss_easy": {"long_name": "mean loss over the consistent (easy) samples", "units": "nat"},
    "loss_hard": {"long_name": "mean loss over the conflicting (hard) samples", "units": "nat"},
    "acc_easy": {"long_name": "fraction of easy samples with y f > 0 (ties count 1/2)", "units": "1"},
    "acc_hard": {"long_name": "fraction of hard samples with y f > 0 (ties count 1/2)", "units": "1"},
    "margin_easy": {"long_name": "minimum of y f over the easy samples", "units": "1"},
    "margin_hard": {"long_name": "minimum of y f over the hard samples", "units": "1"},
    "gamma": {"long_name": "max-margin of the attention features y F(X) (Eq. 2, footnote 1); 0 if none "
                           "separates", "units": "1"},
    "sym_score": {"long_name": "head-symmetry residual max |S_-[mu,nu] - (-1)^([mu in V]+[nu in V]) S_+[mu,nu]| "
                               "(Lemma C.4)", "units": "1"},
    "sym_align": {"long_name": "head-symmetry residual max |w_-^T mu - (-1)^[mu in V] w_+^T mu| (Lemma C.4)",
                  "units": "1"},
    "s_same": {"long_name": "mean over k of c_k^T S v_k (key c_k, query v_k)", "units": "1"},
    "s_cross": {"long_name": "mean over j != k of c_k^T S v_j", "units": "1"},
    "loss_opposing": {"long_name": "mean loss over the samples with this many distractors opposing y",
                      "units": "nat"},
    "align": {"long_name": "neuron alignment w^T mu, mu = c_k (kind 0) or v_k (kind 1) (Fig. 1b; source digits: "
                           "v_k the unit mean image of class k)", "units": "1"},
    "score": {"long_name": "attention score mu^T W_K^T W_Q nu, key mu, query nu (Figs. 1c, 4)", "units": "1"},
    "attention": {"long_name": "attention weight of a query position on a key position, sample types of "
                               "group 1 with group-2 distractors (Fig. 2)", "units": "1"},
    "stage_steps": {"long_name": "steps of stages 1 and 2 of Algorithm 1 (three_stage; stage 3 runs the rest)",
                    "units": "1"},
}
COORDINATES: dict[str, dict[str, Any]] = {
    "seed": {"long_name": "random seed: attention weights (and minibatches) of one run"},
    "step": {"long_name": "gradient-descent step; flow time t = lr step"},
    "head": {"long_name": "attention head", "flag_values": [0, 1], "flag_meanings": "plus minus"},
    "opposing": {"long_name": "number of distractors with eps = -y"},
    "kind": {"long_name": "signal kind", "flag_values": [0, 1], "flag_meanings": "group_c classification_v"},
    "k": {"long_name": "signal index k (c_k or v_k)"},
    "key_kind": {"long_name": "kind of the key signal mu", "flag_values": [0, 1], "flag_meanings": "c v"},
    "key_k": {"long_name": "index of the key signal mu"},
    "query_kind": {"long_name": "kind of the query signal nu", "flag_values": [0, 1], "flag_meanings": "c v"},
    "query_k": {"long_name": "index of the query signal nu"},
    "map_step": {"long_name": "step of an attention-map snapshot"},
    "sample": {"long_name": "sample type: y = +1 for the first half, then the distractors' signs in binary "
                            "(0: eps = +1), tokens (c_1, y v_1, eps v_2, ...)"},
    "query": {"long_name": "query position"},
    "key": {"long_name": "key position"},
    "stage": {"long_name": "stage of Algorithm 1"},
}
