"""Rows of results (dicts) as text: aligned tables, CSV and JSON.

Used by the ``skattn`` command line and by :func:`skattn.demo.run_demo`. Missing
values print as ``-`` in tables and as empty cells (CSV) or ``null`` (JSON); non-finite
floats become ``nan`` in tables and ``null`` in JSON, never a silent number.
"""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np

__all__ = ["FORMATS", "to_jsonable", "format_cell", "format_table", "format_rows"]

FORMATS = ("table", "csv", "json")


def to_jsonable(value):
    """A result value as a plain Python value JSON can hold.

    Parameters
    ----------
    value : object
        Usually a number, bool, str or None (numpy scalars included).

    Returns
    -------
    object
        numpy bools and integers as Python ones, floats as ``float`` (``None`` when not
        finite, since JSON has no NaN); anything else unchanged.
    """
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None
    return value


def format_cell(value, precision=4):
    """One table cell: ``-`` for None, ``yes``/``NO`` for bools, floats to ``precision``.

    Parameters
    ----------
    value : object
    precision : int, default=4
        Significant digits of floats.

    Returns
    -------
    str
    """
    if value is None:
        return "-"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "NO"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if not math.isfinite(value):
            return "nan"
        return f"{value:.{precision}g}"
    return str(value)


def format_table(rows, columns, *, headers=None):
    """Rows as an aligned plain-text table (right-aligned columns, a rule under the header).

    Parameters
    ----------
    rows : list of dict
        A missing key prints as ``-``.
    columns : list of str
        The keys to show, in order.
    headers : list of str, optional
        Column titles (default: ``columns``); same length as ``columns``.

    Returns
    -------
    str
        The table, ending with a newline.

    Raises
    ------
    ValueError
        If ``headers`` and ``columns`` differ in length.
    """
    headers = list(headers) if headers is not None else list(columns)
    if len(headers) != len(columns):
        raise ValueError(f"headers must have one title per column ({len(columns)}), got "
                         f"{len(headers)}.")
    cells = [[format_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
    return "\n".join(lines) + "\n"


def format_rows(rows, columns, fmt="table"):
    """Rows as a table, CSV or JSON text.

    Parameters
    ----------
    rows : list of dict
    columns : list of str
        The keys to write, in order.
    fmt : {"table", "csv", "json"}, default="table"
        CSV writes floats with ``repr`` (round-trip exact) and missing or non-finite
        values as empty cells; JSON writes them as ``null``.

    Returns
    -------
    str

    Raises
    ------
    ValueError
        If ``fmt`` is not one of :data:`FORMATS`.
    """
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of {', '.join(map(repr, FORMATS))}, got {fmt!r}.")
    if fmt == "json":
        return json.dumps([{c: to_jsonable(r.get(c)) for c in columns} for r in rows],
                          indent=2) + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(columns)
        for r in rows:
            values = []
            for c in columns:
                v = to_jsonable(r.get(c))
                values.append("" if v is None else (repr(v) if isinstance(v, float) else v))
            writer.writerow(values)
        return buf.getvalue()
    return format_table(rows, columns)
