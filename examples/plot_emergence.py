"""
Emergence: target modes detach from the bulk one by one
=======================================================

A power-law target ``λ_i ∝ √d · i^(−γ)`` is learned *sequentially*. State evolution
predicts the trained matrix as ``Ŝ ≈ η ReLU(S0 + δZ − ε)`` (:ref:`§4 <spec-4>`):
as n grows the noise level δ and the threshold ε fall, and each target eigenvalue in turn
separates from the noise bulk of ``S0 + δZ`` — a spectral outlier, a recovered feature — at a sample
size of its own (:func:`~skattn.theory.powerlaw.emergence_alpha`). That is the stepwise
"emergence" of :ref:`§8 <spec-8>`, and summing the steps gives the scaling law
(``plot_learning_curves.py``).

Left: the learned spectrum against n from the theory alone (d = 100, γ = 1.25, linear
attention, T = 2, label noise Δ = 0.5, λ = 3√(n/d²)): the shaded band is the learned bulk,
coloured lines the learned outliers (dotted: the target eigenvalues they approach), ticks
on the top axis the predicted emergence sizes; the points are the top eigenvalues of
:class:`~skattn.TiedAttentionRegressor` trained with **Adam** at the same d.
Right: the whole learned spectrum at two sizes, trained (histogram) against the predicted
density, with the predicted outliers as arrows.

Run it with ``skattn figure emergence`` (``--quick``: smaller and faster) or
``python examples/plot_emergence.py``. The PNGs go to ``$SKATTN_FIGURE_DIR``, else
the current directory.
"""

# %%
from skattn.figures import render

# close=False leaves the figures open, for the gallery to show them
render("emergence", log=print, close=False)

# %%
# How the figure is made
# ----------------------
# The computation lives in :mod:`skattn.figures.emergence` (its function ``draw``):
#
# .. literalinclude:: ../../skattn/figures/emergence.py
#    :language: python
