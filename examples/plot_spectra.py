"""
Learned spectra across α: rank collapse, bulk and recovered features
=====================================================================

The weight decay on ``W`` is a nuclear-norm penalty on ``S = W Wᵀ/√(pd)``, so the
trained attention matrix is low rank: state evolution predicts its spectrum as
``η · ReLU(S0 + δ Z − ε I)`` (:ref:`§4 <spec-4>`) — an **atom at zero** of mass
``μ_δ((−∞, ε])`` (the collapsed directions), and a continuous part given by the free
convolution of the target's spectrum with a semicircle of variance δ².

Here we train :class:`~skattn.TiedAttentionRegressor` (T = 2 softmax, Wishart target
κ0 = 0.5, λ = 0.01) at d = 100 for four sample ratios α, and compare the histogram of
the eigenvalues of ``S_`` with the predicted density; the hollow bar is the fraction of
(numerically) zero eigenvalues, the stem the predicted atom. As α grows the noise
(δ) shrinks and the learned spectrum approaches the target's: the atom tends to the
target's own null fraction 1 − κ0 = 0.5.

The fits use the default L-BFGS solver, which reaches the same ERM minimiser as Adam
in far fewer iterations and sets the collapsed eigenvalues to zero more cleanly.

Run it with ``skattn figure spectra`` (``--quick``: smaller and faster) or
``python examples/plot_spectra.py``. The PNGs go to ``$SKATTN_FIGURE_DIR``, else
the current directory.
"""

# %%
from skattn.figures import render

# close=False leaves the figures open, for the gallery to show them
render("spectra", log=print, close=False)

# %%
# How the figure is made
# ----------------------
# The computation lives in :mod:`skattn.figures.spectra` (its function ``draw``):
#
# .. literalinclude:: ../../skattn/figures/spectra.py
#    :language: python
