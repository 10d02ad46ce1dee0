"""What a state-evolution solve reports while it runs (``SolverOptions.verbose``).

A solve is a loop that stops when it converges, so it follows the package's ``verbose``
convention for such loops (``skattn/_progress.py``): at ``verbose=1`` a progress bar with
no total (the evaluations done, the elapsed time, the last residual and what kind of
evaluation it was), at ``verbose=2`` also one line per evaluation of the fixed-point map
and one for the result. Where a solve is slow, the lines show which stage takes the time:
many cheap evaluations on the coarse nodes, multi-start evaluations creeping at a
residual of 1e-2 (a *ghost*, docs: Validation report), or one certified evaluation of
many seconds (docs: Theory, "Certificate").
"""

from __future__ import annotations

import time

import numpy as np

from ..._progress import finish_progress, iteration_bar, log_step

__all__ = ["SolveReport"]


class SolveReport:
    """The progress of one solve: a bar and, at ``verbose >= 2``, a line per evaluation.

    Attach it to each :class:`~skattn.theory.core.fixed_point_map.FixedPointMap` of the
    solve (its ``report`` attribute); every evaluation of those maps then calls
    :meth:`evaluation`. Reporting reads the evaluations' results and changes none of them.

    Parameters
    ----------
    verbose : int
        0: silent (every method returns at once); 1: the bar; 2: the bar and the lines.
    desc : str, default="state evolution"
        The bar's and the lines' prefix.
    """

    def __init__(self, verbose, desc="state evolution"):
        self.verbose = int(verbose)
        self.desc = desc
        self.n_evaluations = 0
        self.start = time.perf_counter()
        self._bar = iteration_bar(self.verbose, desc, leave=True, dynamic_ncols=True) \
            if self.verbose else None

    def evaluation(self, fixed_point_map, state, prior, certify, seconds):
        """Report one evaluation of ``fixed_point_map`` at ``state`` = (m, q, Σ[, t]),
        whose prior side returned ``prior`` (``certify``: a certified evaluation), that
        took ``seconds``."""
        if not self.verbose:
            return
        self.n_evaluations += 1
        kind = "certified" if certify else "warm" if fixed_point_map.warm else \
            "memory" if fixed_point_map.multistart_memory else "multi-start"
        nodes = fixed_point_map.nodes.n_points
        try:
            with np.errstate(all="ignore"):
                # max |G(x) − x| in the map's variables, as the iteration sees it
                new = fixed_point_map.to_x(*fixed_point_map.state(prior))
                residual = float(np.max(np.abs(new - fixed_point_map.to_x(*state))))
        except (TypeError, ValueError):     # a state without its trace t: nothing to show
            residual = float("nan")
        self._bar.update(1)
        self._bar.set_postfix_str(f"|r|={residual:.1e}, {kind}, {nodes} nodes", refresh=False)
        m, q, sigma = state[:3]
        log_step(self.verbose,
                 f"{self.desc} evaluation {self.n_evaluations} ({nodes} nodes, {kind}"
                 f"{', orthogonal variables' if fixed_point_map.orthogonal else ''}): "
                 f"m={m:.6g} q={q:.6g} Σ={sigma:.6g} |r|={residual:.2e}, {seconds:.2f} s")

    def close(self, result=None):
        """Close the bar; at ``verbose >= 2`` a last line with ``result`` (a
        :class:`~skattn.theory.result.StateEvolutionResult`, or None where the solve
        failed)."""
        if not self.verbose:
            return
        finish_progress(self._bar, completed=result is not None and result.converged)
        elapsed = time.perf_counter() - self.start
        if result is None:
            log_step(self.verbose, f"{self.desc}: stopped after {self.n_evaluations} "
                                   f"evaluations, {elapsed:.1f} s")
            return
        log_step(self.verbose,
                 f"{self.desc}: {result.message}; {self.n_evaluations} evaluations in "
                 f"{elapsed:.1f} s, {100 * result.certified_fraction:.2f} % of the nodes "
                 f"certified")
