"""
Interpolation, perfect-recovery and Bayes-optimal thresholds against the target rank
=====================================================================================

How many samples ``n = α d²`` does single-head tied attention need to learn a Wishart
target of rank ``p0 = κ0 d``? Three thresholds answer it (:ref:`§6 <spec-6>` and
:ref:`§7 <spec-7>`, closed forms in :mod:`skattn.theory.thresholds`), each a
multiple of ``1/K_eff`` with ``K_eff = (T² + T − 2)/2`` effective constraints per softmax
sample:

- ``α_BO = (κ0 − κ0²/2)/K_eff``: below it no estimator recovers S0 (the degrees of freedom
  of a rank-κ0 d symmetric matrix, per constraint);
- ``α_perf = M*(1 − κ0)/(2 K_eff)``: where factored ERM with vanishing weight decay (trace
  minimisation over PSD matrices) recovers S0 from noiseless labels; ``M*`` is the
  statistical dimension of its descent cone;
- ``α_interp``: beyond it the λ → 0⁺ factored model no longer fits noisy labels exactly —
  ``(1 + 2κ0 − κ0²)/(4 K_eff)`` as the noise Δ → 0⁺, smaller for Δ > 0.

Direct (Frobenius) training needs ``1/(2K_eff)`` for both recovery and interpolation, at
every κ0: it cannot use the low rank. All thresholds meet at κ0 = 1.

Run it with ``skattn figure thresholds`` (``--quick``: smaller and faster) or
``python examples/plot_thresholds.py``. The PNGs go to ``$SKATTN_FIGURE_DIR``, else
the current directory.
"""

# %%
from skattn.figures import render

# close=False leaves the figures open, for the gallery to show them
render("thresholds", log=print, close=False)

# %%
# How the figure is made
# ----------------------
# The computation lives in :mod:`skattn.figures.thresholds` (its function ``draw``):
#
# .. literalinclude:: ../../skattn/figures/thresholds.py
#    :language: python
