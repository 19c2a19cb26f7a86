"""circle_synchronization against closed forms, exact small cases and the theorems of Problem 3.

Closed forms (docs/papers/circle.md): the synchronised state's spectrum -n e^beta; n = 2's
antipodal pair, eigenvalue 2 e^{-beta}; the splay state's circulant spectrum, whose n = 3 case
turns stable exactly at beta = -2/3; the pair-plus-antipode of n = 3, intra-cluster eigenvalue
-(2 e^beta - e^{-beta}). Theorems: no spurious attractor at beta >= -0.16 (Polyanskiy, Rigollet,
Yao), none at beta > 0.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from attnsweep.experiments.circle_synchronization import (
    clusters,
    critical,
    flow,
    potential,
    resources,
    structured,
    unfolding,
)

EPS = np.finfo(float).eps
BETAS = (-2.5, -0.7, 0.0, 0.4)


def splay(n: int) -> np.ndarray:
    return 2 * np.pi * np.arange(n) / n


@pytest.mark.parametrize("beta", BETAS)
def test_force_and_hessian_are_the_derivatives(beta: float) -> None:
    """Central differences of E and of F at random angles, h = 1e-5. Truncation h^2/6 sup|f'''|
    (each derivative of the terms is at most n e^{|beta|}(1 + |beta|)^3, n = 6 here) plus rounding
    eps |f| / h (|f| <= n^2 e^{|beta|}): both below 1e-7 n^2 e^{|beta|}(1 + |beta|)^3."""
    rng = np.random.default_rng(1)
    n, h = 6, 1e-5
    theta = rng.uniform(0, 2 * np.pi, n)
    eye = np.eye(n)
    grad = np.array([(potential.energy(theta + h * e, beta) - potential.energy(theta - h * e, beta)) / (2 * h)
                     for e in eye])
    hess = np.stack([(potential.force(theta + h * e, beta) - potential.force(theta - h * e, beta)) / (2 * h)
                     for e in eye], 1)
    tol = 1e-7 * n * n * math.exp(abs(beta)) * (1 + abs(beta)) ** 3
    assert np.abs(n * n * grad - potential.force(theta, beta)).max() < tol
    assert np.abs(hess - potential.hessian(theta, beta)).max() < tol
    # H's diagonal is minus the sum of its row: what is left is the rounding of a sum of n terms of
    # size up to e^{|beta|}(1 + |beta|), at most n eps of it; the bound allows 10 n of those.
    row_sums = np.abs(potential.hessian(theta, beta).sum(-1)).max()
    assert row_sums < 10 * n * n * EPS * math.exp(abs(beta)) * (1 + abs(beta))


@pytest.mark.parametrize("beta", BETAS)
def test_the_synchronised_state_and_the_antipodal_pair(beta: float) -> None:
    """H = e^beta (1 1^T - n I) at synchronisation: -n e^beta, n - 1 times off the rotation. n = 2
    antipodal: H = e^{-beta} [[1, -1], [-1, 1]], eigenvalue 2 e^{-beta} > 0: a saddle at every beta.
    Rounding: a few ulps of the entries (size n e^{|beta|})."""
    n = 5
    eig = potential.complement_spectrum(potential.hessian(np.full(n, 0.3), beta))
    np.testing.assert_allclose(eig, -n * math.exp(beta), rtol=1e-13)
    pair = potential.complement_spectrum(potential.hessian(np.array([0.0, np.pi]), beta))
    np.testing.assert_allclose(pair, [2 * math.exp(-beta)], rtol=1e-13)


@pytest.mark.parametrize("n", [3, 4, 5, 7, 12])
@pytest.mark.parametrize("beta", BETAS)
def test_the_splay_state_spectrum_is_circulant(n: int, beta: float) -> None:
    """mu_k = sum_{j=1}^{n-1} g'(2 pi j / n)(cos(2 pi j k / n) - 1), k = 1 ... n - 1; rounding of an
    n x n eigenproblem with entries up to e^{|beta|}(1 + |beta|): 1e-12 of n e^{|beta|}(1 + |beta|)."""
    j = np.arange(1, n)
    mu = [float((potential.g1(2 * np.pi * j / n, beta) * (np.cos(2 * np.pi * j * k / n) - 1)).sum())
          for k in range(1, n)]
    got = potential.complement_spectrum(potential.hessian(splay(n), beta))
    np.testing.assert_allclose(got, np.sort(mu), atol=1e-12 * n * math.exp(abs(beta)) * (1 + abs(beta)))


def test_three_particles_by_hand() -> None:
    """n = 3: the splay state's double eigenvalue -3 g'(2 pi/3) = 3 e^{-beta/2}(1/2 + 3 beta/4) changes
    sign at beta = -2/3, the structured search's threshold of the family (1, 1, 1) to 1e-9; the pair
    and antipode (0, 0, pi) has the intra-pair eigenvalue -(2 e^beta - e^{-beta}) and the
    inter-cluster one 3 e^{-beta} > 0 (a saddle at every beta)."""
    for beta in (-1.0, -2 / 3 + 1e-3, 0.3):
        eig = potential.complement_spectrum(potential.hessian(splay(3), beta))
        np.testing.assert_allclose(eig, 3 * math.exp(-beta / 2) * (0.5 + 0.75 * beta), rtol=1e-12, atol=1e-15)
        intra, inter = clusters.spectrum(np.array([0.0, np.pi]), np.array([2.0, 1.0]), beta)
        np.testing.assert_allclose(intra, [-(2 * math.exp(beta) - math.exp(-beta))], rtol=1e-13)
        np.testing.assert_allclose(inter, [3 * math.exp(-beta)], rtol=1e-13)
    found = structured.threshold((1, 1, 1), np.arange(-3.0, 0.5 + 1e-9, 0.05))
    assert found is not None and found.end == "sign"
    assert found.beta_low <= -2 / 3 <= found.beta_high and found.beta_high - found.beta_low <= 1e-9


@pytest.mark.parametrize("masses", [(2, 1), (1, 2, 3), (3, 1, 1, 2), (2, 2, 2, 2, 1)])
def test_the_reduced_spectrum_is_the_whole_hessians(masses: tuple[int, ...]) -> None:
    """(C.2) and (C.3) against the n x n Hessian of the expanded configuration, at random cluster
    angles (the two subspaces are invariant whether or not the configuration is critical). The
    rotation's zero is dropped from both; rounding 1e-12 of n e^{|beta|}(1 + |beta|)."""
    rng = np.random.default_rng(sum(masses))
    for beta in BETAS:
        phi = np.sort(rng.uniform(0, 2 * np.pi, len(masses)))
        intra, inter = clusters.spectrum(phi, np.array(masses, float), beta)
        reduced = np.sort(np.concatenate([np.repeat(intra, [m - 1 for m in masses if m >= 2]), inter]))
        whole = potential.complement_spectrum(potential.hessian(np.repeat(phi, masses), beta))
        np.testing.assert_allclose(reduced, whole, atol=1e-12 * sum(masses) * math.exp(abs(beta)) * (1 + abs(beta)))


def test_sa_has_the_attractors_of_usa() -> None:
    """At a critical point SA's Jacobian is D^{-1} H, D = diag(Z) > 0 (Sylvester: the inertia of H).
    The 3-cluster state (2, 2, 2) at beta = -1 (stable) and 0 (a saddle): central differences of SA's
    field (h = 1e-6; error h^2 and eps/h of entries of size e^{2|beta|}) have eigenvalues of the signs
    of H's, and equal D^{-1} H."""
    theta = np.repeat(splay(3), 2)
    for beta, stable in ((-1.0, True), (0.0, False)):
        h = 1e-6
        jac = np.stack([(potential.sa_field(theta + h * e, beta) - potential.sa_field(theta - h * e, beta)) / (2 * h)
                        for e in np.eye(6)], 1)
        z = np.exp(beta * np.cos(potential.differences(theta))).sum(-1)
        np.testing.assert_allclose(jac, potential.hessian(theta, beta) / z[:, None], atol=1e-7)
        eig = np.sort(np.linalg.eigvals(jac).real)
        top = eig[-1] if abs(eig[-1]) > 1e-6 else eig[-2]  # skip the rotation's zero
        assert (top < 0) == stable


def test_families_are_the_bracelets_of_compositions() -> None:
    """families(n, k_max, spread) against brute force: every composition of n into k parts within
    spread of n / k, up to rotation and reflection, plus the equal-mass ones of every k | n."""
    for n, k_max, spread in ((7, 4, 7), (9, 5, 1), (12, 3, 0)):
        want = set()
        for k in range(2, min(k_max, n) + 1):
            for c in itertools.product(range(1, n + 1), repeat=k):
                if sum(c) == n and all(abs(m - n / k) <= spread for m in c):
                    forms = [s[i:] + s[:i] for s in (c, c[::-1]) for i in range(k)]
                    want.add(min(forms))
        want |= {(n // k,) * k for k in range(2, n + 1) if n % k == 0}
        assert set(structured.families(n, k_max, spread)) == want


@pytest.mark.parametrize("normalisation", ["usa", "sa"])
def test_the_batched_field_is_eq_7_1(normalisation: str) -> None:
    """The torch field (cos/sin form) against potential's (differences form), float64: both sum n terms
    of size e^{|beta|}, so they agree to 1e-13 e^{|beta|}."""
    rng = np.random.default_rng(3)
    theta = rng.uniform(0, 2 * np.pi, (4, 9))
    beta = np.array([-2.0, -0.5, 0.0, 0.5])
    got = flow.field_and_bound(torch.tensor(theta), torch.tensor(beta), normalisation)[0].numpy()
    want = (potential.usa_field if normalisation == "usa" else potential.sa_field)(theta, beta)
    np.testing.assert_allclose(got, want, atol=1e-13 * math.exp(2.0))


def test_polish_and_classify_the_known_states() -> None:
    """A perturbed splay of n = 3 polishes to the splay: spurious (certified) at beta = -1, a saddle at
    beta = 0; a perturbed synchronised state polishes to synchronisation."""
    rng = np.random.default_rng(4)
    start = np.stack([splay(3) + 1e-3 * rng.standard_normal(3), splay(3) + 1e-3 * rng.standard_normal(3),
                      1e-3 * rng.standard_normal(3)])
    beta = np.array([-1.0, 0.0, -1.0])
    theta = critical.polish(start, beta)
    found = critical.classify(theta, beta)
    assert [critical.KINDS[k] for k in found["kind"]] == ["spurious", "saddle", "synchronized"]
    assert found["certified"][:2].all()
    gaps = np.diff(np.sort(np.mod(theta[:2] - theta[:2, :1], 2 * np.pi)), axis=-1)
    # The polish stops at |F| <= 1e-13 n e^{|beta|}; the angles then sit within |F| / mu of the splay
    # (mu = 3 e^{-beta/2}|1/2 + 3 beta/4|, 1.2 at beta = -1 and 1.5 at 0): under 1e-12, and 1e-10 allows it.
    np.testing.assert_allclose(gaps, 2 * np.pi / 3, atol=1e-10)
    assert critical.cluster_masses(np.repeat(splay(3), [2, 2, 1])[None]) == [(2, 2, 1)]


def random_search(n: int, beta: float, starts: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """``starts`` random starts at (n, beta), USA flow to t = 200, polished: the states and classes."""
    gen = torch.Generator().manual_seed(n)
    theta = torch.stack([flow.uniform_angles(n, gen) for _ in range(starts)])
    betas = np.full(starts, beta)
    end, _ = flow.integrate(theta, torch.tensor(betas), "usa", 0.5, 200.0, 1e-8)
    polished = critical.polish(end.numpy(), betas)
    return polished, critical.classify(polished, betas)


def structured_points(n: int, beta: float) -> np.ndarray:
    """Every critical point the structured search's Newton finds at (n, beta), all families of up to
    six clusters: the saddles and minima the random flows leave alone."""
    found = [clusters.Configuration(m, phi).angles() for m in structured.families(n, 6, n)
             for phi in structured.critical_points(m, beta)]
    return np.stack(found)


def spurious_where_forbidden(n: int) -> list[str]:
    """Certified spurious attractors at beta in {-0.16, 0, 0.5} (Polyanskiy, Rigollet, Yao: none at
    beta >= -0.16), among 16 random end states and every structured critical point per beta."""
    bad = []
    for beta in (-0.16, 0.0, 0.5):
        states = np.concatenate([random_search(n, beta, 16)[0], structured_points(n, beta)])
        kinds = critical.classify(states, np.full(len(states), beta))["kind"]
        bad += [f"n = {n}, beta = {beta}: {np.round(x, 6)}" for x in states[kinds == critical.KINDS.index("spurious")]]
    return bad


@pytest.mark.parametrize("n", [3, 4, 5, 6, 8])
def test_no_spurious_attractor_where_the_theorem_forbids_one(n: int) -> None:
    """beta >= -0.16: no random end state and no critical point of the structured families is a
    certified spurious attractor; they synchronise, or are saddles (or minima) of E."""
    assert spurious_where_forbidden(n) == []


def test_the_theorem_check_fails_on_a_wrong_hessian_sign(monkeypatch) -> None:
    """The check above can fail: with the Hessian's sign flipped in the classification (a planted
    error), the minima of E among the structured critical points (n = 3's splay state at beta > -2/3,
    whose double eigenvalue 3 e^{-beta/2}(1/2 + 3 beta/4) is positive) read as spurious attractors."""
    true = potential.hessian
    monkeypatch.setattr(critical.potential, "hessian", lambda theta, beta: -true(theta, beta))
    assert spurious_where_forbidden(3) != []


def test_a_known_spurious_attractor_is_found_by_both_searches() -> None:
    """n = 6, beta = -2 < -2/3: three pairs at the vertices of a triangle are a strict local maximum
    (the family (2, 2, 2), stable below -2/3). The structured search finds its threshold at -2/3;
    random starts reach it, certified, from some of 256 starts (about 5%: 13 expected, and the
    chance of none would be e^{-13})."""
    found = structured.threshold((2, 2, 2), np.arange(-3.0, 0.5 + 1e-9, 0.05))
    assert found is not None and abs(found.beta_low + 2 / 3) < 1e-9
    polished, classes = random_search(6, -2.0, 256)
    spurious = classes["kind"] == critical.KINDS.index("spurious")
    assert spurious.any() and classes["certified"][spurious].all()
    assert {clusters.bracelet(m) for m in critical.cluster_masses(polished[spurious])} == {(2, 2, 2)}


def test_the_certificate_refuses_what_it_cannot_prove() -> None:
    """Random angles (far from any critical point: |F| of order n e^{|beta|}) and n = 3's splay state
    at beta = -2/3 exactly (its double eigenvalue 3 e^{1/3}(1/2 - 1/2) is 0 up to rounding) are
    neither spurious nor saddles: unresolved, uncertified. A polished point with a clear gap is
    certified."""
    rng = np.random.default_rng(5)
    far = rng.uniform(0, 2 * np.pi, (8, 5))
    found = critical.classify(far, np.full(8, -1.0))
    assert not found["certified"].any() and (found["kind"] == critical.KINDS.index("unresolved")).all()
    flat = critical.classify(splay(3)[None], np.array([-2 / 3]))
    assert not flat["certified"][0] and critical.KINDS[flat["kind"][0]] == "unresolved"
    clear = critical.classify(splay(3)[None], np.array([-1.0]))
    assert clear["certified"][0] and critical.KINDS[clear["kind"][0]] == "spurious"


@pytest.mark.parametrize("normalisation", ["usa", "sa"])
def test_the_step_bounds_hold(normalisation: str) -> None:
    """rate(beta) bounds the spectral radius of the flow's Jacobian, and the local G of
    flow.field_and_bound its largest absolute row sum (so its spectral radius too), at random angles
    and at the structured critical points. The Jacobian by central differences, h = 1e-6: entries
    off by rounding ~eps |theta'| / h < 1e-9 e^3 and by truncation ~h^2 times a third derivative of
    the field < 1e-9 e^3, so a row sum of 7 by under 1e-6 (beta up to 3)."""
    rng = np.random.default_rng(7)
    field = potential.usa_field if normalisation == "usa" else potential.sa_field
    for beta in (-3.0, -1.0, 0.0, 0.5, 3.0):
        states = np.stack([*rng.uniform(0, 2 * np.pi, (4, 7)), np.repeat(splay(3), [3, 2, 2])])
        _, local = flow.field_and_bound(torch.tensor(states), torch.full((len(states),), beta, dtype=torch.float64),
                                        normalisation)
        for theta, bound in zip(states, local.numpy(), strict=True):
            h = 1e-6
            jac = np.stack([(field(theta + h * e, beta) - field(theta - h * e, beta)) / (2 * h) for e in np.eye(7)], 1)
            assert np.abs(np.linalg.eigvals(jac)).max() <= float(resources.rate(beta, normalisation)) * (1 + 1e-6)
            assert np.abs(jac).sum(1).max() <= bound + 1e-6


def test_the_flow_lands_on_t_max_or_stops_at_rest() -> None:
    """A system at rest (all angles equal: theta' = 0) runs no time; the others, far from rest at
    t_max = 0.7 (a few steps of at most 1.5 / G), run to t_max, the last step shortened to land on
    it: exactly when it starts past t_max / 2 (t_max - t then exact, Sterbenz), else within an ulp
    and one more step, so within 2 ulps either way."""
    gen = torch.Generator().manual_seed(2)
    theta = torch.stack([torch.zeros(5), *(flow.uniform_angles(5, gen) for _ in range(3))]).double()
    end, time = flow.integrate(theta, torch.tensor([-1.0, -1.0, 0.5, -1.5], dtype=torch.float64), "usa", 1.5, 0.7, 1e-6)
    assert time[0] == 0 and torch.equal(end[0], theta[0])
    np.testing.assert_allclose(time[1:].numpy(), 0.7, rtol=2 * np.finfo(float).eps, atol=0)


@pytest.mark.parametrize("n", [10, 13, 14, 17, 29])
def test_the_leading_family_s_threshold_is_a_function_of_its_imbalance(n: int) -> None:
    """The structured search's family (q - 1, q + 1, q + 1) at n = 3q + 1, (q, q + 1, q + 1) at
    3q + 2, its intra-cluster modes included, has the threshold of the fractions (1/3 - 2 delta,
    1/3 + delta, 1/3 + delta) with delta = 2/(3n) or 1/(3n) (docs/papers/circle.md §7): both
    bisect to 1e-9 (the search) and 1e-12 along the same branch, so they agree to 2e-9."""
    q, residue = divmod(n, 3)
    masses = (q - 1, q + 1, q + 1) if residue == 1 else (q, q + 1, q + 1)
    found = structured.threshold(masses, np.arange(-3.0, 0.5 + 1e-9, 0.05))
    assert found is not None
    assert abs(found.beta_low - unfolding.threshold(unfolding.imbalance(n))) < 2e-9


def test_the_threshold_leaves_minus_two_thirds_like_the_square_root_of_the_imbalance() -> None:
    """beta_c(delta) = -2/3 - (2 sqrt(10)/3) sqrt(delta) + O(delta) (§7): the remainder over sqrt(delta)
    is O(sqrt(delta)), so it shrinks tenfold from delta = 1e-5 to 1e-7 (allowed between 5 and 20 times)
    and stays below 3 sqrt(delta) (the O(delta) term's coefficient is 2.1 to 2.5 for delta from 1e-7 to
    1e-2: unfolding.table). The bisection's 1e-12 is 3e-9 of sqrt(1e-7), far below both. A wrong
    coefficient (2, say) leaves a remainder of 0.1 at every delta, and fails."""
    remainder = {}
    for delta in (1e-5, 1e-6, 1e-7):
        remainder[delta] = (unfolding.threshold(delta) - unfolding.leading_order(delta)) / math.sqrt(delta)
        assert abs(remainder[delta]) < 3 * math.sqrt(delta), (delta, remainder[delta])
    assert 5 < remainder[1e-5] / remainder[1e-7] < 20, remainder
