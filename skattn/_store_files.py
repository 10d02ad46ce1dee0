"""The files of a sweep store: its real path, its single-writer lock, its SQLite connections.

Kept apart from :mod:`skattn.sweep` (the rows and the driver) because each case here is an
operating-system case with its own clear error: a store reached through a symlink (the
lock must follow the real file, or an alias would let a second writer in), a lock sidecar
that is a directory or a symlink loop, a read-only folder or store (reading must still
work; writing must fail once, naming the path).
"""

from __future__ import annotations

import errno
import os
import pathlib
import shutil
import sqlite3
import tempfile

try:  # POSIX only; elsewhere the single-writer rule is documented, not enforced
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

__all__ = ["real_store_path", "lock_store", "connect_store", "check_store_writable"]


def real_store_path(path):
    """The store's real path (every symlink resolved), or raise naming ``path``.

    The lock sidecar is named after this path, so two names of one file (a symlink, a
    ``..`` detour) share one lock.

    Raises
    ------
    ValueError
        If resolving ``path`` meets a symlink loop.
    """
    path = pathlib.Path(path)
    try:
        # strict=False would return a looping path unchanged (and SQLite would then fail
        # with "unable to open database file"); os.stat reports the loop as ELOOP
        os.stat(path)
    except FileNotFoundError:
        pass  # a new store (or a dangling symlink: resolve() follows it to its target)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ValueError(f"output {str(path)!r} is a symlink loop (it never reaches a "
                             "file); remove the link or give the store's real path.") from None
        raise
    return pathlib.Path(os.path.realpath(path))


def lock_store(path):
    """Hold an exclusive advisory lock on ``<real path>-lock``; return its descriptor.

    A sidecar file, not the database itself: closing any descriptor of the database would
    drop SQLite's own POSIX locks in this process.

    Parameters
    ----------
    path : pathlib.Path
        The store's real path (:func:`real_store_path`).

    Raises
    ------
    RuntimeError
        If another sweep holds the lock.
    ValueError
        If the sidecar exists and is not a regular file (a directory, a symlink loop), or
        the store has another hard link.
    PermissionError
        If the sidecar cannot be created (a read-only folder); the message names it.
    """
    try:
        n_links = os.stat(path).st_nlink
    except FileNotFoundError:
        n_links = 1  # a new store
    if n_links > 1:
        # a hard link is a second name that no path resolution joins to this one, so it
        # would get its own sidecar (and SQLite its own -wal and -journal files: two
        # writers, a corrupted store); a store written through one name only is safe
        raise ValueError(f"output {str(path)!r} has {n_links} hard links (another name of "
                         "the same file); a sweep store must have one name, or two writers "
                         "could run on it: write to a copy or remove the other link "
                         "(reading works: skattn.sweep.read_sweep).")
    sidecar = path.with_name(path.name + "-lock")
    try:
        fd = os.open(sidecar, os.O_RDWR | os.O_CREAT, 0o644)
    except IsADirectoryError:
        raise ValueError(f"the lock file {str(sidecar)!r} of output {str(path)!r} is a "
                         "directory; remove it (a sweep creates a regular file there).") from None
    except PermissionError:
        raise PermissionError(
            f"cannot create or open the lock file {str(sidecar)!r} of output {str(path)!r} "
            "(permission denied: a read-only folder or file); a sweep writes next to its "
            "store: give an output in a writable folder (reading a store needs no lock: "
            "skattn.sweep.read_sweep).") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ValueError(f"the lock file {str(sidecar)!r} of output {str(path)!r} is a "
                             "symlink loop; remove it.") from None
        raise
    if fcntl is None:  # pragma: no cover
        return fd
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise RuntimeError(f"output {str(path)!r} is locked by another running sweep; a "
                           "sweep store has a single writer.") from None
    except OSError:  # pragma: no cover - e.g. a file system without locks
        pass
    return fd


def check_store_writable(path):
    """Raise one clear PermissionError when the store or its folder cannot be written.

    SQLite would otherwise open a read-only file and fail later with ``attempt to write a
    readonly database`` (or ``unable to open database file`` for its journal).
    """
    if path.exists() and not os.access(path, os.W_OK):
        raise PermissionError(f"output {str(path)!r} is read-only; a sweep writes its rows "
                              "there: make it writable or give another output (read_sweep "
                              "reads a read-only store).")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise PermissionError(f"the folder of output {str(path)!r} is read-only; a sweep "
                              "writes its store and journal files there: give an output in "
                              "a writable folder.")


class _CopyConnection(sqlite3.Connection):
    """A connection to a temporary copy of a store, whose folder goes when it closes."""

    copy_dir = None

    def close(self):
        try:
            super().close()
        finally:
            if self.copy_dir is not None:
                shutil.rmtree(self.copy_dir, ignore_errors=True)


def _open(uri, factory=sqlite3.Connection):
    # isolation_level=None: autocommit, so one INSERT is one transaction; timeout: wait
    # (instead of failing) while the writer checkpoints the WAL
    return sqlite3.connect(uri, uri=True, timeout=60, isolation_level=None, factory=factory)


def _probe(conn):
    """The table names of a connection (forces SQLite to read the file)."""
    return {name for (name,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'")}


def connect_store(path, read_only):
    """A connection to the store and its table names.

    A read-only connection works in a read-only folder too: a WAL store there cannot get
    the ``-shm`` file SQLite reads it with, so it is opened ``immutable`` (the folder
    cannot hold a live writer) or, when a ``-wal`` file holds rows not yet checkpointed,
    from a copy of both files in a temporary folder (so no finished row is missed).

    Returns
    -------
    conn : sqlite3.Connection
    tables : set of str

    Raises
    ------
    sqlite3.DatabaseError
        If the file is not a SQLite database (the caller names the path).
    """
    if not read_only:
        conn = _open(path.resolve().as_uri())
        try:
            return conn, _probe(conn)
        except BaseException:
            conn.close()
            raise
    path = pathlib.Path(os.path.realpath(path))  # the folder that matters is the file's
    uri = path.as_uri()
    conn = _open(uri + "?mode=ro")
    try:
        return conn, _probe(conn)
    except sqlite3.OperationalError:
        conn.close()
        if os.access(path.parent, os.W_OK | os.X_OK):
            raise  # a writable folder: not the read-only case
    wal = path.with_name(path.name + "-wal")
    if wal.exists() and wal.stat().st_size > 0:
        tmp = tempfile.mkdtemp(prefix="skattn-store-")
        conn = None
        try:
            copy = pathlib.Path(tmp) / path.name
            shutil.copyfile(path, copy)
            shutil.copyfile(wal, copy.with_name(copy.name + "-wal"))
            conn = _open(copy.as_uri(), factory=_CopyConnection)
            conn.copy_dir = tmp
            return conn, _probe(conn)
        except BaseException:
            if conn is not None:
                conn.close()
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    conn = _open(uri + "?immutable=1")
    try:
        return conn, _probe(conn)
    except BaseException:
        conn.close()
        raise
