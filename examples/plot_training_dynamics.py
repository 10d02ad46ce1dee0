"""
Training dynamics: target modes learned one by one in time, as they emerge in α
===============================================================================

A spiked target (four eigenvalues in ratio 2, the rest zero, d = 64, linear attention,
T = 2) is learned by :class:`~skattn.TiedAttentionRegressor` with **Adam** from a small
start, its trajectory recorded with the ``history`` parameter
(:class:`skattn.nn.HistoryRecorder`).

Left, in time: the top eigenvalues of S against the epoch (dotted: the target
eigenvalues) and the objective (dashed). Each mode grows from the small start at a rate set
by its eigenvalue, so the modes take off one after the other; the objective falls in
steps. Right, in α: the state evolution at the same d and λ, the learned spectrum against
n (:func:`~skattn.theory.powerlaw.recovered_modes`), ticks on the top axis where each mode
emerges (:func:`~skattn.theory.powerlaw.emergence_alpha`), the dashed line the n of the
Adam run and the points its final spectrum. The order is the same in both: larger modes
first — in time because they grow faster, in α because they leave the noise bulk sooner.

Run it with ``skattn figure training_dynamics`` (``--quick``: smaller and faster) or
``python examples/plot_training_dynamics.py``. The PNGs go to ``$SKATTN_FIGURE_DIR``, else
the current directory.
"""

# %%
from skattn.figures import render

# close=False leaves the figures open, for the gallery to show them
render("training_dynamics", log=print, close=False)

# %%
# How the figure is made
# ----------------------
# The computation lives in :mod:`skattn.figures.training_dynamics` (its function ``draw``):
#
# .. literalinclude:: ../../skattn/figures/training_dynamics.py
#    :language: python
