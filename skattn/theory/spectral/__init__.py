"""Free additive convolution with a semicircle and the spectral integrals of §4.

For a target spectral law μ0 and a noise level δ ≥ 0, ``μ_δ = μ0 ⊞ SC(δ²)`` is the limiting
spectral law of ``S0 + δ Z`` with ``Z`` a GOE matrix (semicircle on [−2, 2]). The state
evolution of docs: Theory §4 needs, at every iteration, the spectral integrals

- ``J(δ, ε) = ∫ (x − ε)₊² μ_δ(dx)``,
- ``D(δ, ε) = ∫∫ ((x − ε)₊ − (y − ε)₊) / (x − y) μ_δ(dx) μ_δ(dy)``,
- ``∫ x (x − ε)₊ μ_δ(dx)`` and ``μ_δ((−∞, ε])``.

Method
------
The Cauchy transform of μ_δ is ``G_δ(z) = G_0(ω(z))`` with the subordination function
``ω = z − δ² G_0(ω)``, ``Im ω > 0``. On the real axis we use Biane's description by
``u = Re ω``: with ``ω = u + i v`` and ``s = v²``, inside the support

``F(u, s) := ∫ μ0(dt) / ((u − t)² + s) = 1 / δ²``,

and then ``x(u) = u + δ² Re G_0(ω)``, ``ρ_δ(x) = v / (π δ²)``, ``Re G_δ(x + i0) = Re G_0(ω)``.
The map ``u ↦ x(u)`` is an increasing homeomorphism from
``U = {u : ∫ μ0(dt)/(u − t)² > 1/δ²}`` onto the interior of the support of μ_δ, with

``dx/du = 2 δ² (s A² + B²) / A``,  ``A = ∫ μ0/((u−t)²+s)²``, ``B = ∫ μ0 (u−t)/((u−t)²+s)²``.

For fixed ``u`` the equation for ``s`` is one-dimensional and monotone (``1/F`` is concave
increasing in ``s``, a complete Bernstein function), solved by a safeguarded Newton
iteration; for fixed ``x``, ``ω`` solves ``ω + δ² G_0(ω) = x`` (Newton's method from an
interpolated guess, with the monotone u-bracketed solve as fallback). The solution with
``Im ω > 0`` is unique, so any convergent iterate is the right one.

*Edges.* Real ``u`` outside supp μ0 with ``δ² ∫ μ0(dt)/(u − t)² = 1``; the edge is
``x = u + δ² G_0(u)``. Every gap of supp μ0 (between atoms, or between the atom at 0 and
the Marchenko–Pastur bulk) where the convex function ``∫ μ0/(u − t)²`` dips below ``1/δ²``
gives a gap of μ_δ, plus the two outer edges. For Wishart targets the edges are the real
roots of the quartic ``δ² G²(G − √κ0)² − (1 − κ0) G² + 2√κ0 G − κ0 = 0``.

*Quadrature.* Each support component is covered by panels carrying a 21-point
Gauss–Kronrod rule, refined adaptively until the embedded 10-point Gauss rule agrees on
``∫ 1, x, x², Re G`` to ``rtol``. Panels touching an edge use ``y = p + L t²`` (or
``p + L (1 − cos π t)/2`` when both ends are edges), which makes the square-root edges
smooth; refinement is graded towards the edges, where the features of the density sit at
small δ. Panels live in ``x`` for Wishart and generic targets (the Marchenko–Pastur soft
edges are compressed to a width ``δ⁴`` in ``u``) and in ``u`` for discrete targets (no
initial guesses needed; panels are also split until they resolve the ripples of
individual atoms). Components are built lazily: the ε-integrals only need the components
above ε.

*Kinks.* Integrands ``(x − ε)₊^k`` are integrated exactly by cutting, on the fly, the one
panel that contains ε at the parameter ``t_ε`` of its own map (so the two parts keep the
smoothness of the panel); every other panel is reused. ``D`` uses the antisymmetry
identity ``D = 2 ∫ (f(x) − f(a)) Re G_δ(x + i0) ρ_δ(x) dx`` (``a`` the left end of the
support, which keeps it valid at a hard edge); for δ = 0 the atoms are handled exactly.

Modules
-------
:mod:`.quadrature` (Gauss–Kronrod rule, panel maps), :mod:`.rootfinding` (bracketed
Newton), :mod:`.kernels` (what is needed of μ0), :mod:`.evaluators` (``x ↦ u, s, ρ, Re G``),
:mod:`.builder` (the adaptive panels), :mod:`.law` (:class:`ConvolvedLaw`, the queries,
and the constructors) and :mod:`.capped` (the integrals of the rank-capped ReLU of a
student of width κ < 1).
"""

from .capped import CappedReluIntegrals, capped_relu_integrals
from .law import (
    ConvolvedLaw,
    free_convolution,
    mass_below,
    relu_divided_difference,
    semicircle_law,
    squared_relu_moment,
    x_relu_moment,
)

__all__ = [
    "ConvolvedLaw",
    "free_convolution",
    "semicircle_law",
    "squared_relu_moment",
    "relu_divided_difference",
    "x_relu_moment",
    "mass_below",
    "CappedReluIntegrals",
    "capped_relu_integrals",
]
