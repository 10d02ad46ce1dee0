"""The fast exact-Gram correction (skattn/theory/_seq2seq_kernels.py,
skattn/theory/seq2seq_softmax.py; issue 29 item 6): the compiled bulk prox and the reuse of
the node frame and of the last evaluation leave the prediction as it was.

The literals below are the values of main@5fe4857 (the numpy Newton prox, the law rebuilt
and the map re-evaluated at the returned point), computed before the change.
"""

import numpy as np
import pytest

from skattn.data import AttentionIndexedModel, WishartTarget
from skattn.theory import StateEvolutionProblem, _seq2seq_kernels, solve_state_evolution
from skattn.theory.channels import GaussianNodes, SoftmaxChannel
from skattn.theory.seq2seq_softmax import (_check_args, _Frame, _Law, _SoftmaxSeq2seqMap,
                                           bartlett_softmax_output_side)

FIELDS = ("m_hat", "m_hat_identity", "q_hat", "sigma_hat", "train_error", "moreau")
POINT = dict(m=0.8, q=1.1, t=0.4, Q0=1.2, trace0=0.5, noise=0.1, sigma=0.7, alpha=0.3,
             n_features=40)

# main@5fe4857: bartlett_softmax_output_side(SoftmaxChannel(T, beta=1.5),
# GaussianNodes(4K, n_points=2048, seed=3), task=..., **POINT), the FIELDS in order
OUTPUT_SIDE_MAIN_5FE4857 = {
    (2, "seq2seq"): (0.31233515400145934, -0.0017117179611381927, 0.11969021230399035,
                     0.33768934801273487, 0.1292106338293705, 0.20198725488725533),
    (3, "seq2lab"): (0.5733605683396754, -0.0045084015008246435, 0.17718085759206637,
                     0.6337188917971147, 0.2746513314228734, 0.38181056957244897),
}

# main@5fe4857: solve_state_evolution(0.3, target=AttentionIndexedModel(d, n_tokens=T,
# target=WishartTarget(0.5), attention="softmax", noise=0.1, random_state=0), task=...,
# reg_lambda=0.01, options=dict(n_nodes=1024)) (routed to exact_gram): test_error, m, q,
# sigma, trace, train_error, m_hat
SOLVE_MAIN_5FE4857 = {
    (2, "seq2seq", 40): (0.053681488525806176, 1.1893277544963734, 1.0442673206917545,
                         6.199945839738178, 0.5910923669666248, 0.004446857314957307,
                         0.09333934501673194),
    (3, "seq2lab", 30): (0.044732122505327196, 1.284803072003318, 1.2172825174502913,
                         1.9274253187672397, 0.648783026753829, 0.01624847704795443,
                         0.3743464883505461),
}


def _output_side(T, task, compiled=True):
    channel = SoftmaxChannel(T, beta=1.5)
    channel.compiled = compiled
    nodes = GaussianNodes(4 * channel.K, n_points=2048, seed=3)
    return bartlett_softmax_output_side(channel, nodes, task=task, **POINT)


@pytest.mark.parametrize("T, task", sorted(OUTPUT_SIDE_MAIN_5FE4857))
def test_output_side_is_main_5fe4857s(T, task):
    """On fixed nodes the output side is a deterministic function: the compiled prox gives
    main's conjugates to rounding."""
    out = _output_side(T, task)
    for name, want in zip(FIELDS, OUTPUT_SIDE_MAIN_5FE4857[T, task]):
        assert getattr(out, name) == pytest.approx(want, rel=1e-9, abs=1e-13), name


@pytest.mark.skipif(not _seq2seq_kernels.HAVE_NUMBA, reason="compiled path needs numba")
@pytest.mark.parametrize("T, task", [(2, "seq2lab"), (3, "seq2seq")])
def test_compiled_prox_is_the_numpy_newton(T, task):
    """The compiled bulk prox and the numpy Newton (``channel.compiled = False``) agree."""
    fast, slow = _output_side(T, task, True), _output_side(T, task, False)
    for name in FIELDS:
        assert getattr(fast, name) == pytest.approx(getattr(slow, name), rel=1e-9,
                                                    abs=1e-13), name


def test_frame_reuse_gives_the_same_law():
    """A law built on a cached frame is the law built from scratch."""
    channel = SoftmaxChannel(3)
    nodes = GaussianNodes(4 * channel.K, n_points=256, seed=1)
    args = _check_args(channel, nodes, 0.8, 1.1, 0.4, 1.2, 0.5, 0.1, 0.7, 0.3, 40, "seq2lab")
    _, _, noise, d, m_perp, q_perp, V = args
    frame = _Frame(3, channel.K, nodes, d)
    fresh = _Law(channel, nodes, m_perp, q_perp, V, 0.4, 0.5, noise, d, "seq2lab")
    cached = _Law(channel, nodes, m_perp, q_perp, V, 0.4, 0.5, noise, d, "seq2lab", frame)
    for name in ("omega", "v0", "gram", "phi", "MB", "z0", "y", "weights", "base"):
        np.testing.assert_array_equal(getattr(cached, name), getattr(fresh, name), name)
    # a frame of other nodes is not used
    other = GaussianNodes(4 * channel.K, n_points=256, seed=2)
    law = _Law(channel, other, m_perp, q_perp, V, 0.4, 0.5, noise, d, "seq2lab", frame)
    assert law.frame is not frame


@pytest.mark.parametrize("T, task, d", sorted(SOLVE_MAIN_5FE4857))
def test_exact_gram_prediction_is_main_5fe4857s(T, task, d):
    """The routed same-instance prediction (softmax seq2seq, and seq2lab at T = 3) is
    main's within 1e-4 relative."""
    teacher = AttentionIndexedModel(d, n_tokens=T, target=WishartTarget(0.5),
                                    attention="softmax", noise=0.1, random_state=0)
    res = solve_state_evolution(0.3, target=teacher, n_tokens=T, attention="softmax",
                                task=task, reg_lambda=0.01, options=dict(n_nodes=1024))
    assert res.correction == "exact_gram" and res.converged
    got = (res.test_error, res.m, res.q, res.sigma, res.params["trace"], res.train_error,
           res.m_hat)
    names = ("test_error", "m", "q", "sigma", "trace", "train_error", "m_hat")
    for name, value, want in zip(names, got, SOLVE_MAIN_5FE4857[T, task, d]):
        assert value == pytest.approx(want, rel=1e-4), name


def test_returned_point_is_not_evaluated_twice():
    """The map's state at the point it was last evaluated at is that evaluation's;
    elsewhere the map is evaluated."""
    teacher = AttentionIndexedModel(20, n_tokens=2, target=WishartTarget(0.5),
                                    attention="softmax", noise=0.1, random_state=0)
    problem = StateEvolutionProblem.from_teacher(teacher, reg_lambda=0.01)
    law, eig0 = problem.target_law(0)
    Q0, trace0 = float(np.mean(eig0 ** 2)), float(np.mean(eig0))
    channel = problem.channel()
    nodes = GaussianNodes(4 * channel.K, n_points=128, seed=0)
    fp = _SoftmaxSeq2seqMap(channel, 0.3, 2, 20, problem.denoiser(law, eig0), Q0, trace0,
                            0.1, nodes, "seq2seq")
    # q = Q0, t = τ0 and half the bulk overlap: inside the map's domain
    x = fp.to_x(trace0 ** 2 + 0.5 * (Q0 - trace0 ** 2), Q0, 1.0, trace0)
    assert fp.residual(x) is not None
    state = fp.state_at(x.copy())
    assert fp.n_calls == 1 and state is fp.last
    assert fp.state_at(x + 1e-3) is not None
    assert fp.n_calls == 2
