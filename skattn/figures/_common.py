"""Helpers shared by the gallery figures: output directory, saving, closing, logging."""

from __future__ import annotations

import os

#: Resolution of the saved PNGs: sharp on screen, small enough to commit.
DPI = 110


def figure_dir(out_dir=None):
    """The directory a figure is written to, created if needed.

    Parameters
    ----------
    out_dir : str or path-like, optional
        Explicit directory. When None: ``$SKATTN_FIGURE_DIR`` if set, else the current
        directory.

    Returns
    -------
    directory : str
        Absolute path of the (existing) directory.
    """
    if out_dir is None:
        out_dir = os.environ.get("SKATTN_FIGURE_DIR") or os.getcwd()
    if not isinstance(out_dir, (str, os.PathLike)):
        raise TypeError(f"out_dir must be a str or path-like, got {type(out_dir).__name__}.")
    out_dir = os.path.abspath(os.fspath(out_dir))
    os.makedirs(out_dir, exist_ok=True)
    return out_dir


def save(fig, name, out_dir, *, close):
    """Write ``fig`` to ``<out_dir>/<name>.png`` and return the path.

    ``close=False`` leaves the figure open, for sphinx-gallery to pick it up.
    """
    path = os.path.join(out_dir, name + ".png")
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    if close:
        import matplotlib.pyplot as plt

        plt.close(fig)
    return path


def silent(*args, **kwargs):
    """The default progress logger: prints nothing."""


_DRAW_PARAMETERS = """
    Parameters
    ----------
    out_dir : str or path-like, optional
        Output directory (default: ``$SKATTN_FIGURE_DIR``, else the current directory).
    quick : bool, default=False
        {quick}
    log : callable, optional
        {log}
    close : bool, default=True
        Close the {figure} after saving (False keeps {it} open for sphinx-gallery).

    Returns
    -------
    paths : list of str
        The PNG files written.
    """


def draw_parameters(quick, *, several=False,
                    log="Called with progress messages (default: silent)."):
    """Decorator appending the Parameters/Returns section every figure's ``draw`` shares.

    Every gallery figure has the signature ``draw(out_dir=None, *, quick=False, log=None,
    close=True)``; what ``quick`` changes differs, and ``several`` says the function
    draws more than one figure.
    """
    def decorate(func):
        func.__doc__ = (func.__doc__ or "").rstrip() + "\n" + _DRAW_PARAMETERS.format(
            quick=quick, log=log, figure="figures" if several else "figure",
            it="them" if several else "it")
        return func
    return decorate
