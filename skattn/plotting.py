"""Matplotlib figures for theory-versus-simulation plots (nothing else in skattn imports this).

Every ``plot_*`` function draws on a given ``ax`` (or on a new figure) and returns the axes,
so panels compose into multi-panel paper figures. Colours come from the colour-blind-safe
Okabe–Ito palette :data:`PALETTE`; :func:`paper_style` gives consistent font sizes and
:func:`save_figure` writes PNGs to ``$SKATTN_FIGURE_DIR``.

Examples
--------
>>> import numpy as np, matplotlib
>>> matplotlib.use("Agg")
>>> from skattn.plotting import plot_learning_curve
>>> n = np.array([100, 200, 400, 800])
>>> ax = plot_learning_curve(n, 2.0 * n ** -0.5, fit=(2.0, -0.5), label="simulation")
>>> ax.get_xscale()
'log'
"""

from __future__ import annotations

import contextlib
import os

import numpy as np

__all__ = ["PALETTE", "MARKERS", "paper_style", "save_figure", "plot_error_curve",
           "plot_spectrum", "plot_thresholds", "plot_learning_curve", "plot_phase_diagram",
           "plot_error_decomposition"]

#: Okabe–Ito colour-blind-safe palette (blue, vermillion, bluish green, reddish purple,
#: orange, sky blue, yellow, black).
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442",
           "#000000"]

#: Markers paired with :data:`PALETTE`, so curves stay distinguishable in greyscale.
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]

_RC = {
    "font.size": 9,
    "axes.titlesize": 9,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "lines.linewidth": 1.6,
    "lines.markersize": 4.5,
    "errorbar.capsize": 2,
    "legend.frameon": False,
    "savefig.dpi": 150,
    "savefig.bbox": "tight",
    "figure.dpi": 100,
}

_LABELS = {
    "test_error": r"test error $e_{\mathrm{test}}$",
    "train_error": r"train error $e_{\mathrm{train}}$",
    "train_objective": r"objective $\mathcal{L}/d^2$",
    "m": r"overlap $m$",
    "q": r"self-overlap $q$",
    "s_error": r"$\|\hat S - S_0\|_F^2/d$",
}


@contextlib.contextmanager
def paper_style(**overrides):
    """Context manager with compact, paper-ready matplotlib settings.

    Parameters
    ----------
    **overrides
        Extra ``rcParams`` entries; their keys contain dots, so pass them as
        ``paper_style(**{"font.size": 10})``.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> with paper_style():
    ...     fig, ax = plt.subplots()
    >>> plt.close(fig)
    """
    import matplotlib.pyplot as plt

    with plt.rc_context({**_RC, **overrides}):
        yield


def save_figure(fig, name, directory=None):
    """Save ``fig`` as ``<directory>/<name>`` (PNG unless ``name`` has a suffix).

    Parameters
    ----------
    fig : matplotlib Figure
    name : str
        File name, e.g. ``"error_vs_alpha"`` or ``"error_vs_alpha.pdf"``.
    directory : str or path-like, optional
        Defaults to ``$SKATTN_FIGURE_DIR``, else the current directory. Created if needed.

    Returns
    -------
    path : str
        Where the figure was written.
    """
    directory = directory or os.environ.get("SKATTN_FIGURE_DIR") or os.getcwd()
    os.makedirs(directory, exist_ok=True)
    if not os.path.splitext(name)[1]:
        name = name + ".png"
    path = os.path.join(directory, name)
    fig.savefig(path, dpi=150, bbox_inches="tight")
    return path


def _check_results(results, quantity):
    results = list(results)
    if not results:
        raise ValueError("results must be a non-empty list of StateEvolutionResult.")
    for r in results:
        if not (hasattr(r, "alpha") and hasattr(r, "converged")):
            raise TypeError("results must hold StateEvolutionResult objects, got "
                            f"{type(r).__name__}.")
        if not hasattr(r, quantity):
            raise ValueError(f"quantity={quantity!r} is not an attribute of the results "
                             "(e.g. 'test_error', 'train_error', 'train_objective').")
    return results


def _check_curve(name, values, size=None, positive=False):
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array, got shape {arr.shape}.")
    if size is not None and arr.size != size:
        raise ValueError(f"{name} must have {size} values (one per point), got {arr.size}.")
    if positive and np.any(arr[np.isfinite(arr)] <= 0):
        raise ValueError(f"{name} must be positive on log axes.")
    return arr


def _ax(ax, figsize=(4.2, 3.2)):
    if ax is None:
        import matplotlib.pyplot as plt
        _, ax = plt.subplots(figsize=figsize, constrained_layout=True)
    return ax


def _color(color, i=0):
    return color if color is not None else PALETTE[i % len(PALETTE)]


def plot_error_curve(results, *, quantity="test_error", simulations=None, label=None,
                     color=None, ax=None, logy=False, logx=False, sim_label=None,
                     marker="o", linestyle="-"):
    """Theory line of a state-evolution curve, with optional simulation error bars.

    Parameters
    ----------
    results : list of StateEvolutionResult
        A curve, e.g. from :func:`skattn.theory.state_evolution_curve`. Unconverged points
        are left out of the line and drawn as small hollow circles.
    quantity : str, default="test_error"
        Any scalar attribute of the results: ``"test_error"``, ``"train_error"``,
        ``"train_objective"``, ``"m"``, ``"q"``, ``"s_error"``...
    simulations : dict, optional
        ``{"alpha": [...], "mean": [...], "sem": [...]}`` of simulated values (``sem``
        optional), drawn as markers with error bars.
    label : str, optional
        Legend label of the theory line.
    color : str, optional
        Line and marker colour (default: the first colour of :data:`PALETTE`).
    ax : matplotlib Axes, optional
    logy, logx : bool, default=False
        Logarithmic axes.
    sim_label : str, optional
        Legend label of the simulation markers.
    marker : str, default="o"
        Marker of the simulation points.
    linestyle : str, default="-"
        Style of the theory line.

    Returns
    -------
    ax : matplotlib Axes
    """
    results = _check_results(results, quantity)
    ax = _ax(ax)
    color = _color(color)
    alpha = np.array([r.alpha for r in results], dtype=float)
    val = np.array([getattr(r, quantity) for r in results], dtype=float)
    ok = np.array([bool(r.converged) for r in results], dtype=bool)
    order = np.argsort(alpha)
    alpha, val, ok = alpha[order], val[order], ok[order]
    ax.plot(alpha, np.where(ok, val, np.nan), linestyle=linestyle, color=color, label=label)
    if np.any(~ok):
        ax.plot(alpha[~ok], val[~ok], "o", mfc="none", color=color, ms=3, alpha=0.7,
                label="not converged")
    if simulations is not None:
        sem = simulations.get("sem")
        ax.errorbar(np.asarray(simulations["alpha"], dtype=float),
                    np.asarray(simulations["mean"], dtype=float),
                    yerr=None if sem is None else np.asarray(sem, dtype=float),
                    fmt=marker, color=color, mfc="white", mew=1.2, capsize=2,
                    label=sim_label, zorder=3)
    ax.set_xlabel(r"$\alpha = n/d^2$")
    ax.set_ylabel(_LABELS.get(quantity, quantity.replace("_", " ")))
    if logy:
        ax.set_yscale("log")
    if logx:
        ax.set_xscale("log")
    return ax


def plot_spectrum(result, eigenvalues=None, *, bins=30, ax=None, color=None,
                  zero_tol=1e-3, label="trained $S$", show_atom=True):
    """Histogram of learned eigenvalues against the predicted law of the learned ``S``.

    The non-zero part is a density (its area is the non-zero mass, ``1 − atom``); the atom
    at zero (rank collapse) is drawn as a stem of height equal to its predicted *mass*,
    beside a bar with the empirical fraction of (numerically) zero eigenvalues.

    Parameters
    ----------
    result : StateEvolutionResult
        The prediction (its ``spectrum_density``, ``spectrum_support`` and ``atom_mass``).
    eigenvalues : array-like, optional
        Eigenvalues of a learned ``S_`` (e.g. ``np.linalg.eigvalsh(model.S_)``).
    bins : int, default=30
    ax : matplotlib Axes, optional
    color : str, optional
        Colour of the theory curve (default: vermillion).
    zero_tol : float, default=1e-3
        Eigenvalues below ``zero_tol × max eigenvalue`` count as zero.
    label : str, default="trained $S$"
        Legend label of the histogram.
    show_atom : bool, default=True
        Draw the atom at zero.

    Returns
    -------
    ax : matplotlib Axes
    """
    if not (hasattr(result, "spectrum_density") and hasattr(result, "atom_mass")):
        raise TypeError(f"result must be a StateEvolutionResult, got {type(result).__name__}.")
    if eigenvalues is not None:
        eigenvalues = np.asarray(eigenvalues, dtype=float)
        if eigenvalues.ndim != 1 or not np.all(np.isfinite(eigenvalues)):
            raise ValueError("eigenvalues must be a 1-D array of finite numbers, got shape "
                             f"{eigenvalues.shape}.")
    ax = _ax(ax)
    color = _color(color, 1)
    hist_color = PALETTE[5]
    atom = float(result.atom_mass) if show_atom else 0.0
    support = result.spectrum_support()
    hi = max((b for _, b in support), default=0.0)
    emp_zero = None
    if eigenvalues is not None:
        eig = np.asarray(eigenvalues, dtype=float).ravel()
        hi = max(hi, float(eig.max(initial=0.0)))
    hi = hi if hi > 0 else 1.0
    hist_max = 0.0
    if eigenvalues is not None and eig.size:
        cut = zero_tol * hi
        nz = eig[eig > cut]
        emp_zero = float(np.mean(eig <= cut))
        if nz.size:
            width = hi * 1.05 / bins
            heights, _, _ = ax.hist(nz, bins=bins, range=(0, hi * 1.05),
                                    weights=np.full(nz.size, 1.0 / (eig.size * width)),
                                    color=hist_color, alpha=0.55, label=label)
            hist_max = float(np.max(heights))
    s = np.linspace(hi * 1e-4, hi * 1.05, 800)
    dens = np.nan_to_num(np.asarray(result.spectrum_density(s), dtype=float))
    ax.plot(s, dens, "-", color=color, label="theory")
    # a narrow peak of the density next to the atom (the part of the noise bulk just
    # above the threshold) can dwarf the rest: clip it and say so
    away = s > 0.05 * hi
    top = max(hist_max, atom, emp_zero or 0.0,
              float(dens[away].max()) if np.any(away) else 0.0, 1e-12)
    if dens.max() > 1.6 * top:
        i = int(np.argmax(dens))
        ax.set_ylim(0, 1.2 * top)
        ax.annotate(f"peak {dens[i]:.2g}", xy=(s[i], 1.2 * top), xytext=(s[i] + 0.06 * hi,
                    1.08 * top), fontsize=7, color=color,
                    arrowprops=dict(arrowstyle="->", color=color, lw=0.8))
    else:
        ax.set_ylim(0, 1.1 * max(top, float(dens.max())))
    if show_atom and (atom > 0 or (emp_zero or 0) > 0):
        w = hi / 40
        if emp_zero is not None and emp_zero > 0:
            ax.bar([-w / 2], [emp_zero], width=w, color="none", edgecolor=hist_color, lw=1.5,
                   label=f"zero fraction {emp_zero:.2f}")
        if atom > 0:
            ax.vlines(0.0, 0.0, atom, color=color, lw=2.0)
            ax.plot([0.0], [atom], "v", color=color, ms=6,
                    label=f"atom at 0 (theory) {atom:.2f}")
    ax.set_xlim(-hi * 0.04, hi * 1.06)
    ax.set_xlabel("eigenvalue of $S$")
    ax.set_ylabel("density (atom: mass)")
    ax.legend(fontsize=7, loc="upper right")
    return ax


def plot_thresholds(kappas, curves, *, ax=None, logy=False, xlabel=None, ylabel=None):
    """Threshold curves (e.g. α_interp, α_BO) against the target rank ratio κ0.

    Parameters
    ----------
    kappas : array-like
        The κ0 values (x axis).
    curves : dict of str to array-like
        Label → values, e.g. ``{"α_interp (T=2)": [...], "α_BO (T=2)": [...]}``.
    ax : matplotlib Axes, optional
    logy : bool, default=False
    xlabel, ylabel : str, optional
        Override the axis labels.

    Returns
    -------
    ax : matplotlib Axes
    """
    kappas = _check_curve("kappas", kappas)
    for label, vals in curves.items():
        _check_curve(f"curves[{label!r}]", vals, size=kappas.size)
    ax = _ax(ax)
    styles = ["-", "--", ":", "-."]
    for i, (label, vals) in enumerate(curves.items()):
        ax.plot(kappas, vals, styles[(i // len(PALETTE)) % len(styles)],
                color=PALETTE[i % len(PALETTE)], label=label)
    ax.set_xlabel(xlabel or r"target rank ratio $\kappa_0 = p_0/d$")
    ax.set_ylabel(ylabel or r"threshold $\alpha$")
    if logy:
        ax.set_yscale("log")
    ax.legend(fontsize=8)
    return ax


def plot_learning_curve(n, err, *, fit=None, theory=None, ax=None, label=None, color=None,
                        sem=None, marker="o", xlabel="$n$",
                        ylabel=r"excess risk $e_{\mathrm{test}} - e_0$"):
    """Excess risk against n on log–log axes, with an optional power-law fit.

    Parameters
    ----------
    n, err : array-like
        Sample sizes and (mean) excess risks.
    fit : tuple (C, exponent), optional
        Draws ``C n^exponent`` dashed, labelled with its slope.
    theory : tuple (n, err), optional
        A theory curve drawn as a line.
    ax : matplotlib Axes, optional
    label, color : str, optional
    sem : array-like, optional
        Error bars on ``err``.
    marker : str, default="o"
    xlabel, ylabel : str

    Returns
    -------
    ax : matplotlib Axes
    """
    n = _check_curve("n", n, positive=True)
    err = _check_curve("err", err, size=n.size)  # non-positive values are masked by log axes
    ax = _ax(ax)
    color = _color(color)
    ax.errorbar(n, err, yerr=sem, fmt=marker, color=color, label=label, mfc="white",
                mew=1.2)
    if theory is not None:
        ax.plot(theory[0], theory[1], "-", color=color, alpha=0.8)
    if fit is not None:
        c, expo = fit
        nn = np.geomspace(np.min(n), np.max(n), 50)
        ax.plot(nn, c * nn ** expo, "--", color=color, lw=1.0, label=f"slope {expo:.2f}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if label is not None or fit is not None:
        ax.legend(fontsize=8)
    return ax


def plot_phase_diagram(x, y, regimes, *, labels=None, ax=None, xlabel=None, ylabel=None,
                       annotate=True):
    """Categorical phase diagram: which regime holds at each point of a 2-D grid.

    Parameters
    ----------
    x : array-like of shape (nx,)
        Grid along the horizontal axis (e.g. ``log n / log d``).
    y : array-like of shape (ny,)
        Grid along the vertical axis (e.g. ``log λ / log d``).
    regimes : array-like of int, shape (ny, nx)
        Regime index at each grid point (negative: undefined, left blank).
    labels : list of str, optional
        Name of each regime index (e.g. the scaling law that holds there).
    ax : matplotlib Axes, optional
    xlabel, ylabel : str, optional
    annotate : bool, default=True
        Write each regime's label at the centre of its region.

    Returns
    -------
    ax : matplotlib Axes
    """
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    ax = _ax(ax)
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    reg = np.asarray(regimes)
    if reg.shape != (y.size, x.size):
        raise ValueError(f"regimes must have shape (len(y), len(x)) = {(y.size, x.size)}, "
                         f"got {reg.shape}.")
    k = int(reg.max()) + 1 if reg.size else 1
    labels = list(labels) if labels is not None else [f"regime {i}" for i in range(k)]
    k = max(k, len(labels))
    cmap = ListedColormap([PALETTE[i % len(PALETTE)] for i in range(k)])
    masked = np.ma.masked_less(reg.astype(float), 0)
    ax.pcolormesh(x, y, masked, cmap=cmap, vmin=-0.5, vmax=k - 0.5, shading="nearest",
                  alpha=0.45, linewidth=0, rasterized=True)
    handles = []
    for i in range(k):
        where = np.argwhere(reg == i)
        if where.size == 0:
            continue
        handles.append(Patch(color=PALETTE[i % len(PALETTE)], alpha=0.45,
                             label=labels[i] if i < len(labels) else f"regime {i}"))
        if annotate and i < len(labels):
            cy, cx = where.mean(axis=0)
            ax.text(np.interp(cx, np.arange(x.size), x), np.interp(cy, np.arange(y.size), y),
                    labels[i], ha="center", va="center", fontsize=8)
    ax.set_xlabel(xlabel or r"$\log n / \log d$")
    ax.set_ylabel(ylabel or r"$\log \lambda / \log d$")
    if not annotate and handles:
        ax.legend(handles=handles, fontsize=7)
    return ax


def plot_error_decomposition(x, components, *, total=None, ax=None, logx=False,
                             xlabel=r"$\alpha = n/d^2$", ylabel="excess test error"):
    """Stacked areas of the parts of an error (e.g. overfitting, underfitting...).

    Parameters
    ----------
    x : array-like of shape (n,)
    components : dict of str to array-like of shape (n,)
        Label → non-negative contribution.
    total : array-like of shape (n,), optional
        The total error, drawn as a black line (it need not equal the stacked sum).
    ax : matplotlib Axes, optional
    logx : bool, default=False
    xlabel, ylabel : str

    Returns
    -------
    ax : matplotlib Axes
    """
    ax = _ax(ax)
    x = np.asarray(x, dtype=float)
    vals = [np.clip(np.asarray(v, dtype=float), 0, None) for v in components.values()]
    ax.stackplot(x, *vals, labels=list(components),
                 colors=[PALETTE[i % len(PALETTE)] for i in range(len(vals))], alpha=0.6)
    if total is not None:
        ax.plot(x, np.asarray(total, dtype=float), "-", color=PALETTE[7], label="total")
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)
    return ax


# ========================================================================================
# Power-law targets: emergence of outliers (docs: Theory §8; skattn.theory.powerlaw)
# ========================================================================================

__all__ += ["plot_emergence"]


def plot_emergence(n_samples, recoveries, *, trained=None, n_modes=8, ax=None,
                   show_targets=True, logy=False, xlabel="$n$",
                   ylabel="eigenvalue of $S$"):
    """Learned spectrum against n: outliers detaching from the bulk one by one.

    For each n the theory (a :class:`~skattn.theory.powerlaw.SpectralRecovery`) gives the
    learned bulk ``[0, η (bulk_edge − ε)₊]`` (shaded) and, for each recovered target mode,
    the learned outlier eigenvalue ``η (position − ε)`` (one line per mode, starting where
    the mode emerges). Dotted lines mark the target eigenvalues λ_i the outliers approach.

    Parameters
    ----------
    n_samples : array-like of shape (k,)
        Sample sizes of the theory points.
    recoveries : list of SpectralRecovery, length k
        From :func:`skattn.theory.powerlaw.recovered_modes`.
    trained : dict, optional
        ``{"n": [...], "eigenvalues": [array, ...]}``: spectra of trained ``S_`` (e.g.
        Adam), drawn as points (their top ``n_modes + 3`` eigenvalues).
    n_modes : int, default=8
        Number of top target modes drawn.
    ax : matplotlib Axes, optional
    show_targets : bool, default=True
    logy : bool, default=False
        Logarithmic eigenvalue axis (the bulk band is then drawn from its lowest edge).
    xlabel, ylabel : str

    Returns
    -------
    ax : matplotlib Axes
    """
    ax = _ax(ax, figsize=(4.6, 3.4))
    n = np.asarray(n_samples, dtype=float)
    if len(recoveries) != n.size:
        raise ValueError(f"recoveries must have one entry per n: got {len(recoveries)} "
                         f"for {n.size} values of n_samples.")
    order = np.argsort(n)
    n = n[order]
    recs = [recoveries[i] for i in order]
    edge = np.array([r.learned_bulk_edge for r in recs])
    pos = edge[edge > 0]
    floor = float(pos.min()) / 10 if logy and pos.size else 0.0
    ax.fill_between(n, floor, np.maximum(edge, floor), color="0.75", alpha=0.6, lw=0,
                    label="learned bulk")
    ax.plot(n, edge, "-", color="0.45", lw=1.0)
    lam = recs[0].target_eigenvalues
    n_modes = int(min(n_modes, lam.size))
    for i in range(n_modes):
        c = PALETTE[i % len(PALETTE)]
        vals = np.array([r.learned_eigenvalues[i] if r.recovered[i] else np.nan
                         for r in recs])
        ax.plot(n, vals, "-", color=c, lw=1.4, label=f"mode {i + 1}" if i < 4 else None)
        if show_targets:
            ax.axhline(lam[i], color=c, ls=":", lw=0.8)
    if trained is not None:
        k = n_modes + 3
        for j, (nn, ev) in enumerate(zip(trained["n"], trained["eigenvalues"])):
            ev = np.sort(np.asarray(ev, dtype=float))[::-1][:k]
            ax.plot(np.full(ev.size, nn), ev, MARKERS[0], color=PALETTE[7], mfc="white",
                    mew=1.0, ms=4, label="trained $S$" if j == 0 else None)
    ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7, loc="upper left")
    return ax
