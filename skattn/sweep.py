"""Resumable parameter sweeps on joblib or dask.distributed, stored in SQLite.

:func:`run_sweep` evaluates a function on every row of a parameter grid and commits each
finished row to a SQLite store at once, from the parent process only (a single writer):
killing the sweep at any moment (even SIGKILL) loses no finished row; rerunning it runs
only the rows not finished yet (failed rows are retried); other processes may read the
finished rows meanwhile; the rows run locally (``"sequential"``, ``"joblib"``) or on a
dask.distributed cluster (``"dask"``). :func:`read_sweep` reads a store back (standard
library only); :func:`export_sweep` writes it to CSV or Parquet for other tools.

Design
------
The store is a SQLite database (``output`` ending in ``.sqlite`` or ``.db``), because
SQLite gives each requirement by itself: fields of any size (no csv field limit), atomic
durable commits (a row is stored exactly when its ``INSERT`` committed), readers that
never block the writer (WAL mode), and a unique row key (the primary key). CSV and Parquet
are *exports*. An ``output`` ending in ``.csv`` or ``.parquet`` still works (scripts,
``skattn sweep``): the rows go to the store ``<output without suffix>.sqlite`` next to it;
rows of an existing ``output`` (written by an earlier version, or an earlier export) whose
key is not in the store are imported first, with a ``UserWarning``; ``output`` is
rewritten from the store when the sweep ends (normally or by an exception). After a kill
the export is stale until the next run: read the store for live progress.

Storage format
--------------
Table ``sweep_rows`` holds one row per row key (its latest attempt), in the order the keys
were first written (``rowid``): ``key`` (primary key; :func:`row_key` of the parameters),
``status`` (``"ok"`` or ``"error"``), ``error`` (``"ExceptionType: message"`` with
newlines written as ``\\n``, or NULL), ``wall_time`` (seconds in ``func``; NULL for NaN),
``params`` and ``results`` (JSON objects; results empty for a failed row) and
``attempts`` (how often the row was written). Table ``sweep_meta`` holds
``('format', 'skattn-sweep-1')``. JSON columns keep the schema fixed: later rows may add
result keys or parameters, and values round-trip exactly (ints stay ints, ``None`` stays
``None``). :func:`read_sweep` flattens a record into one dict.

WAL mode, ``synchronous=FULL``; a finished row is one ``INSERT ... ON CONFLICT (key) DO
UPDATE``, its own transaction. A sweep holds an advisory lock (``fcntl.flock``, where
available) on the sidecar ``<store>-lock`` of the store's real path (symlinks resolved, so
an alias shares the lock; not the database: closing any descriptor of it would drop
SQLite's own locks) for its whole run, so a second sweep on the store raises
:class:`RuntimeError` naming it. A read-only store or folder is read (``immutable``, or
from a copy when its ``-wal`` file holds rows) but not written: :func:`run_sweep` raises
one :class:`PermissionError` naming the path. The files themselves: ``skattn/_store_files.py``.

Exports carry the first six fields: CSV, a header then one line per row; Parquet (needs
pyarrow), a directory (a dataset) holding ``sweep.parquet``; each written to a temporary
file, fsynced and moved into place. :func:`read_sweep` also reads earlier versions'
outputs: an append-only CSV file (a truncated or corrupt line is skipped with a
:class:`RuntimeWarning`) and a directory of one-row Parquet files.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import hashlib
import io
import json
import numbers
import os
import pathlib
import sqlite3
import time
import uuid
from collections.abc import Mapping, Sequence

import numpy as np

from ._store_files import check_store_writable, connect_store, lock_store, real_store_path
from .parallel import check_backend, map_jobs
from ._warnings import warn

__all__ = ["SweepResult", "run_sweep", "read_sweep", "export_sweep", "row_key"]

_FIELDS = ("key", "status", "error", "wall_time", "params", "results")
_HEADER = ",".join(_FIELDS)
_HEADER_BYTES = (_HEADER + "\n").encode("ascii")
_RESERVED = frozenset(("key", "status", "error", "wall_time"))
_STATUSES = ("ok", "error")
_STORE_SUFFIXES = (".sqlite", ".db")
_EXPORT_SUFFIXES = (".csv", ".parquet")
_SUFFIXES = _STORE_SUFFIXES + _EXPORT_SUFFIXES


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
    return {"key": key, "status": "error", "error": _one_line(f"{type(exc).__name__}: {exc}"),
            "wall_time": float(wall_time), "params": params, "results": {}}


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
    return {**record["params"], **record["results"], "status": record["status"],
            "error": record["error"], "wall_time": record["wall_time"], "key": record["key"]}


def _latest(records):
    """Latest record of each key, in order of first appearance."""
    return {rec["key"]: rec for rec in records}  # a dict keeps a key's first position


# --------------------------------------------------------------------------------------
# Storage
# --------------------------------------------------------------------------------------

def _check_output(output):
    if not isinstance(output, (str, os.PathLike)):
        raise ValueError(f"output must be a path, got {type(output).__name__}.")
    path = pathlib.Path(output)
    suffix = path.suffix.lower()
    if suffix not in _SUFFIXES:
        raise ValueError(f"output must end in one of {', '.join(_SUFFIXES)} (SQLite store, "
                         f"CSV file or Parquet directory), got {str(output)!r}.")
    return path, suffix


def _fsync_dir(path):
    with contextlib.suppress(OSError):  # not every platform can fsync a directory
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _warn_corrupt(path, where, why):
    warn(f"sweep output {str(path)!r}: ignored {where} ({why}).", RuntimeWarning)


@contextlib.contextmanager
def _unlimited_csv_fields():
    """Lift the csv module's per-field limit (131072 characters) while parsing."""
    old = csv.field_size_limit(2 ** 31 - 1)  # the largest that fits a C long everywhere
    try:
        yield
    finally:
        csv.field_size_limit(old)


def _parse_csv(data, path):
    """Return the records of the bytes of a CSV sweep file."""
    if not data:
        return []
    end = data.rfind(b"\n") + 1  # bytes up to and including the last newline
    if end == 0:
        if not _HEADER_BYTES.startswith(data):
            raise ValueError(f"output {str(path)!r} exists and is not a skattn sweep file.")
        return []  # a header cut by a crash before any row was finished
    lines = data[:end].split(b"\n")[:-1]
    if lines[0] + b"\n" != _HEADER_BYTES:
        raise ValueError(
            f"output {str(path)!r} exists and is not a skattn sweep file: its header is "
            f"{lines[0][:200]!r}, expected {_HEADER!r}."
        )
    if end < len(data):
        _warn_corrupt(path, "a truncated last line", "an interrupted write")
    records = []
    with _unlimited_csv_fields():
        for lineno, raw in enumerate(lines[1:], start=2):
            try:
                fields = next(csv.reader([raw.decode("utf-8")]))
                records.append(_record_from_fields(fields))
            except (ValueError, StopIteration, csv.Error) as exc:  # UnicodeDecodeError, JSON
                _warn_corrupt(path, f"line {lineno}", exc)
    return records


def _import_pyarrow():
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError as exc:
        raise ImportError(
            "Parquet sweep output needs pyarrow: `pip install pyarrow`, or use an output "
            "ending in .sqlite or .csv."
        ) from exc
    return pyarrow, pyarrow.parquet


def _read_parquet(path):
    """Records of a Parquet output: a directory of Parquet files (oldest first) or a file."""
    _, pq = _import_pyarrow()
    files = [path] if not path.is_dir() else sorted(
        (p for p in path.iterdir() if p.suffix == ".parquet" and p.is_file()
         and not p.name.startswith((".", "_"))),  # skip hidden temporary and lock files
        key=lambda p: (p.stat().st_mtime_ns, p.name))
    records = []
    for file in files:
        try:
            rows = pq.read_table(file).to_pylist()
        except Exception as exc:  # anything unreadable is not one of our files
            _warn_corrupt(path, f"file {file.name!r}", exc)
            continue
        for i, row in enumerate(rows):
            try:
                records.append(_record_from_fields([row.get(name) for name in _FIELDS]))
            except (ValueError, TypeError) as exc:
                _warn_corrupt(path, f"row {i} of {file.name!r}", exc)
    return records


_CREATE_TABLES = """
CREATE TABLE IF NOT EXISTS sweep_rows (
    key TEXT PRIMARY KEY,
    status TEXT NOT NULL CHECK (status IN ('ok', 'error')),
    error TEXT,
    wall_time REAL,
    params TEXT NOT NULL,
    results TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE IF NOT EXISTS sweep_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT OR IGNORE INTO sweep_meta VALUES ('format', 'skattn-sweep-1');
"""

_INSERT = ("INSERT INTO sweep_rows (key, status, error, wall_time, params, results) "
           "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO ")
_UPSERT = _INSERT + ("UPDATE SET status = excluded.status, error = excluded.error, "
                     "wall_time = excluded.wall_time, params = excluded.params, "
                     "results = excluded.results, attempts = attempts + 1")


def _connect(path, read_only):
    try:
        conn, tables = connect_store(path, read_only)
    except sqlite3.DatabaseError as exc:
        raise ValueError(f"output {str(path)!r} exists and is not a SQLite sweep store "
                         f"({exc}).") from None
    if tables and "sweep_rows" not in tables:
        conn.close()
        raise ValueError(f"output {str(path)!r} is a SQLite database but not a skattn sweep "
                         f"store (it has no table 'sweep_rows').")
    return conn, bool(tables)


def _read_store(conn, path):
    records = []
    for fields in conn.execute(f"SELECT {', '.join(_FIELDS)} FROM sweep_rows ORDER BY rowid"):
        fields = [*fields[:3], float("nan") if fields[3] is None else fields[3], *fields[4:]]
        try:
            records.append(_record_from_fields(fields))
        except (ValueError, TypeError) as exc:
            _warn_corrupt(path, f"row {fields[0]!r}", exc)
    return records


class _SqliteStore:
    """The single writer of a sweep store: WAL mode, one transaction per finished row."""

    def __init__(self, path):
        shown, path = path, real_store_path(path)  # an alias shares the real file's lock
        if path.exists() and not path.is_file():
            raise ValueError(f"output {str(shown)!r} exists and is not a file.")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except PermissionError:
            raise PermissionError(f"cannot create the folder of output {str(shown)!r} "
                                  "(permission denied).") from None
        check_store_writable(path)
        self.lock_fd = lock_store(path)
        try:
            self.conn, _ = _connect(path, read_only=False)
            try:
                self.conn.execute("PRAGMA journal_mode = WAL")
                # FULL: every commit reaches the disk, so a finished row also survives a
                # power cut (a killed process only needs the commit itself)
                self.conn.execute("PRAGMA synchronous = FULL")
                self.conn.executescript("BEGIN IMMEDIATE;" + _CREATE_TABLES + "COMMIT;")
                self.records = _read_store(self.conn, path)
            except sqlite3.OperationalError as exc:
                self.conn.close()
                if "readonly" not in str(exc):
                    raise
                # a file the permission bits cannot show as read-only (an immutable file)
                raise PermissionError(f"output {str(shown)!r} is read-only ({exc}); a sweep "
                                      "writes its rows there: make it writable or give "
                                      "another output.") from None
            except BaseException:
                self.conn.close()
                raise
        except BaseException:
            os.close(self.lock_fd)
            raise

    @staticmethod
    def _values(record):
        return (record["key"], record["status"], record["error"], float(record["wall_time"]),
                _dumps(record["params"]), _dumps(record["results"]))

    def write(self, record):
        self.conn.execute(_UPSERT, self._values(record))

    def import_records(self, records):
        """Insert the latest attempt of each key absent from the store; return how many."""
        before = self.conn.total_changes
        self.conn.execute("BEGIN IMMEDIATE")  # all or nothing
        try:
            self.conn.executemany(_INSERT + "NOTHING",
                                  [self._values(rec) for rec in _latest(records).values()])
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")
        return self.conn.total_changes - before

    def close(self):
        try:
            self.conn.close()
        finally:
            os.close(self.lock_fd)


def _read_records(path, suffix):
    """Every record of an existing output of any format, oldest first."""
    if suffix in _STORE_SUFFIXES:
        if not path.is_file():
            raise ValueError(f"output {str(path)!r} is not a file.")
        conn, has_tables = _connect(path, read_only=True)
        try:
            return _read_store(conn, path) if has_tables else []
        finally:
            conn.close()
    if suffix == ".csv":
        if not path.is_file():
            raise ValueError(f"output {str(path)!r} is not a file.")
        return _parse_csv(path.read_bytes(), path)
    return _read_parquet(path)


def read_sweep(output):
    """Read the rows of a sweep output.

    Parameters
    ----------
    output : str or path-like
        A SQLite store (``.sqlite`` or ``.db``; while a sweep writes it, its rows finished
        so far), or a CSV file or Parquet directory written by :func:`export_sweep` or by
        earlier versions of :func:`run_sweep`.

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
    return [_flatten(rec) for rec in _existing_records(output)]


def _existing_records(output):
    """Latest record of each key of an existing output, in order of first appearance."""
    path, suffix = _check_output(output)
    real_store_path(path)  # a symlink loop is named as one, not as a missing file
    if not path.exists():
        raise FileNotFoundError(f"sweep output {str(path)!r} does not exist.")
    return list(_latest(_read_records(path, suffix)).values())


def _write_atomically(target, write):
    """Call ``write(file)`` on a hidden temporary file, fsync it, then move it to target."""
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(target.parent)


def export_sweep(store, path):
    """Write the rows of a sweep store to a CSV file or a Parquet dataset.

    Parameters
    ----------
    store : str or path-like
        A sweep output :func:`read_sweep` reads, usually a SQLite store (while a sweep
        writes it: the rows finished so far).
    path : str or path-like
        ``*.csv`` (a CSV file) or ``*.parquet`` (a directory holding ``sweep.parquet``,
        needs pyarrow); see the module docstring. Replaced atomically: a reader sees the
        old export or the new one, never a partial file.

    Returns
    -------
    n_rows : int
        Rows written (the latest attempt of each key).

    Raises
    ------
    ValueError
        If ``path`` does not end in ``.csv`` or ``.parquet``, or ``store`` is not a sweep
        output. (FileNotFoundError if ``store`` does not exist.)
    """
    target, suffix = _check_output(path)
    if suffix not in _EXPORT_SUFFIXES:
        raise ValueError(f"path must end in .csv or .parquet, got {str(path)!r}.")
    records = _existing_records(store)
    fields = [_SqliteStore._values(rec) for rec in records]
    target.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".csv":
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(
            [_FIELDS] + [[k, st, err or "", repr(w), p, r] for k, st, err, w, p, r in fields])
        _write_atomically(target, lambda fh: fh.write(buf.getvalue().encode("utf-8")))
    else:
        pa, pq = _import_pyarrow()
        if target.exists() and not target.is_dir():
            raise ValueError(f"path {str(path)!r} exists and is not a directory (a Parquet "
                             "export is a directory).")
        target.mkdir(exist_ok=True)
        schema = pa.schema([(name, pa.float64() if name == "wall_time" else pa.string())
                            for name in _FIELDS])
        table = pa.table({name: [f[i] for f in fields] for i, name in enumerate(_FIELDS)},
                         schema=schema)
        _write_atomically(target / "sweep.parquet", lambda fh: pq.write_table(table, fh))
    return len(records)


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
        raise ValueError(f"grid must be a dict of name -> list of values, or a list of such "
                         f"dicts or of explicit rows, got {type(grid).__name__}.")
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
        The ``output`` given to :func:`run_sweep`.
    store : pathlib.Path or None
        The SQLite store written: ``output``, or the one next to a CSV/Parquet output.
    """

    rows: list
    n_skipped: int
    n_run: int
    n_failed: int
    output: pathlib.Path
    store: pathlib.Path = None

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
        ``None``; numpy scalars are converted), named unlike the parameters and
        ``"key"``, ``"status"``, ``"error"``, ``"wall_time"``. An exception, or a return
        value that breaks these rules, is recorded as a row with status ``"error"``. Must
        be picklable (cloudpickle) for joblib with ``n_jobs != 1`` and for dask.
    grid : dict or list of dict
        A dict of parameter name -> non-empty list of values expands to the cartesian
        product (:class:`sklearn.model_selection.ParameterGrid`). A list may mix such grid
        dicts and explicit rows (dicts whose values are all single values); a value that is
        itself a list is given in a grid dict as a one-element list (``{"h": [[8, 8]]}``).
        Values must be JSON-serialisable (numbers, str, bool, ``None``, lists/dicts of
        them); numpy scalars become Python scalars and tuples become lists. Rows that are
        equal are run once.
    output : str or path-like
        ``*.sqlite`` or ``*.db``: the SQLite store, created with its parent directories if
        missing. ``*.csv`` or ``*.parquet``: the store is ``<output without
        suffix>.sqlite``, rows of an existing ``output`` missing from it are imported
        first (``UserWarning``), and ``output`` is rewritten from it by
        :func:`export_sweep` at the end. See the module docstring.
    backend : {"joblib", "sequential", "dask"}, default="joblib"
        :class:`joblib.Parallel` (honouring an enclosing ``joblib.parallel_config``), one
        after the other in this process, or a dask.distributed cluster (needs
        ``dask[distributed]``). In every case only this process writes to the store.
    n_jobs : int, default=1
        Parallel workers for ``"joblib"`` (joblib semantics: ``-1`` = all CPUs), and
        threads of the in-process dask cluster when ``scheduler_address`` is ``None``.
        Ignored by ``"sequential"`` and by a dask cluster given by address.
    scheduler_address : str or None, default=None
        With ``backend="dask"``: address of a running scheduler (e.g.
        ``"tcp://10.0.0.1:8786"``), or ``None`` for an in-process ``LocalCluster``
        (``processes=False``) closed at the end.
    resume : bool, default=True
        Skip rows already finished with status ``"ok"`` in the store; rows with status
        ``"error"`` are run again. With ``False`` every row is run again; each new
        attempt replaces the stored one (its ``attempts`` count goes up).
    verbose : int, default=0
        Show a tqdm progress bar when positive.

    Returns
    -------
    result : SweepResult
        ``rows`` (in grid order), ``n_skipped``, ``n_run``, ``n_failed``, ``output``,
        ``store``.

    Raises
    ------
    ValueError
        If ``backend``, ``grid``, ``output``, ``n_jobs`` or ``scheduler_address`` is
        invalid, or ``output`` exists and is not a sweep output.
    ImportError
        If ``backend="dask"`` without dask.distributed, or Parquet output without pyarrow.
    RuntimeError
        If another sweep is writing the same store (the message names it).

    Examples
    --------
    >>> import tempfile, os
    >>> def f(alpha, seed):
    ...     return {"err": alpha / (1 + seed)}
    >>> out = os.path.join(tempfile.mkdtemp(), "sweep.sqlite")
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

    export = None
    if suffix in _EXPORT_SUFFIXES:
        export, legacy = path, []
        if path.exists():  # read first: a file that is not a sweep output stays untouched
            legacy = _read_records(path, suffix)
        path = path.with_suffix(".sqlite")
    store = _SqliteStore(path)
    try:
        if export is not None and legacy:
            n_imported = store.import_records(legacy)
            if n_imported:
                warn(f"run_sweep: imported {n_imported} rows of {str(export)!r} "
                     f"into the SQLite store {str(path)!r}, which now holds the "
                     f"sweep; {str(export)!r} is rewritten from it at the end.",
                     UserWarning)
                store.records = _read_store(store.conn, path)
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
        try:
            if export is not None:
                export_sweep(path, export)
        finally:
            store.close()

    out_rows = [_flatten(new.get(key) or done[key]) for key, _ in rows if key in new or key in done]
    return SweepResult(rows=out_rows, n_skipped=len(rows) - len(todo), n_run=len(new),
                       n_failed=n_failed, output=export or path, store=path)
