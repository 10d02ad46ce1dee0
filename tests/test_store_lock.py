"""The sweep store's files: the lock follows the real path; read-only stores and folders.

Regression tests of issue #28 (items 4, 5 and the lock-sidecar cases of 7).
"""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from skattn.sweep import _SqliteStore, read_sweep, run_sweep

pytestmark = pytest.mark.skipif(not hasattr(os, "symlink") or os.name != "posix",
                                reason="POSIX files")


def _f(a):
    return {"y": a * 2}


def test_symlink_alias_shares_the_lock(tmp_path):
    store = tmp_path / "store.sqlite"
    run_sweep(_f, {"a": [1, 2]}, output=store, backend="sequential")
    os.symlink(store, tmp_path / "alias.sqlite")
    writer = _SqliteStore(store)  # a sweep running on the real name
    try:
        with pytest.raises(RuntimeError, match="locked by another running sweep"):
            run_sweep(_f, {"a": [3]}, output=tmp_path / "alias.sqlite", backend="sequential")
        # a '..' detour is the same file too
        (tmp_path / "sub").mkdir()
        with pytest.raises(RuntimeError, match="locked"):
            run_sweep(_f, {"a": [3]}, output=tmp_path / "sub" / ".." / "store.sqlite",
                      backend="sequential")
    finally:
        writer.close()
    assert [r["a"] for r in read_sweep(store)] == [1, 2]  # nothing was written meanwhile


def test_hard_link_is_refused_for_writing(tmp_path):
    """A hard link is another name of the store that no path resolution joins: it got its
    own lock sidecar, so a second writer ran beside the first (issue #28)."""
    store = tmp_path / "store.sqlite"
    run_sweep(_f, {"a": [1, 2]}, output=store, backend="sequential")
    writer = _SqliteStore(store)  # a sweep running on the real name
    try:
        os.link(store, tmp_path / "alias.sqlite")
        with pytest.raises(ValueError, match=r"alias\.sqlite.* 2 hard links"):
            run_sweep(_f, {"a": [3]}, output=tmp_path / "alias.sqlite", backend="sequential")
    finally:
        writer.close()
    with pytest.raises(ValueError, match="hard links"):  # and through the first name
        run_sweep(_f, {"a": [3]}, output=store, backend="sequential")
    assert [r["a"] for r in read_sweep(tmp_path / "alias.sqlite")] == [1, 2]  # reading works
    os.unlink(tmp_path / "alias.sqlite")
    run_sweep(_f, {"a": [1, 2, 3]}, output=store, backend="sequential")  # one name again
    assert sorted(r["a"] for r in read_sweep(store)) == [1, 2, 3]


def test_lock_sidecar_that_is_a_directory(tmp_path):
    (tmp_path / "s.sqlite-lock").mkdir()
    with pytest.raises(ValueError, match=r"lock file .*s\.sqlite-lock.* is a directory"):
        run_sweep(_f, {"a": [1]}, output=tmp_path / "s.sqlite", backend="sequential")
    assert not (tmp_path / "s.sqlite").exists()


def test_symlink_loops(tmp_path):
    loop = tmp_path / "loop.sqlite"
    os.symlink(loop, loop)
    with pytest.raises(ValueError, match="symlink loop"):
        run_sweep(_f, {"a": [1]}, output=loop, backend="sequential")
    with pytest.raises(ValueError, match="symlink loop"):
        read_sweep(loop)
    sidecar = tmp_path / "s.sqlite-lock"
    os.symlink(sidecar, sidecar)
    with pytest.raises(ValueError, match=r"lock file .* is a symlink loop"):
        run_sweep(_f, {"a": [1]}, output=tmp_path / "s.sqlite", backend="sequential")


# ------------------------------------------------------------------ read-only places
def _run_unprivileged(code, tmp_path):
    """Run ``code`` in a child Python that obeys permission bits (root drops its override).

    Tests run as root here; root ignores ``chmod``, so the child drops the capabilities
    that let it (setpriv); as another user it runs as is.
    """
    cmd = [sys.executable, "-c", textwrap.dedent(code)]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: permission bits do not apply")
        cmd = [setpriv, "--bounding-set", "-dac_override,-dac_read_search"] + cmd
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=120)


def _read_only(path):
    os.chmod(path, 0o555 if path.is_dir() else 0o444)


def test_read_a_store_in_a_read_only_folder(tmp_path):
    folder = tmp_path / "ro"
    store = folder / "store.sqlite"
    run_sweep(_f, {"a": [1, 2, 3]}, output=store, backend="sequential")
    os.symlink(store, tmp_path / "link.sqlite")  # a link from a writable folder
    _read_only(folder)
    try:
        out = _run_unprivileged(f"""
            from skattn.sweep import read_sweep
            print(sorted(r["y"] for r in read_sweep({str(store)!r})),
                  sorted(r["y"] for r in read_sweep({str(tmp_path / "link.sqlite")!r})))
            """, tmp_path)
    finally:
        os.chmod(folder, 0o755)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[2, 4, 6] [2, 4, 6]"


def test_read_only_folder_with_rows_still_in_the_wal(tmp_path):
    folder = tmp_path / "ro"
    store = folder / "store.sqlite"
    # a writer killed after its commits: the rows sit in store.sqlite-wal, not yet
    # checkpointed into the database file
    killed = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import os, pathlib
        from skattn.sweep import _SqliteStore, _run_one, row_key
        st = _SqliteStore(pathlib.Path({str(store)!r}))
        for a in (1, 2):
            st.write(_run_one(lambda a: {{"y": 10 * a}}, row_key({{"a": a}}), {{"a": a}}))
        os._exit(0)
        """)], env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
        capture_output=True, text=True, timeout=120)
    assert killed.returncode == 0, killed.stderr
    assert (folder / "store.sqlite-wal").stat().st_size > 0
    # without its -shm file (copied or synced without it), SQLite cannot read a WAL store
    # read-only in place
    (folder / "store.sqlite-shm").unlink(missing_ok=True)
    _read_only(folder)
    try:
        out = _run_unprivileged(f"""
            from skattn.sweep import read_sweep
            print(sorted(r["y"] for r in read_sweep({str(store)!r})))
            """, tmp_path)
    finally:
        os.chmod(folder, 0o755)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[10, 20]"


@pytest.mark.slow
def test_write_to_a_read_only_store_or_folder(tmp_path):
    folder = tmp_path / "w"
    store = folder / "store.sqlite"
    run_sweep(_f, {"a": [1]}, output=store, backend="sequential")
    _read_only(store)
    code = f"""
        from skattn.sweep import run_sweep
        try:
            run_sweep(lambda a: {{"y": a}}, {{"a": [5]}}, output={str(store)!r},
                      backend="sequential")
        except PermissionError as exc:
            print("PermissionError:", exc)
        """
    try:
        out = _run_unprivileged(code, tmp_path)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("PermissionError:"), out.stdout + out.stderr
        assert str(store) in out.stdout and "read-only" in out.stdout
        os.chmod(store, 0o644)
        _read_only(folder)  # now the folder: no journal, no lock file can be made
        out = _run_unprivileged(code, tmp_path)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("PermissionError:"), out.stdout + out.stderr
        assert str(store) in out.stdout and "read-only" in out.stdout
    finally:
        os.chmod(folder, 0o755)
        os.chmod(store, 0o644)
    assert [r["a"] for r in read_sweep(store)] == [1]
