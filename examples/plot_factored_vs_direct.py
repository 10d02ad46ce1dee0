"""
Factored against direct attention at the optimal weight decay, and the Bayes limit
==================================================================================

The inductive bias of factorisation. Tied softmax attention ``S = W Wᵀ/√(pd)`` trained
with weight decay is nuclear-norm-regularised ERM; training the product directly,
``S = V/√d`` with a Frobenius penalty, is ridge regression on the logits. We compare the two
on a low-rank Wishart target (κ0 = 0.2, T = 2, noiseless labels), each at its own best λ:

- lines: the state-evolution test error at the λ that minimises it
  (:func:`skattn.theory.optimal.optimal_reg_lambda`, over the same λ range as the grid
  search), for both parametrisations, and the Bayes-optimal error of
  :func:`skattn.theory.bayes.bayes_optimal` (plug-in of the posterior mean; dotted: the
  Bayes-optimal label predictor, a lower bound for every estimator);
- points: :class:`~skattn.TiedAttentionRegressor` and
  :class:`~skattn.DirectAttentionRegressor` at d = 80, λ chosen by 3-fold
  :class:`~sklearn.model_selection.GridSearchCV` and refitted on all samples, tested on
  fresh data.

Factored training wins at every α: it recovers the target at ``α_perf ≈ 0.128`` (dashed
line), close to the Bayes-optimal ``α_BO = 0.09``, whereas direct training needs
``α = 1/(2 K_eff) = 0.25``. With noiseless labels the factored model's best λ is the
smallest one tried (its test error decreases down to λ → 0⁺).

Run it with ``skattn figure factored_vs_direct`` (``--quick``: smaller and faster) or
``python examples/plot_factored_vs_direct.py``. The PNGs go to ``$SKATTN_FIGURE_DIR``, else
the current directory.
"""

# %%
from skattn.figures import render

# close=False leaves the figures open, for the gallery to show them
render("factored_vs_direct", log=print, close=False)

# %%
# How the figure is made
# ----------------------
# The computation lives in :mod:`skattn.figures.factored_vs_direct` (its function ``draw``):
#
# .. literalinclude:: ../../skattn/figures/factored_vs_direct.py
#    :language: python
