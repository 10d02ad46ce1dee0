"""Shared pieces of the power-law theory: reading a fixed point and its spectral objects.

The notation (μ_δ, ω, ρ_δ) is that of the notes of :mod:`skattn.theory.powerlaw`.
"""

from __future__ import annotations

import numpy as np

from ..._validation import check_finite_array
from ..laws import DiscreteLaw


def _target_eigenvalues(result, target_eigenvalues):
    """Decreasing target spectrum and its DiscreteLaw, from the argument or the result."""
    if target_eigenvalues is None:
        law = getattr(result, "law", None)
        if not isinstance(law, DiscreteLaw):
            raise ValueError(
                "target_eigenvalues is required: this result carries no finite-d target law "
                f"(law={law!r}); pass the d eigenvalues of the target.")
        eig = law.eigenvalues[::-1].copy()
    else:
        eig = check_finite_array(target_eigenvalues, "target_eigenvalues", ndim=1)
        if eig.size < 2:
            raise ValueError("target_eigenvalues must hold at least 2 values, got "
                             f"{eig.size}.")
        eig = np.sort(eig)[::-1]
        law = DiscreteLaw(eig)
    return eig, law


def _check_result(result):
    for name in ("delta", "epsilon", "eta"):
        if not hasattr(result, name):
            raise TypeError("result must be a StateEvolutionResult, got "
                            f"{type(result).__name__}.")
    if getattr(result, "parametrization", "factored") != "factored":
        raise ValueError("result must come from the factored parametrization (the learned "
                         "spectrum η·ReLU(S0 + δZ − ε) is specific to it).")
    _check_not_spiked(result)
    delta = float(result.delta)
    if not np.isfinite(delta) or delta <= 0:
        raise ValueError(f"result.delta must be finite and > 0, got {delta}.")
    return delta, float(result.epsilon), float(result.eta)


def _omega(x, R, rho, delta):
    """``ω(x + i0) = x − δ² G_δ(x + i0)`` from ``Re G`` and ``ρ`` at the points x."""
    d2 = delta * delta
    return (x - d2 * R) + 1j * (np.pi * d2 * rho)


def _nodes_above(mu, eps):
    """Quadrature of μ_δ restricted to ``(ε, ∞)``: nodes x, weights W (``ρ dx``), Re G, ρ.

    The panel holding ε is cut at ε (the quadrature of the kinked integrands
    ``(x − ε)₊ f(x)`` stays exact to the quadrature tolerance).
    """
    split = getattr(mu, "_split", None)
    if split is not None:
        _, _, _, x, W, R, _ = split(eps)
        rho = mu.density(x) if x.size else np.zeros(0)
    else:  # fall back on the public nodes (the kink panel is then integrated roughly)
        sel = mu.nodes > eps
        x, W, R, rho = (mu.nodes[sel], mu.weights[sel], mu.hilbert_nodes[sel],
                        mu.density_nodes[sel])
    return x, W, R, rho


def _interval_index(intervals, x):
    """Index of the support interval holding each x (−1 if none)."""
    a = np.array([iv[0] for iv in intervals])
    b = np.array([iv[1] for iv in intervals])
    k = np.searchsorted(a, x, side="right") - 1
    ok = (k >= 0) & (x <= b[np.clip(k, 0, None)] * (1 + 1e-14) + 1e-300)
    return np.where(ok, k, -1)


def _check_not_spiked(result):
    """The mode-by-mode theory reads every target mode off one Gaussian bulk; a result of the
    spiked state evolution keeps its top modes out of that bulk (docs: Spiky targets)."""
    from ..spiked import is_spiked_result
    if is_spiked_result(result):
        raise ValueError(
            f"result comes from the spiked state evolution ({result.params['n_spikes']} "
            "explicit mode(s), not in result.law), and the mode-by-mode decomposition needs the "
            "Gaussian bulk picture of every mode: solve with correction='none' (outside the "
            "Gaussian channel's domain on this target, hence a DomainWarning).")
