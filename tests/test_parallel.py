"""skattn.parallel: worker processes stop with the process that started them."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

_CHILD = textwrap.dedent("""
    import os, sys, time
    from skattn.sweep import run_sweep

    def spin(i, piddir):
        open(os.path.join(piddir, str(os.getpid())), "w").close()
        end = time.monotonic() + 120
        while time.monotonic() < end:  # busy, like a real fit
            pass
        return {"done": i}

    run_sweep(spin, {"i": list(range(8)), "piddir": [sys.argv[2]]}, output=sys.argv[1],
              backend="joblib", n_jobs=2)
""")


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            # a zombie has stopped running; it only waits to be reaped
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:  # pragma: no cover - no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_workers_die_with_a_killed_sweep(tmp_path):
    piddir = tmp_path / "pids"
    piddir.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(tmp_path / "s.csv"),
                             str(piddir)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    workers = []
    try:
        deadline = time.monotonic() + 120
        while len(workers) < 2:
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the workers did not start within 120 s"
            time.sleep(0.1)
            workers = [int(p.name) for p in piddir.iterdir()]
        assert proc.pid not in workers  # they are worker processes, not the sweep itself
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        survivors = [pid for pid in workers if _alive(pid)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()
        for pid in workers:  # never leave a spinning orphan behind, even on failure
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert not survivors, f"worker processes {survivors} outlived their killed parent"
