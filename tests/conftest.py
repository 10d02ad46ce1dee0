"""Shared test fixtures."""

import pytest


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
