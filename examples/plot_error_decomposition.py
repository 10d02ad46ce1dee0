"""
Where the excess error comes from: overfitting, underfitting, approximation, mismatch
=====================================================================================

On a power-law target the trained ``Ŝ ≈ η ReLU(S0 + δZ − ε)`` has a thresholded noise
bulk, a set of recovered outliers and target modes still hidden in the bulk. Its S-error
splits exactly along these (:func:`~skattn.theory.powerlaw.error_decomposition`):

- ``E_over`` — energy of the learned bulk (spurious directions);
- ``E_under`` — error along the target modes not yet recovered;
- ``E_approx`` — error along the recovered outliers (shrinkage by ε, misalignment);
- ``E_mismatch = (1 − κ)² Q0``, ``κ = m/Q0`` — the part along the target itself,

and ``e_test − e0 ≈ c1 (E_over + E_under + E_approx) + c2 E_mismatch``. For linear
attention the test error is quadratic in ``Ŝ − S0`` (``c1 = 2K``, ``c2 = 0``): the split is
exact. For softmax it is exact along the target and first order across it; ``c2 < 0``
(the softmax error saturates along the scale of the target).

Left and middle: linear attention, T = 2, d = 1000, γ = 1.25, Δ = 0.5, λ = 3√(n/d²), up to
``n = d²`` — as fractions of the excess, and in absolute value (log–log), where
underfitting and approximation decay with the scaling-law exponent while the bulk term
decays like ``d²/n``. Right: T = 2 softmax at d = 200 (λ = 0.3√(n/d²)), with the
approximation against the exact excess. Theory only; runs in well under a minute.

Run it with ``skattn figure error_decomposition`` (``--quick``: smaller and faster) or
``python examples/plot_error_decomposition.py``. The PNGs go to ``$SKATTN_FIGURE_DIR``, else
the current directory.
"""

# %%
from skattn.figures import render

# close=False leaves the figures open, for the gallery to show them
render("error_decomposition", log=print, close=False)

# %%
# How the figure is made
# ----------------------
# The computation lives in :mod:`skattn.figures.error_decomposition` (its function ``draw``):
#
# .. literalinclude:: ../../skattn/figures/error_decomposition.py
#    :language: python
