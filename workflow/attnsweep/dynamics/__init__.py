"""The attention-dynamics engine shared by the clustering experiments (papers 001 and 004).

- :mod:`.sphere`: SA and USA on the sphere with the tangent projection (001 Eqs. 2.3-2.6), and
  their integrators (Euler + renormalisation, projected Euler, RK4).
- :mod:`.observables`: what is recorded at every output time (pair clustering, cluster
  counts, minimum cosine, interaction energy).
- :mod:`.ensembles`: the (Q, K, V) of a run: identity, fixed, or the random ensembles of 001
  Figure 5, drawn per realisation.
- :mod:`.times`: output times on the integrator's step grid (numpy only: planning uses it).

Every function takes a batch: tokens ``x`` of shape (B, n, d), one system per row, so that
realisations and batched grid values integrate as one tensor batch.
"""
