"""
Validity map: the Gaussian state evolution on other tokens, teachers and students
==================================================================================

The state evolution (docs/theory.rst §4) is derived for tokens with i.i.d. standard Gaussian
entries, a single-head teacher and a tied single-head student. This figure *measures*
how far students trained by L-BFGS (float64, T = 2 softmax, Wishart κ0 = 0.5, λ = 0.05)
land from that *prediction* when one assumption is broken at a time. Each point is the
measured relative gap ``e_test,measured / e_test,predicted − 1`` (mean ± standard error
over three seeds, at d = 40 and d = 80 so that finite-size effects show as the
difference between the panels); the grey band is the ±5 % tolerance of the project's
theory-vs-simulation tests.

Top row, the tied student on other tokens and teachers:

- **Rademacher** and **Student-t** (df = 5, df = 3, unit variance) token entries. Off
  the diagonal the pre-activation covariance ``Tr(S0 S)/d`` does not depend on the law;
  on the diagonal it does: ``Var h_aa = (2 Tr S² + κ4 Σ_i S_ii²)/d`` with the excess
  kurtosis ``κ4 = E z⁴ − 3`` (−2 Rademacher, 6/(df − 4) Student-t), an order-one
  correction for a PSD target. Far from recovery the laws therefore differ from the
  Gaussian prediction; the κ4-corrected variance predicts the error of the null predictor
  (uniform attention, the α → 0 end), printed below. Near recovery the correction enters
  through ``Tr(S − S0)/d`` only and the laws agree again. df = 3 has an infinite fourth
  moment: no finite-d limit exists.
- **anisotropic** tokens ``x = C^{1/2} z``, C diagonal with eigenvalues in [0.5, 1.5]:
  a different model (``Var h_ab = Tr(S0 C S0 C)/d``); the centring mismatch is printed
  as the oracle error ``e0``.
- a **2-head teacher** ``y = (σ(h(S0_1)) + σ(h(S0_2)))/2``: misspecified for one head.

Bottom row, other students on Gaussian tokens: the **untied** student
(:class:`~skattn.UntiedAttentionRegressor`, ``S = W_Q W_Kᵀ/√(pd)``), the **2-head**
tied student (``n_heads=2``) on the single-head teacher and on the 2-head teacher, and
the tied student for reference. All are compared with the same tied single-head
prediction; no state evolution exists yet for them.

Run it with ``skattn figure validity_map`` (``--quick``: smaller and faster) or
``python examples/plot_validity_map.py``. The PNG goes to ``$SKATTN_FIGURE_DIR``, else
the current directory.
"""

# %%
from skattn.figures import render

# close=False leaves the figures open, for the gallery to show them
render("validity_map", log=print, close=False)

# %%
# How the figure is made
# ----------------------
# The computation lives in :mod:`skattn.figures.validity_map` (its function ``draw``):
#
# .. literalinclude:: ../../skattn/figures/validity_map.py
#    :language: python
