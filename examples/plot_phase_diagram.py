"""
Phase diagrams: test and training error over the (α, λ) plane
==============================================================

Where does tied attention generalise, and where does it only memorise? The state evolution
(:ref:`§4 <spec-4>`) answers for every sample ratio ``α = n/d²`` and weight decay ``λ`` at
once. :func:`skattn.theory.solve_phase_diagram` solves each λ row as a warm-started α path
(every point starts from its converged neighbour), with the rows spread over both cores;
the grid of 24 × 12 points per panel takes a few minutes on two cores.

Top: test error, bottom: training error, for T = 2 softmax attention and for the
single-token linear case (T = 1, the quadratic network) on a Wishart κ0 = 0.5 target. At
small λ the training error is tiny below the interpolation threshold (dotted) while the
test error stays high; past it the test error drops by decades. Larger λ trades
memorisation for bias everywhere.

Run it with ``skattn figure phase_diagram`` (``--quick``: a coarse grid in seconds), or
from the command line on any grid: ``skattn phase-diagram --alpha 0.05:1:24:log
--reg-lambda 1e-3:1:12:log --n-jobs 2 --figure pd.png``.
"""

# %%
from skattn.figures import render

# close=False leaves the figures open, for the gallery to show them
render("phase_diagram", log=print, close=False)

# %%
# How the figure is made
# ----------------------
# The computation lives in :mod:`skattn.figures.phase_diagram` (its function ``draw``):
#
# .. literalinclude:: ../../skattn/figures/phase_diagram.py
#    :language: python
