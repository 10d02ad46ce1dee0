"""limit_threads holds for torch imported inside the block and bounds its argument (#28)."""

import os
import subprocess
import sys
import textwrap

import pytest

from skattn import limit_threads


def test_bounded_argument():
    for bad in (0, 10 ** 6, (os.cpu_count() or 1) + 1, 2.0, True):
        with pytest.raises(ValueError, match="n_threads"):
            with limit_threads(bad):
                pass


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 CPUs to see a limit")
def test_torch_imported_inside_the_block():
    code = textwrap.dedent("""
        import os, sys
        os.environ.pop("OMP_NUM_THREADS", None)
        from skattn import limit_threads
        assert "torch" not in sys.modules
        with limit_threads(1):
            import torch
            inside = torch.get_num_threads()
        print(inside, torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS"))
        """)
    # (without the thread limits the test session may set for its workers)
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    inside, after, omp = out.stdout.split()
    assert inside == "1"
    assert int(after) > 1 and omp == "None"  # restored on exit


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 CPUs to see a limit")
def test_numba_threads_of_the_theory_are_limited_and_restored(two_numba_threads):
    import numba
    from skattn.theory.channels import _kernels

    with limit_threads(1):
        assert numba.get_num_threads() == 1
        assert not _kernels.use_parallel()  # the compiled prox runs its serial twins
    assert numba.get_num_threads() == 2
