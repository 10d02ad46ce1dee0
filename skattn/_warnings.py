"""One warning helper: every warning of skattn points at the user's line.

``warnings.warn(..., stacklevel=k)`` needs the right k at every call site, and k changes
whenever a helper is inserted between the user and the warning (the same DomainWarning
was reported inside ``skattn/theory/fixed_point.py`` from one entry point and inside
``state_evolution.py`` from another). :func:`warn` instead walks out of the package's own
frames and attributes the warning to the first frame outside ``skattn/``: the user's
script, test or notebook cell (or the library, e.g. scikit-learn, that called skattn).
"""

from __future__ import annotations

import os
import sys
import warnings

__all__ = ["warn", "external_stacklevel"]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _in_package(frame):
    filename = frame.f_code.co_filename
    if filename.startswith("<"):  # <string>, <stdin>, <ipython-input-…>: the user's
        return False
    return os.path.abspath(filename).startswith(_PACKAGE_DIR)


def external_stacklevel(skip=1):
    """The ``stacklevel`` that ``warnings.warn`` needs, called ``skip`` frames below here,
    to name the first frame outside the skattn package.

    Parameters
    ----------
    skip : int, default=1
        Which frame calls ``warnings.warn``, counted from this function: 1, its caller.

    Returns
    -------
    stacklevel : int
        At least 1; the outermost frame if every frame is inside the package (the
        ``skattn`` console script run as ``python -m skattn``).
    """
    frame = sys._getframe(skip)  # the frame that calls warnings.warn: stacklevel 1
    level = 1
    while frame.f_back is not None and _in_package(frame):
        frame = frame.f_back
        level += 1
    return level


def warn(message, category=UserWarning):
    """``warnings.warn(message, category)`` attributed to the first frame outside skattn.

    Parameters
    ----------
    message : str
    category : type of Warning, default=UserWarning
    """
    # this frame calls warnings.warn (stacklevel 1); it lies in the package, so the walk
    # moves on to its caller and out
    warnings.warn(message, category, stacklevel=external_stacklevel(1))
