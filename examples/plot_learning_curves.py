"""
Scaling laws: learning curves on power-law targets
==================================================

For a target with power-law spectrum ``λ_i ∝ √d · i^(−γ)`` the excess test error of
factored attention decays as a power of n (:ref:`§8 <spec-8>`): in ``d ≪ n ≪ d²``

``e_test − e0 ≍ (n/d)^(−1 + 1/(2γ))``,

because the modes are recovered one by one, each new mode needing more samples than the
last (:mod:`skattn.theory.powerlaw`). The same exponent holds all along the path
``λ = c √(n/d²)`` of the weight decay (:mod:`skattn.theory.powerlaw.regimes`); here ``c = 10``, which keeps
the whole noise bulk below the threshold.

We measure the learning curve with scikit-learn's
:func:`~sklearn.model_selection.learning_curve` on :class:`~skattn.TiedAttentionRegressor`
(linear attention, T = 2, label noise Δ = 0.5, d = 100, three splits), with
:class:`~skattn.estimators.ScaledLambdaRegressor` setting ``reg_lambda = c √n / d`` at every
training size. For linear attention the excess risk of a fitted ``S`` is exactly
``2K ‖S − S0‖²_F / d`` (``K = T(T+1)/2``), which we use as the score.

Lines: the finite-d state evolution at the same d = 100 (solid) and at d = 1000 up to
``n = d²`` (dashed, computed from the theory alone in a few seconds).

The second figure is the phase diagram of :ref:`§8 <spec-8>`: the regimes of
:func:`skattn.scaling.scaling_regime` in the (n, λ) plane at d = 1000 (linear attention,
T = 2, Δ = 0.5; crossovers located to within factors of order one), with the path
λ = c √n/d of the curves above. It runs parallel to the recovery/regularised boundary
λ ≈ √(4KΔ n/d²), along which both regimes give the same exponent.

Run it with ``skattn figure learning_curves`` (``--quick``: smaller and faster) or
``python examples/plot_learning_curves.py``. The PNGs go to ``$SKATTN_FIGURE_DIR``, else
the current directory.
"""

# %%
from skattn.figures import render

# close=False leaves the figures open, for the gallery to show them
render("learning_curves", log=print, close=False)

# %%
# How the figure is made
# ----------------------
# The computation lives in :mod:`skattn.figures.learning_curves` (its function ``draw``):
#
# .. literalinclude:: ../../skattn/figures/learning_curves.py
#    :language: python
