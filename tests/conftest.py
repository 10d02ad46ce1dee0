"""Shared test fixtures."""

import os

import pytest


@pytest.fixture(autouse=True, scope="session")
def _share_the_cores_between_workers():
    """Under pytest-xdist, each worker runs with its share of the cores (torch, numba,
    BLAS/OpenMP threads): two workers each running two-thread numba loops on two cores
    made ``make test`` take 13.1 CPU-minutes and 6 min 55 s on the 2-core machine,
    against 8.2 and 4 min 22 s with one thread a worker (one run each)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers < 2:
        yield
        return
    import skattn

    with skattn.limit_threads(max(1, (os.cpu_count() or 1) // workers)):
        yield


@pytest.fixture
def two_numba_threads():
    """numba's loops on two threads in this test, whatever the session's limit a worker
    (skipped where numba is configured for one)."""
    numba = pytest.importorskip("numba")
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba is configured for one thread")
    before = numba.get_num_threads()
    numba.set_num_threads(2)
    yield
    numba.set_num_threads(before)


@pytest.fixture(autouse=True, scope="module")
def _single_torch_thread():
    """Run torch on one thread: the test problems are tiny, and intra-op threads only add
    contention on a 2-core machine."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture
def without_certificate(monkeypatch):
    """Softmax channels without the prox certificate (``certify_budget = 0``): every node
    counts as uncertified, so the solver estimates the uncertified nodes' effect."""
    import skattn.theory.problem as problem_module

    make = problem_module.channel_for

    def channel_for(*args):
        channel = make(*args)
        channel.certify_budget = 0
        return channel

    monkeypatch.setattr(problem_module, "channel_for", channel_for)
