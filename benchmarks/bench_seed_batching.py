"""Seeds batched in one tensor computation against a loop over seeds (issue 7, paper 002).

The training of ``mixture_training`` (joint mode, exact population of Definition 2.1, full-batch
gradient descent), three ways, at equal results:

- ``loop``: the usual PyTorch training loop, one seed after another: per seed a
  ``torch.nn.Module`` holding w_+-, W_K+-, W_Q+- (m x d) as ``nn.Parameter`` and
  ``torch.optim.SGD(lr)``; per step ``zero_grad``, forward f(X) (written here in plain matrix
  products, not ``model.output``: only the final check ties the two), loss =
  softplus(-y f).mean(), ``backward``, ``step``.
- ``batched``: ``engines.Direct`` over every seed at once, parameters w (S, 2, d) and
  W_K, W_Q (S, 2, m, d), one autograd pass for all S systems and a manual GD update, on the
  population-mean objective (weight 1/N per sample), lr_w = lr_att = lr.
- ``loop_model``: the loop, with the experiment's own forward (``model.output``) in the module:
  the batched engine's per-sample arithmetic, one seed at a time.
- ``both``: all three, then assert that every seed's final w and S = W_K^T W_Q agree (float64:
  within 1e-10) and print the largest difference.

All start from the same draw: per seed a ``torch.Generator`` seeded with the seed gives
W_K+-, W_Q+- i.i.d. N(0, omega^2 / m); w starts at 0, as the experiment's joint mode does.
The default 500 steps make each training at least a few seconds on 2 cores, long next to the
import of torch and to timer noise, so whole-process timing from outside is stable. The result
line also gives the in-process training time (data and model set-up included, imports not).

usage: python benchmarks/bench_seed_batching.py --mode both
       python benchmarks/bench_seed_batching.py --mode loop --seeds 32 --K 8
"""

from __future__ import annotations

import argparse
import math
import time

import torch
from torch import Tensor, nn

from attnsweep.experiments.mixture_training import data, engines, model


def population(K: int, L: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """The exact population X (N, L, 2K) on the signals c_k = e_k, v_k = e_{K+k}, and labels y (N,)."""
    pop = data.population(K, L)
    as_tensor = {"device": device, "dtype": torch.float64}
    return torch.tensor(pop.sequences(data.signals(K)), **as_tensor), torch.tensor(pop.label, **as_tensor)


def initial_attention(seed: int, K: int, m: int, omega: float) -> Tensor:
    """W_K+-, W_Q+- of one seed (2 heads, 2 matrices, m, 2K), i.i.d. N(0, omega^2 / m), on the CPU."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(2, 2, m, 2 * K, generator=gen, dtype=torch.float64) * (omega / math.sqrt(m))


class TwoHeads(nn.Module):
    """The two-headed ReLU transformer of Eq. 1 with its own parameters, as one would write it."""

    def __init__(self, W: Tensor, b: float):
        super().__init__()
        d = W.shape[-1]
        self.w_plus = nn.Parameter(torch.zeros(d, dtype=W.dtype, device=W.device))
        self.w_minus = nn.Parameter(torch.zeros(d, dtype=W.dtype, device=W.device))
        self.W_K_plus, self.W_Q_plus = nn.Parameter(W[0, 0].clone()), nn.Parameter(W[0, 1].clone())
        self.W_K_minus, self.W_Q_minus = nn.Parameter(W[1, 0].clone()), nn.Parameter(W[1, 1].clone())
        self.register_buffer("b", torch.tensor(b, dtype=W.dtype, device=W.device))

    @staticmethod
    def inputs(X: Tensor) -> Tensor:
        """What ``forward`` reads: the sequences X (N, L, d) themselves."""
        return X

    def readout(self) -> Tensor:
        return torch.stack([self.w_plus, self.w_minus])

    def scores(self) -> Tensor:
        return torch.stack([self.W_K_plus.T @ self.W_Q_plus, self.W_K_minus.T @ self.W_Q_minus])

    def forward(self, X: Tensor) -> Tensor:
        """f(X) = ReLU(H_+ + b) - ReLU(H_- + b), (N,), H = sum_l w^T X softmax_h(x_h^T S x_l), both heads
        at once in plain matrix products."""
        w, S = self.readout(), self.scores()
        logits = (X @ S.transpose(-1, -2)[:, None]) @ X.transpose(-1, -2)  # (2, N, L, L): [l, h] = x_h^T S x_l
        pooled = (logits.softmax(-1).sum(-2)[..., None, :] @ X).squeeze(-2)  # (2, N, d): sum_l X p_l
        H = (pooled * w[:, None]).sum(-1) + self.b
        return torch.relu(H[0]) - torch.relu(H[1])


class ModelHeads(TwoHeads):
    """The same parameters, with the experiment's forward ``model.output`` on the factored sequences."""

    @staticmethod
    def inputs(X: Tensor) -> model.Sequences:
        return model.Sequences.of(X)

    def forward(self, X: model.Sequences) -> Tensor:
        return model.output(self.readout(), self.scores(), X, self.b)


def train_loop(args: argparse.Namespace, device: torch.device, net_class: type[TwoHeads] = TwoHeads
               ) -> tuple[Tensor, Tensor]:
    """One seed after another: final w (S, 2, d) and S (S, 2, d, d)."""
    X, y = population(args.K, args.L, device)
    X = net_class.inputs(X)
    finals = []
    for seed in range(args.seeds):
        net = net_class(initial_attention(seed, args.K, args.m, args.omega).to(device), args.b)
        opt = torch.optim.SGD(net.parameters(), lr=args.lr)
        for _ in range(args.steps):
            opt.zero_grad()
            loss = nn.functional.softplus(-y * net(X)).mean()
            loss.backward()
            opt.step()
        with torch.no_grad():
            finals.append((net.readout(), net.scores()))
    return torch.stack([w for w, _ in finals]), torch.stack([S for _, S in finals])


def train_batched(args: argparse.Namespace, device: torch.device) -> tuple[Tensor, Tensor]:
    """Every seed one system of ``engines.Direct``: final w (S, 2, d) and S (S, 2, d, d)."""
    X, y = population(args.K, args.L, device)
    B, d = args.seeds, 2 * args.K
    W = torch.stack([initial_attention(seed, args.K, args.m, args.omega) for seed in range(B)]).to(device)
    engine = engines.Direct(torch.zeros(B, 2, d, dtype=torch.float64, device=device), W[:, :, 0], W[:, :, 1])
    sequences = model.Sequences.of(X)
    column = lambda value: torch.full((B,), value, dtype=torch.float64, device=device)
    b, lr = column(args.b), column(args.lr)
    weight = torch.full((B, len(y)), 1.0 / len(y), dtype=torch.float64, device=device)
    for _ in range(args.steps):
        engine.step(sequences, y, b, weight, lr, lr)
    return engine.w, engine.scores


def timed(fn, args: argparse.Namespace, device: torch.device) -> tuple[float, tuple[Tensor, Tensor]]:
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    out = fn(args, device)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("batched", "loop", "loop_model", "both"), default="both")
    parser.add_argument("--seeds", type=int, default=32)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--K", type=int, default=2)
    parser.add_argument("--L", type=int, default=3)
    parser.add_argument("--m", type=int, default=64)
    parser.add_argument("--omega", type=float, default=0.1)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--b", type=float, default=0.5)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    setting = f"K={args.K} L={args.L} m={args.m} seeds={args.seeds} steps={args.steps} {args.device}"
    results = {}
    modes = {"loop": train_loop, "loop_model": lambda a, dev: train_loop(a, dev, ModelHeads), "batched": train_batched}
    for mode, fn in modes.items():
        if args.mode in (mode, "both"):
            seconds, results[mode] = timed(fn, args, device)
            print(f"{mode}: {seconds:.3f} s training, {setting}")
    if args.mode == "both":
        w_batch, S_batch = results["batched"]
        for mode in ("loop", "loop_model"):
            w_loop, S_loop = results[mode]
            diff = max((w_loop - w_batch).abs().max().item(), (S_loop - S_batch).abs().max().item())
            scale = max(w_loop.abs().max().item(), S_loop.abs().max().item())
            print(f"max |{mode} - batched| over final w and S = {diff:.2e} (largest entry {scale:.3g})")
            assert diff <= 1e-10, f"{mode} and batched disagree: {diff:.2e}"


if __name__ == "__main__":
    main()
