"""Target matrices S0 (docs: Theory §1): Wishart, power-law and explicit spectra.

Each target samples a d×d symmetric PSD matrix for a given ``n_features`` and
``random_state``, and describes its spectral law for the theory
(:mod:`skattn.theory.laws`).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import ortho_group

from .._validation import check_choice, check_finite_array, check_memory, check_scalar_range
from .._validation import check_random_state_arg as check_random_state
from ..theory.laws import DiscreteLaw, WishartLaw, power_law_eigenvalues

__all__ = ["Target", "WishartTarget", "PowerLawTarget", "SpectrumTarget", "TARGET_FAMILIES",
           "check_target_spec", "target_from_spec"]


def _check_n_features(n_features):
    return check_scalar_range(n_features, "n_features", low=1, integer=True)


def haar_orthogonal(n_features, random_state=None):
    """A Haar-distributed orthogonal ``d×d`` matrix."""
    rng = check_random_state(random_state)
    if n_features == 1:
        return np.array([[1.0]])
    return ortho_group.rvs(n_features, random_state=rng)


class Target:
    """A family of PSD targets S0 with a known spectral law."""

    #: True when the law only makes sense at finite d (e.g. power-law spectra).
    finite_size_only = False

    def sample(self, n_features, random_state=None):
        """Draw a symmetric PSD target ``S0`` of shape ``(n_features, n_features)``."""
        raise NotImplementedError

    def spectral_law(self, n_features=None):
        """The law of the eigenvalues of S0 (continuum if ``n_features`` is None)."""
        raise NotImplementedError

    def second_moment(self, n_features=None):
        """``Q0 = Tr S0² / d`` (its large-d limit if ``n_features`` is None)."""
        return self.spectral_law(n_features).second_moment()

    def __repr__(self):
        params = ", ".join(f"{k}={v!r}" for k, v in self._params().items())
        return f"{type(self).__name__}({params})"

    def _params(self):
        return {}

    def __eq__(self, other):
        if type(self) is not type(other):
            return NotImplemented
        a, b = self._params(), other._params()
        return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)

    def __hash__(self):
        return hash((type(self).__name__, repr(self)))


class WishartTarget(Target):
    """``S0 = W0 W0ᵀ / √(p0 d)`` with ``W0 ∈ R^{d×p0}`` standard Gaussian, ``p0 = κ0 d``.

    Parameters
    ----------
    rank_ratio : float, default=0.5
        κ0 = p0/d in ``(0, 1e6]`` (the state evolution takes ``κ0 >= 1e-6``, below which
        its quadrature of Marchenko–Pastur fails). The spectral law is ``√κ0 ×`` Marchenko–Pastur with
        ratio ``1/κ0`` and ``Q0 → 1 + κ0``. :meth:`sample` raises a ValueError naming
        ``rank_ratio`` when the d × p0 draw exceeds the memory limit
        (``SKATTN_MEMORY_LIMIT_GB``, default 8 GiB).
    """

    MAX_RANK_RATIO = 1e6

    def __init__(self, rank_ratio=0.5):
        self.rank_ratio = check_scalar_range(rank_ratio, "rank_ratio", low=0,
                                             low_inclusive=False, high=self.MAX_RANK_RATIO)

    def _params(self):
        return {"rank_ratio": self.rank_ratio}

    def rank(self, n_features):
        """``p0 = max(1, round(κ0 d))``."""
        return max(1, int(round(self.rank_ratio * _check_n_features(n_features))))

    def sample(self, n_features, random_state=None):
        d = _check_n_features(n_features)
        rng = check_random_state(random_state)
        p0 = self.rank(d)
        # the d × p0 draw plus the d × d product and its transpose, in float64
        check_memory(8 * (d * p0 + 2 * d * d),
                     f"rank_ratio={self.rank_ratio} (p0 = {p0} columns at n_features={d})")
        w0 = rng.standard_normal((d, p0))
        s0 = w0 @ w0.T / np.sqrt(p0 * d)
        return (s0 + s0.T) / 2

    def spectral_law(self, n_features=None):
        return WishartLaw(self.rank_ratio)


class PowerLawTarget(Target):
    """``S0 = O diag(λ) Oᵀ`` with ``λ_i ∝ i^(−γ)``, ``Σ λ_i² = d`` and O Haar-random.

    Parameters
    ----------
    gamma : float
        Decay exponent γ > 0.
    cutoff : int or None, default=None
        Number of non-zero modes (``λ_i = 0`` for ``i > cutoff``); None keeps all ``d``.

    Notes
    -----
    The top eigenvalues are of order √d, so this family only has a finite-d law.
    """

    finite_size_only = True

    def __init__(self, gamma, cutoff=None):
        self.gamma = check_scalar_range(gamma, "gamma", low=0, low_inclusive=False)
        if cutoff is not None:
            cutoff = check_scalar_range(cutoff, "cutoff", low=1, integer=True)
        self.cutoff = cutoff

    def _params(self):
        return {"gamma": self.gamma, "cutoff": self.cutoff}

    def eigenvalues(self, n_features):
        """The normalised spectrum, in decreasing order."""
        return power_law_eigenvalues(self.gamma, _check_n_features(n_features),
                                     self.cutoff)

    def sample(self, n_features, random_state=None):
        d = _check_n_features(n_features)
        o = haar_orthogonal(d, random_state)
        s0 = (o * self.eigenvalues(d)) @ o.T
        return (s0 + s0.T) / 2

    def spectral_law(self, n_features=None):
        if n_features is None:
            raise ValueError(
                "PowerLawTarget has no d → ∞ spectral law (its top eigenvalues grow like "
                "√d): pass n_features."
            )
        return DiscreteLaw(self.eigenvalues(n_features))


class SpectrumTarget(Target):
    """An explicit spectrum (rotated by a Haar matrix) or an explicit PSD matrix.

    Parameters
    ----------
    eigenvalues : array-like of shape (d,) or (d, d)
        Non-negative eigenvalues, or a symmetric PSD matrix used as S0 itself. The state
        evolution takes a root-mean-square eigenvalue ``√(Tr S0²/d)`` in ``[1e-8, 1e3]``
        (ValueError naming the target otherwise; see docs: Errors).
    """

    finite_size_only = True

    def __init__(self, eigenvalues):
        arr = check_finite_array(eigenvalues, "eigenvalues", ndim=(1, 2))
        if arr.ndim == 2:
            if arr.shape[0] != arr.shape[1] or not np.allclose(arr, arr.T, atol=1e-10):
                raise ValueError(
                    f"eigenvalues given as a matrix must be square and symmetric, got "
                    f"shape {arr.shape}."
                )
            self.matrix = (arr + arr.T) / 2
            eig = np.linalg.eigvalsh(self.matrix)
        else:
            self.matrix = None
            eig = arr
        if eig.size == 0:
            raise ValueError("eigenvalues must be non-empty.")
        if np.min(eig) < -1e-10 * max(1.0, np.max(np.abs(eig))):
            raise ValueError("eigenvalues must be non-negative (S0 is PSD).")
        self.eigenvalues = np.clip(np.sort(eig)[::-1], 0, None)

    def _params(self):
        return {"eigenvalues": self.eigenvalues if self.matrix is None else self.matrix}

    def _check_size(self, n_features):
        d = _check_n_features(n_features)
        if d != self.eigenvalues.size:
            raise ValueError(
                f"n_features={d} does not match the {self.eigenvalues.size} eigenvalues "
                "of this SpectrumTarget."
            )
        return d

    def sample(self, n_features, random_state=None):
        d = self._check_size(n_features)
        if self.matrix is not None:
            return self.matrix.copy()
        o = haar_orthogonal(d, random_state)
        s0 = (o * self.eigenvalues) @ o.T
        return (s0 + s0.T) / 2

    def spectral_law(self, n_features=None):
        if n_features is not None:
            self._check_size(n_features)
        return DiscreteLaw(self.eigenvalues)


# ----------------------------------------------------------------------------------------
# Target specs: the one JSON-able description of a target (validation configs, experiments)
# ----------------------------------------------------------------------------------------

#: Families of a target spec and the parameters each accepts.
TARGET_FAMILIES = {"wishart": ("kappa0",), "powerlaw": ("gamma", "cutoff")}


def check_target_spec(spec):
    """Validate a target spec and return it in canonical form.

    Parameters
    ----------
    spec : dict
        ``{"family": "wishart", "kappa0": κ0}`` (κ0 defaults to 0.5) or
        ``{"family": "powerlaw", "gamma": γ, "cutoff": None}``.

    Returns
    -------
    dict
        Every parameter of the family present, in canonical types.

    Raises
    ------
    ValueError
        If ``spec`` is not a dict with a known ``"family"``, has unknown keys, or a
        parameter is out of range (the message names the key).
    """
    if not isinstance(spec, dict) or "family" not in spec:
        raise ValueError("target must be a dict with a 'family' key, e.g. "
                         "{'family': 'wishart', 'kappa0': 0.5}.")
    family = check_choice(spec["family"], "target['family']", tuple(TARGET_FAMILIES))
    unknown = sorted(set(spec) - {"family", *TARGET_FAMILIES[family]})
    if unknown:
        raise ValueError(f"target has unknown keys {unknown} for family {family!r} "
                         f"(expected {list(TARGET_FAMILIES[family])}).")
    if family == "wishart":
        kappa0 = check_scalar_range(spec.get("kappa0", 0.5), "target['kappa0']", low=0,
                                    low_inclusive=False)
        return {"family": family, "kappa0": kappa0}
    if spec.get("gamma") is None:
        raise ValueError("target['gamma'] is required for family 'powerlaw' (γ > 0).")
    gamma = check_scalar_range(spec["gamma"], "target['gamma']", low=0, low_inclusive=False)
    cutoff = spec.get("cutoff")
    if cutoff is not None:
        cutoff = check_scalar_range(cutoff, "target['cutoff']", low=1, integer=True)
    return {"family": family, "gamma": gamma, "cutoff": cutoff}


def target_from_spec(spec):
    """The :class:`Target` of a target spec (see :func:`check_target_spec`).

    Parameters
    ----------
    spec : dict

    Returns
    -------
    WishartTarget or PowerLawTarget
    """
    spec = check_target_spec(spec)
    if spec["family"] == "wishart":
        return WishartTarget(spec["kappa0"])
    return PowerLawTarget(spec["gamma"], spec["cutoff"])
