"""The gallery figures as package code: reproduce the paper's main figures at laptop scale.

Each figure lives in its own module (``skattn.figures.<name>``) whose ``draw(out_dir, *,
quick=False, log=None, close=True)`` computes the state-evolution prediction, trains the
estimators where the figure compares with simulations, saves the PNG(s) and returns their
paths. :func:`list_figures` names them and :func:`render` runs one by name; the gallery
scripts ``examples/plot_<name>.py`` and ``skattn figure <name>`` both call :func:`render`.

This is the top layer of the package: it imports :mod:`skattn.plotting`,
:mod:`skattn.theory`, :mod:`skattn.estimators` and :mod:`skattn.data`; nothing in skattn
imports it. Figure modules are imported on first use, so listing the figures is cheap.

Examples
--------
>>> from skattn.figures import list_figures
>>> "thresholds" in list_figures()
True
"""

from __future__ import annotations

import importlib

__all__ = ["list_figures", "render"]

# name -> one-line title; the title is also the heading of examples/plot_<name>.py
# (tests/figures/test_figures.py keeps the two equal)
_TITLES = {
    "emergence": "Emergence: target modes detach from the bulk one by one",
    "error_decomposition": "Where the excess error comes from: overfitting, underfitting, "
                           "approximation, mismatch",
    "error_vs_alpha": "Test and training error against the sample ratio α",
    "factored_vs_direct": "Factored against direct attention at the optimal weight decay, "
                          "and the Bayes limit",
    "learning_curves": "Scaling laws: learning curves on power-law targets",
    "phase_diagram": "Phase diagrams: test and training error over the (α, λ) plane",
    "spectra": "Learned spectra across α: rank collapse, bulk and recovered features",
    "training_dynamics": "Training dynamics: target modes learned one by one in time, as "
                         "they emerge in α",
    "thresholds": "Interpolation, perfect-recovery and Bayes-optimal thresholds against the "
                  "target rank",
    "validity_map": "Validity map: the Gaussian state evolution on other tokens, teachers "
                    "and students",
}


def list_figures():
    """The available figures.

    Returns
    -------
    figures : dict of str to str
        Figure name -> one-line title, sorted by name.
    """
    return dict(sorted(_TITLES.items()))


def render(name, out_dir=None, *, quick=False, log=None, close=True):
    """Compute, draw and save one gallery figure.

    Parameters
    ----------
    name : str
        A key of :func:`list_figures`, e.g. ``"error_vs_alpha"``.
    out_dir : str or path-like, optional
        Directory for the PNG(s), created if needed. When None: ``$SKATTN_FIGURE_DIR`` if
        set, else the current directory.
    quick : bool, default=False
        Smaller dimensions and grids: the same figure in seconds to a minute, noisier and
        further from the d → ∞ prediction.
    log : callable, optional
        Called with one progress message (a str) at a time, e.g. ``print``; default silent.
    close : bool, default=True
        Close the matplotlib figures after saving them. False leaves them open (the gallery
        scripts do this, so that sphinx-gallery shows them).

    Returns
    -------
    paths : list of str
        Absolute paths of the PNG files written.

    Raises
    ------
    ValueError
        If ``name`` is not a known figure (the message lists them).
    """
    if not isinstance(name, str) or name not in _TITLES:
        raise ValueError(f"name must be one of {', '.join(sorted(_TITLES))}; got {name!r}.")
    if not isinstance(quick, bool):
        raise TypeError(f"quick must be a bool, got {type(quick).__name__}.")
    if log is not None and not callable(log):
        raise TypeError(f"log must be a callable or None, got {type(log).__name__}.")
    module = importlib.import_module(f"{__name__}.{name}")
    return module.draw(out_dir, quick=quick, log=log, close=close)
