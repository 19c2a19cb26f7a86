"""The attention-dynamics engines of the clustering experiments (papers 001, 003 and 004).

- :mod:`.sphere`: SA and USA on the sphere with the tangent projection (001 Eqs. 2.3-2.6), full
  or under the causal mask of 003 (CSA) per system, and their integrators (Euler +
  renormalisation, projected Euler, RK4).
- :mod:`.observables`: what is recorded at every output time (pair clustering, cluster
  counts, minimum cosine, interaction energy).
- :mod:`.rd`: the un-normalised dynamics in R^d (004 Eq. 1.1) and its rescaling z = e^{-tV} x
  (Eq. 3.1), with RK4 and Euler.
- :mod:`.attention`: observables of P(t) and of a token cloud in R^d (rank, Boolean defect,
  leaders, clusters, eigen-coordinates in the dual basis of V).
- :mod:`.ensembles`: the (Q, K, V) of a run: identity, fixed, or the random ensembles of 001
  Figure 5, drawn per realisation.
- :mod:`.times`: output times on the integrator's step grid (numpy only: planning uses it).
- :mod:`.ops`: batched products, the exponential and a pair count, through numpy or torch on a
  CPU, whichever :mod:`.cpu_paths` timed faster on the host.
- :mod:`.langevin`: the same dynamics with Brownian noise on the sphere (projected
  Euler-Maruyama), independent or common, its increments drawn per seed.
- :mod:`.driver`: the systems of a job cut into chunks, run side by side on the CPU threads.

Every function takes a batch: tokens ``x`` of shape (B, n, d), one system per row, so that
realisations and batched grid values integrate as one tensor batch.
"""

#: On a CPU a chunk of systems stays small: 256 MiB temporaries are page-faulted in anew each step
#: (1.4x slower at n = 32, d = 32; benchmarks/RESULTS.md). A GPU takes the job's block_mib.
CPU_CHUNK_MIB = 8


#: Steps of noise increments :mod:`.langevin` draws at once per seed: part of the numbers' definition
#: (a generator's stream cut into blocks of another length gives other numbers), and of a system's
#: memory (here, torch-free, for the planner's estimates).
NOISE_BLOCK = 32


def cpu_chunk_bytes(block_mib: int) -> int:
    """Bytes one chunk of systems may take on a CPU: ``block_mib``, at most ``CPU_CHUNK_MIB``
    (also what the time estimates of :mod:`attnsweep.plan.cost` assume)."""
    return min(block_mib, CPU_CHUNK_MIB) << 20
