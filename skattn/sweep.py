"""Resumable parameter sweeps on joblib or dask.distributed.

:func:`run_sweep` evaluates a function on every row of a parameter grid and writes each
finished row to disk at once, from the parent process only (a single writer), so that

* killing the sweep at any moment loses no finished row and leaves no corrupt one;
* rerunning the same sweep skips the rows already finished (rows that raised are retried);
* the rows can run locally (``backend="sequential"`` or ``"joblib"``) or on a
  dask.distributed cluster (``backend="dask"``) with the same output.

:func:`read_sweep` reads such an output back, with no dependency beyond the standard
library (CSV) or pyarrow (Parquet).

Storage format
--------------
Every record has the same six fields, whatever the grid and the function return:

``key``
    The row key, :func:`row_key` of the parameters (a hash of their sorted JSON form).
``status``
    ``"ok"`` or ``"error"``.
``error``
    ``"ExceptionType: message"`` for a failed row (newlines written as ``\\n``), empty
    otherwise.
``wall_time``
    Seconds spent in ``func`` (float).
``params``
    The parameters as a JSON object.
``results``
    What ``func`` returned, as a JSON object (empty for a failed row).

Parameters and results are stored as JSON columns rather than one column each, so the
header never changes: a later row may return new result keys, or a later sweep in the
same file may add parameters, and both still round-trip exactly (ints stay ints, floats
floats, bools bools, ``None`` stays ``None``). :func:`read_sweep` flattens them back into
one dict per row.

* **CSV** (``output`` ending in ``.csv``): one header line, then one line per finished
  row, appended with a single ``os.write`` of the whole encoded line followed by
  ``os.fsync``. JSON escapes every control character and error messages have their
  newlines escaped, so one record is always exactly one physical line. A last line
  without its newline (a write interrupted by a crash) and any line with the wrong field
  count or an inconsistent key are ignored on reading (with a :class:`RuntimeWarning`);
  the next :func:`run_sweep` on the file cuts such a partial last line off before it
  appends.
* **Parquet** (``output`` ending in ``.parquet``, needs pyarrow): ``output`` is a
  directory holding one small file ``<key>.parquet`` per row, written to a hidden temporary
  file, fsynced and moved into place with ``os.replace``, so a row file is either absent
  or complete. The directory is also a valid Parquet dataset for other tools
  (``pyarrow.dataset`` and pandas skip the hidden temporary and lock files).

The CSV file keeps every attempt (a failed row and its successful retry are two lines);
the Parquet directory keeps the latest attempt only. :func:`read_sweep` returns the
latest attempt of each row in both cases.

A sweep takes an advisory lock (``fcntl.flock``, where available) on its output for its
whole run: two sweeps writing the same output at the same time raise an error instead of
interleaving their rows.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import numbers
import os
import pathlib
import time
import uuid
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from .parallel import check_backend, map_jobs

try:  # POSIX only; elsewhere the single-writer rule is documented, not enforced
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

__all__ = ["SweepResult", "run_sweep", "read_sweep", "row_key"]

_FIELDS = ("key", "status", "error", "wall_time", "params", "results")
_HEADER = ",".join(_FIELDS)
_HEADER_BYTES = (_HEADER + "\n").encode("ascii")
_RESERVED = frozenset(("key", "status", "error", "wall_time"))
_STATUSES = ("ok", "error")
_SUFFIXES = (".csv", ".parquet")


# --------------------------------------------------------------------------------------
# Values, keys and records
# --------------------------------------------------------------------------------------

def _to_json_value(value, where, *, scalar_only=False):
    """Return ``value`` as plain JSON-serialisable Python data, or raise ``ValueError``.

    numpy scalars and 0-d arrays become Python scalars; with ``scalar_only=False``, lists,
    tuples, arrays and str-keyed dicts are converted recursively (tuples become lists).
    """
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if not scalar_only:
        if isinstance(value, (list, tuple, np.ndarray)):
            return [_to_json_value(v, where) for v in value]
        if isinstance(value, Mapping):
            out = {}
            for k, v in value.items():
                if not isinstance(k, str):
                    raise ValueError(f"{where} has a dict with a non-str key {k!r}.")
                out[k] = _to_json_value(v, where)
            return out
        kind = "a JSON-serialisable value (number, str, bool, None, or lists/dicts of them)"
    else:
        kind = "a scalar (number, str, bool or None)"
    raise ValueError(f"{where} must be {kind}, got {type(value).__name__} ({value!r}).")


def _dumps(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=True)


def row_key(params):
    """Stable key of one row of parameters.

    Parameters
    ----------
    params : dict
        Parameter name to value (JSON-serialisable after converting numpy scalars).

    Returns
    -------
    key : str
        The first 20 hex digits of the SHA-256 of the parameters serialised as JSON with
        sorted keys. The key depends on the parameter names, values and their JSON types
        (``1`` and ``1.0`` give different keys), not on the order of the parameters nor on
        the function that evaluates them.

    Examples
    --------
    >>> row_key({"alpha": 0.5, "seed": 1}) == row_key({"seed": 1, "alpha": 0.5})
    True
    """
    params = {str(k): _to_json_value(v, f"parameter {k!r}") for k, v in params.items()}
    return hashlib.sha256(_dumps(params).encode("utf-8")).hexdigest()[:20]


def _one_line(text):
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\\n")


def _error_record(key, params, exc, wall_time):
    return {
        "key": key,
        "status": "error",
        "error": _one_line(f"{type(exc).__name__}: {exc}"),
        "wall_time": float(wall_time),
        "params": params,
        "results": {},
    }


def _run_one(func, key, params):
    """Evaluate ``func(**params)`` and return a record; never raises an ``Exception``."""
    start = time.perf_counter()
    try:
        out = func(**params)
        wall_time = time.perf_counter() - start
        if not isinstance(out, Mapping):
            raise TypeError(f"func must return a dict of scalar results, got {type(out).__name__}.")
        results = {}
        for name, value in out.items():
            if not isinstance(name, str):
                raise TypeError(f"func returned a non-str result name {name!r}.")
            if name in _RESERVED or name in params:
                raise ValueError(
                    f"func returned a result named {name!r}, which clashes with "
                    + ("a reserved column." if name in _RESERVED else "a parameter.")
                )
            results[name] = _to_json_value(value, f"result {name!r}", scalar_only=True)
    except Exception as exc:  # recorded in the output, retried on resume
        return _error_record(key, params, exc, time.perf_counter() - start)
    return {"key": key, "status": "ok", "error": None, "wall_time": float(wall_time),
            "params": params, "results": results}


def _record_from_fields(fields):
    """Parse and check the six stored fields of a record; raise ``ValueError`` if corrupt."""
    if len(fields) != len(_FIELDS):
        raise ValueError(f"expected {len(_FIELDS)} fields, got {len(fields)}")
    key, status, error, wall_time, params, results = fields
    if status not in _STATUSES:
        raise ValueError(f"unknown status {status!r}")
    params = json.loads(params)
    results = json.loads(results)
    if not isinstance(params, dict) or not isinstance(results, dict):
        raise ValueError("params and results must be JSON objects")
    if row_key(params) != key:
        raise ValueError("key does not match the parameters")
    wall_time = float(wall_time)
    return {"key": key, "status": status, "error": error or None, "wall_time": wall_time,
            "params": params, "results": results}


def _flatten(record):
    row = dict(record["params"])
    row.update(record["results"])
    row["status"] = record["status"]
    row["error"] = record["error"]
    row["wall_time"] = record["wall_time"]
    row["key"] = record["key"]
    return row


def _latest(records):
    """Latest record of each key, in order of first appearance."""
    latest = {}
    for rec in records:
        latest[rec["key"]] = rec  # dict keeps the first insertion position
    return latest


# --------------------------------------------------------------------------------------
# Storage
# --------------------------------------------------------------------------------------

def _check_output(output):
    if not isinstance(output, (str, os.PathLike)):
        raise ValueError(f"output must be a path, got {type(output).__name__}.")
    path = pathlib.Path(output)
    suffix = path.suffix.lower()
    if suffix not in _SUFFIXES:
        raise ValueError(
            f"output must end in one of {', '.join(_SUFFIXES)} (CSV file or Parquet "
            f"directory), got {str(output)!r}."
        )
    return path, suffix


def _lock(fd, path):
    if fcntl is None:  # pragma: no cover
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise RuntimeError(
            f"output {str(path)!r} is locked by another running sweep; a sweep output has "
            "a single writer."
        ) from None
    except OSError:  # pragma: no cover - e.g. a file system without locks
        pass


def _fsync_dir(path):
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. Windows
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _warn_corrupt(path, where, why):
    warnings.warn(f"sweep output {str(path)!r}: ignored {where} ({why}).", RuntimeWarning,
                  stacklevel=4)


def _parse_csv(data, path):
    """Return ``(records, n_complete_bytes)`` for the bytes of a CSV sweep file."""
    if not data:
        return [], 0
    end = data.rfind(b"\n") + 1  # bytes up to and including the last newline
    if end == 0:
        if not _HEADER_BYTES.startswith(data):
            raise ValueError(f"output {str(path)!r} exists and is not a skattn sweep file.")
        return [], 0  # a header cut by a crash before any row was finished
    lines = data[:end].split(b"\n")[:-1]
    if lines[0] + b"\n" != _HEADER_BYTES:
        raise ValueError(
            f"output {str(path)!r} exists and is not a skattn sweep file: its header is "
            f"{lines[0][:200]!r}, expected {_HEADER!r}."
        )
    if end < len(data):
        _warn_corrupt(path, "a truncated last line", "an interrupted write")
    records = []
    for lineno, raw in enumerate(lines[1:], start=2):
        try:
            fields = next(csv.reader([raw.decode("utf-8")]))
            records.append(_record_from_fields(fields))
        except (ValueError, StopIteration, csv.Error) as exc:  # UnicodeDecodeError, JSON
            _warn_corrupt(path, f"line {lineno}", exc)
    return records, end


class _CsvStore:
    """Append-only CSV file: one ``os.write`` + ``os.fsync`` per record."""

    def __init__(self, path):
        self.path = path
        if path.exists() and not path.is_file():
            raise ValueError(f"output {str(path)!r} exists and is not a file.")
        path.parent.mkdir(parents=True, exist_ok=True)
        created = not path.exists()
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        _lock(self.fd, path)
        try:
            with os.fdopen(os.dup(self.fd), "rb") as fh:
                data = fh.read()
            self.records, end = _parse_csv(data, path)
            if end < len(data):  # cut off a partial last line before appending
                os.ftruncate(self.fd, end)
                os.fsync(self.fd)
            self.empty = end == 0
        except BaseException:
            os.close(self.fd)
            raise
        if created:
            _fsync_dir(path.parent)

    def write(self, record):
        fields = [record["key"], record["status"], record["error"] or "",
                  repr(float(record["wall_time"])), _dumps(record["params"]),
                  _dumps(record["results"])]
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerow(fields)
        line = buf.getvalue().encode("utf-8")
        assert line.count(b"\n") == 1, "a record must be one line"
        if self.empty:
            line = _HEADER_BYTES + line
        view = memoryview(line)
        while view:
            view = view[os.write(self.fd, view):]
        os.fsync(self.fd)
        self.empty = False

    def close(self):
        os.close(self.fd)


def _import_pyarrow():
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError as exc:
        raise ImportError(
            "Parquet sweep output needs pyarrow: `pip install pyarrow`, or use an output "
            "ending in .csv."
        ) from exc
    return pyarrow, pyarrow.parquet


def _parquet_files(path):
    files = [p for p in path.iterdir()
             if p.suffix == ".parquet" and not p.name.startswith((".", "_")) and p.is_file()]
    files.sort(key=lambda p: (p.stat().st_mtime_ns, p.name))
    return files


def _read_parquet_dir(path):
    _, pq = _import_pyarrow()
    records = []
    for file in _parquet_files(path):
        try:
            rows = pq.read_table(file).to_pylist()
            if len(rows) != 1:
                raise ValueError(f"expected one row, got {len(rows)}")
            row = rows[0]
            records.append(_record_from_fields([row.get(name) for name in _FIELDS]))
        except Exception as exc:  # anything unreadable is not one of our rows
            _warn_corrupt(path, f"file {file.name!r}", exc)
    return records


class _ParquetStore:
    """Directory of one-row Parquet files, each written atomically."""

    def __init__(self, path):
        self.pa, self.pq = _import_pyarrow()
        self.path = path
        if path.exists() and not path.is_dir():
            raise ValueError(
                f"output {str(path)!r} exists and is not a directory (Parquet sweep output "
                "is a directory of one-row files)."
            )
        path.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(path / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        _lock(self.fd, path)
        for stale in path.glob(".*.tmp"):  # left by a killed writer
            stale.unlink(missing_ok=True)
        self.records = _read_parquet_dir(path)
        self.schema = self.pa.schema([
            ("key", self.pa.string()), ("status", self.pa.string()),
            ("error", self.pa.string()), ("wall_time", self.pa.float64()),
            ("params", self.pa.string()), ("results", self.pa.string()),
        ])

    def write(self, record):
        values = {"key": record["key"], "status": record["status"],
                  "error": record["error"], "wall_time": float(record["wall_time"]),
                  "params": _dumps(record["params"]), "results": _dumps(record["results"])}
        table = self.pa.table({k: [v] for k, v in values.items()}, schema=self.schema)
        tmp = self.path / f".{record['key']}.{uuid.uuid4().hex}.tmp"
        try:
            with open(tmp, "wb") as fh:
                self.pq.write_table(table, fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path / f"{record['key']}.parquet")
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        _fsync_dir(self.path)

    def close(self):
        os.close(self.fd)


def read_sweep(output):
    """Read the rows of a sweep output.

    Parameters
    ----------
    output : str or path-like
        A ``.csv`` file or a ``.parquet`` directory written by :func:`run_sweep`.

    Returns
    -------
    rows : list of dict
        One dict per row key (its latest attempt), in the order the rows were first
        written: the parameters, the results, then ``"status"`` (``"ok"`` or
        ``"error"``), ``"error"`` (message or ``None``), ``"wall_time"`` (seconds) and
        ``"key"``. Values have the type they were written with (int, float, bool, str or
        ``None``).

    Raises
    ------
    ValueError
        If ``output`` has an unsupported suffix or is not a sweep output.
    FileNotFoundError
        If ``output`` does not exist.

    Warns
    -----
    RuntimeWarning
        For each ignored truncated or corrupt record.
    """
    path, suffix = _check_output(output)
    if not path.exists():
        raise FileNotFoundError(f"sweep output {str(path)!r} does not exist.")
    if suffix == ".csv":
        if not path.is_file():
            raise ValueError(f"output {str(path)!r} is not a file.")
        records, _ = _parse_csv(path.read_bytes(), path)
    else:
        if not path.is_dir():
            raise ValueError(f"output {str(path)!r} is not a directory.")
        records = _read_parquet_dir(path)
    return [_flatten(rec) for rec in _latest(records).values()]


# --------------------------------------------------------------------------------------
# Grid
# --------------------------------------------------------------------------------------

def _is_value_list(value):
    if isinstance(value, np.ndarray):
        return value.ndim > 0
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def _expand_grid(grid):
    """Return the list of unique ``(key, params)`` rows of ``grid``, in grid order."""
    from sklearn.model_selection import ParameterGrid

    if isinstance(grid, Mapping):
        parts, top = [grid], True
    elif isinstance(grid, Sequence) and not isinstance(grid, (str, bytes)):
        parts, top = list(grid), False
    else:
        raise ValueError(
            f"grid must be a dict of name -> list of values, or a list of such dicts or "
            f"of explicit rows, got {type(grid).__name__}."
        )
    if not parts:
        raise ValueError("grid is empty.")
    rows = []
    for i, part in enumerate(parts):
        where = "grid" if top else f"grid[{i}]"
        if not isinstance(part, Mapping):
            raise ValueError(f"{where} must be a dict, got {type(part).__name__}.")
        if not part:
            raise ValueError(f"{where} is empty.")
        for name in part:
            if not isinstance(name, str) or not name:
                raise ValueError(f"{where} has a parameter name {name!r} that is not a "
                                 "non-empty str.")
            if name in _RESERVED:
                raise ValueError(f"{where} uses the reserved name {name!r} (reserved: "
                                 f"{', '.join(sorted(_RESERVED))}).")
        is_list = [_is_value_list(v) for v in part.values()]
        if all(is_list):
            for name, values in part.items():
                if len(values) == 0:
                    raise ValueError(f"{where}[{name!r}] is an empty list of values.")
            rows.extend(ParameterGrid(dict(part)))
        elif not any(is_list) and not top:
            rows.append(dict(part))  # an explicit row
        else:
            bad = [n for n, flag in zip(part, is_list) if not flag]
            raise ValueError(
                f"{where} mixes lists of values with single values ({', '.join(map(repr, bad))}):"
                " give every parameter of a grid dict as a list (e.g. [0.5]); explicit rows"
                " (all values single) are allowed only inside a list of dicts."
            )
    unique = {}
    for params in rows:
        params = {k: _to_json_value(v, f"grid value of {k!r}") for k, v in params.items()}
        unique.setdefault(row_key(params), params)
    return list(unique.items())


# --------------------------------------------------------------------------------------
# Public entry point
# --------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class SweepResult:
    """Outcome of :func:`run_sweep`.

    Attributes
    ----------
    rows : list of dict
        One flattened row per unique grid row, in grid order, as :func:`read_sweep`
        returns them: rows skipped because already finished, and rows run now.
    n_skipped : int
        Rows already finished with status ``"ok"`` in ``output`` and not run again.
    n_run : int
        Rows evaluated by this call.
    n_failed : int
        Rows of this call whose function raised (status ``"error"``).
    output : pathlib.Path
        Where the rows were written.
    """

    rows: list
    n_skipped: int
    n_run: int
    n_failed: int
    output: pathlib.Path

    @property
    def n_ok(self):
        """Rows with status ``"ok"`` in :attr:`rows`."""
        return sum(row["status"] == "ok" for row in self.rows)

    def __repr__(self):
        return (f"SweepResult(rows={len(self.rows)}, n_skipped={self.n_skipped}, "
                f"n_run={self.n_run}, n_failed={self.n_failed}, output={str(self.output)!r})")


def run_sweep(func, grid, *, output, backend="joblib", n_jobs=1, scheduler_address=None,
              resume=True, verbose=0):
    """Run ``func`` on every row of a parameter grid, writing each finished row at once.

    Parameters
    ----------
    func : callable
        Called as ``func(**row)``; returns a dict of scalar results (numbers, str, bool or
        ``None``; numpy scalars are converted). Result names must differ from the
        parameter names and from ``"key"``, ``"status"``, ``"error"``, ``"wall_time"``.
        An exception, or a return value that breaks these rules, is recorded as a row with
        status ``"error"``. With ``backend="joblib"`` and ``n_jobs != 1`` or
        ``backend="dask"`` it must be picklable (cloudpickle: lambdas and closures are
        fine; functions referenced by module must be importable by the workers).
    grid : dict or list of dict
        A dict of parameter name -> non-empty list of values expands to the cartesian
        product (:class:`sklearn.model_selection.ParameterGrid`). A list may mix such grid
        dicts and explicit rows (dicts whose values are all single values); a value that is
        itself a list is given in a grid dict as a one-element list (``{"h": [[8, 8]]}``).
        Values must be JSON-serialisable (numbers, str, bool, ``None``, lists/dicts of
        them); numpy scalars become Python scalars and tuples become lists. Rows that are
        equal are run once.
    output : str or path-like
        ``*.csv``: a CSV file; ``*.parquet``: a directory of one-row Parquet files (needs
        pyarrow). Created with its parent directories if missing; see the module docstring
        for the format.
    backend : {"joblib", "sequential", "dask"}, default="joblib"
        ``"joblib"`` runs rows with :class:`joblib.Parallel` (honouring an enclosing
        ``joblib.parallel_config``) and writes them as they finish; ``"sequential"`` runs
        them one after the other in this process; ``"dask"`` submits them to a
        dask.distributed cluster (needs ``dask[distributed]``). In every case only this
        process writes to ``output``.
    n_jobs : int, default=1
        Parallel workers for ``"joblib"`` (joblib semantics: ``-1`` = all CPUs), and
        threads of the in-process dask cluster when ``scheduler_address`` is ``None``.
        Ignored by ``"sequential"`` and by a dask cluster given by address.
    scheduler_address : str or None, default=None
        With ``backend="dask"``: address of a running scheduler (e.g.
        ``"tcp://10.0.0.1:8786"``), or ``None`` for an in-process ``LocalCluster``
        (``processes=False``) closed at the end.
    resume : bool, default=True
        Skip rows already finished with status ``"ok"`` in ``output``; rows with status
        ``"error"`` are run again. With ``False`` every row is run again and appended
        (nothing is deleted; the latest attempt wins on reading).
    verbose : int, default=0
        Show a tqdm progress bar when positive.

    Returns
    -------
    result : SweepResult
        ``rows`` (in grid order), ``n_skipped``, ``n_run``, ``n_failed``, ``output``.

    Raises
    ------
    ValueError
        If ``backend``, ``grid``, ``output``, ``n_jobs`` or ``scheduler_address`` is
        invalid, or ``output`` exists and is not a sweep output.
    ImportError
        If ``backend="dask"`` without dask.distributed, or Parquet output without pyarrow.
    RuntimeError
        If another sweep is writing ``output``.

    Examples
    --------
    >>> import tempfile, os
    >>> def f(alpha, seed):
    ...     return {"err": alpha / (1 + seed)}
    >>> out = os.path.join(tempfile.mkdtemp(), "sweep.csv")
    >>> res = run_sweep(f, {"alpha": [0.5, 1.0], "seed": [0, 1]}, output=out,
    ...                 backend="sequential")
    >>> res.n_run, res.n_skipped
    (4, 0)
    >>> run_sweep(f, {"alpha": [0.5, 1.0], "seed": [0, 1]}, output=out).n_skipped
    4
    >>> read_sweep(out)[0]["err"]
    0.5
    """
    if not callable(func):
        raise ValueError(f"func must be callable, got {type(func).__name__}.")
    n_jobs = check_backend(backend, n_jobs, scheduler_address)
    if not isinstance(verbose, numbers.Integral):
        raise ValueError(f"verbose must be an integer, got {verbose!r}.")
    path, suffix = _check_output(output)
    rows = _expand_grid(grid)

    store = _CsvStore(path) if suffix == ".csv" else _ParquetStore(path)
    try:
        done = {}
        if resume:
            done = {k: rec for k, rec in _latest(store.records).items()
                    if rec["status"] == "ok"}
        todo = [(key, params) for key, params in rows if key not in done]
        new = {}
        n_failed = 0

        from tqdm.auto import tqdm

        with tqdm(total=len(todo), disable=verbose <= 0, desc="sweep", unit="row") as bar:
            def sink(record):
                nonlocal n_failed
                store.write(record)
                new[record["key"]] = record
                if record["status"] != "ok":
                    n_failed += 1
                    bar.set_postfix(failed=n_failed)
                bar.update(1)

            if todo:
                map_jobs(_run_one, [(func, key, params) for key, params in todo],
                         backend=backend, n_jobs=n_jobs,
                         scheduler_address=scheduler_address,
                         on_result=lambda index, record: sink(record),
                         on_lost=lambda index, exc: _error_record(*todo[index], exc,
                                                                  float("nan")))
    finally:
        store.close()

    out_rows = [_flatten(new.get(key) or done[key]) for key, _ in rows if key in new or key in done]
    return SweepResult(rows=out_rows, n_skipped=len(rows) - len(todo), n_run=len(new),
                       n_failed=n_failed, output=path)
