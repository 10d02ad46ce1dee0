"""The progress reporting of skattn, public for the runners and the CLI.

The ``verbose`` convention and the helpers are documented in :mod:`skattn._progress`:
bars with a total over loops of known length, bars with no total over loops that stop
when they converge, and :func:`ticker`, the elapsed time of one long call.
"""

from ._progress import finish_progress, iteration_bar, log_step, progress_bar, ticker

__all__ = ["progress_bar", "iteration_bar", "finish_progress", "log_step", "ticker"]
