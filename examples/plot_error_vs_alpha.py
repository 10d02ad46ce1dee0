"""
Test and training error against the sample ratio α
===================================================

Single-head tied softmax attention with T = 2 tokens learns a Wishart target of rank
ratio κ0 = 0.5 (β = β0 = 1, no label noise) from ``n = α d²`` samples. For several
weight decays λ we draw the state-evolution prediction of the test error and of the
training error (lines) and compare it with :class:`~skattn.TiedAttentionRegressor`
trained by full-batch Adam at d = 50 (points: mean ± standard error over two seeds).

The dotted vertical line marks the Bayes-optimal recovery threshold
``α_BO = (κ0 − κ0²/2)/K_eff`` with ``K_eff = (T² + T − 2)/2`` effective constraints per
sample (:ref:`§6 <spec-6>`): no estimator recovers the target with fewer samples. With a
small λ the training error is nearly zero and the test error falls by orders of
magnitude once α passes the threshold region; a large λ keeps the training error
high and the test error decays slowly, biased by the trace penalty.

Run it with ``skattn figure error_vs_alpha`` (``--quick``: smaller and faster) or
``python examples/plot_error_vs_alpha.py``. The PNGs go to ``$SKATTN_FIGURE_DIR``, else
the current directory.
"""

# %%
from skattn.figures import render

# close=False leaves the figures open, for the gallery to show them
render("error_vs_alpha", log=print, close=False)

# %%
# How the figure is made
# ----------------------
# The computation lives in :mod:`skattn.figures.error_vs_alpha` (its function ``draw``):
#
# .. literalinclude:: ../../skattn/figures/error_vs_alpha.py
#    :language: python
