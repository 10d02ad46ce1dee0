"""Finite-d seq2seq state evolution of factored linear attention (skattn/theory/seq2seq.py).

docs/theory.rst §4, "Finite d", seq2seq: the token Gram matrix weights the residual rows; the
exact-Gram (Bartlett) channel predicts the excess of the seq2seq estimator over the seq2lab
one, and solve_state_evolution routes finite-d linear seq2seq problems to it.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skattn import TiedAttentionRegressor
from skattn.data import AttentionIndexedModel, WishartTarget
from skattn.theory import StateEvolutionProblem, explain, solve_state_evolution
from skattn.theory.channels import GaussianNodes
from skattn.theory.coords import u_from_h
from skattn.theory.seq2seq import (
    bartlett_output_side,
    frame_covariance,
    seq2seq_metric_factor,
    seq2seq_output_side,
    solve_seq2seq_state_evolution,
)
from skattn.theory.corrections.exact_gram import exact_gram_prediction, seq2seq_prediction

LINEAR = dict(reg_lambda=0.05)


def _teacher(d=40, T=2, noise=0.0, seed=0):
    return AttentionIndexedModel(d, n_tokens=T, target=WishartTarget(0.5), attention="linear",
                                 noise=noise, random_state=seed)


# -- reductions ---------------------------------------------------------------------------


@pytest.mark.parametrize("T, noise", [(2, 0.0), (1, 0.3)])
def test_identity_weights_are_the_seq2lab_state_evolution(T, noise):
    """G = I: the multi-index map (with t as a state variable) has the seq2lab fixed point."""
    teacher = _teacher(T=T, noise=noise)
    ref = solve_state_evolution(0.3, target=teacher, correction="none", **LINEAR)
    # start away from the seq2lab fixed point, so that the iteration is tested
    start = ref.__class__(**{**ref.__dict__, "m": 0.9 * ref.m, "q": 0.9 * ref.q,
                             "sigma": 1.2 * ref.sigma,
                             "params": {**ref.params, "trace": 0.8 * ref.trace}})
    res = solve_seq2seq_state_evolution(0.3, target=teacher, model="gaussian", loss="seq2lab",
                                        init=start, **LINEAR)
    assert res.converged and res.m_hat_identity == 0.0
    for name in ("m", "q", "sigma", "trace", "s_error", "train_error", "train_objective"):
        assert getattr(res, name) == pytest.approx(getattr(ref, name), rel=1e-4), name
    assert res.seq2lab_test_error == pytest.approx(ref.test_error, rel=2e-3)  # MC vs exact


def test_gaussian_weights_vanish_as_d_grows():
    """``G = I + h(g)/√d``: at d → ∞ the output side is the identity-weights one."""
    kw = dict(m=1.2, q=1.4, t=0.6, Q0=1.5, trace0=0.7, noise=0.1, sigma=0.3, alpha=0.3)
    nodes3 = GaussianNodes(9, n_points=4096, seed=1)
    nodes2 = GaussianNodes(6, n_points=4096, seed=1)
    big = seq2seq_output_side(2, nodes3, n_features=10 ** 12, **kw)
    ident = seq2seq_output_side(2, nodes2, n_features=40, weights="identity", **kw)
    assert big.m_hat_identity == pytest.approx(0.0, abs=3e-3 * big.m_hat)
    for name in ("m_hat", "q_hat", "sigma_hat", "train_error"):
        assert getattr(big, name) == pytest.approx(getattr(ident, name), rel=2e-2), name


def test_bartlett_seq2lab_tends_to_gaussian_channel():
    """Exact Gram, seq2lab loss: at large d the norms and cosines concentrate and the
    channel is the Gaussian one (m̂ = Σ̂ = 2α K·4/(1+4Σ) for linear attention)."""
    kw = dict(m=1.0, q=1.4, t=0.6, Q0=1.5, trace0=0.7, noise=0.0, sigma=0.3, alpha=0.3)
    out = bartlett_output_side(2, GaussianNodes(12, n_points=4096, seed=0),
                               n_features=10 ** 8, task="seq2lab", **kw)
    exact = 2 * 0.3 * 3 * 4 / (1 + 4 * 0.3)
    assert out.sigma_hat == pytest.approx(exact, rel=1e-6)
    assert out.m_hat_identity == pytest.approx(0.0, abs=2e-2)
    # q̂ = 2α E‖g‖² with g = 4 (w − ω)/(1 + 4Σ) per component, Var(w − ω) = Q0 − 2m + q
    assert out.q_hat == pytest.approx(2 * 0.3 * 3 * 16 * 0.9 / (1 + 1.2) ** 2, rel=3e-2)


def test_frame_covariance_is_the_haar_covariance():
    """u-components of ``√d Q S Qᵀ`` over uniform orthonormal frames (T = 3, d = 7)."""
    rng = np.random.default_rng(1)
    T, d, n = 3, 7, 100_000
    A = rng.standard_normal((d, d))
    S = (A + A.T) / 2
    S -= np.trace(S) / d * np.eye(d)                     # traceless
    Q = np.linalg.qr(rng.standard_normal((n, d, T)))[0]  # (n, d, T), orthonormal columns
    V = np.sqrt(d) * np.swapaxes(Q, 1, 2) @ S @ Q
    u = u_from_h(V)
    empirical = u.T @ u / n / (np.sum(S * S) / d)
    np.testing.assert_allclose(empirical, frame_covariance(T, d), atol=0.02)
    assert frame_covariance(T, d)[0, 1] < -0.05         # the diagonal components anticorrelate


def _moreau_envelope(nodes, T, d, m, q, t, Q0, trace0, noise, sigma, task):
    """Averaged Moreau envelope of the exact-Gram channel, written from the residual
    ``R = B(h(z) − h(v0))Bᵀ + (t − τ0) h(I) − ξ`` directly (independent of the module's
    whitened form)."""
    from skattn.theory.coords import _maps, h_from_u
    from skattn.theory.seq2seq import _bartlett_factor

    K = T * (T + 1) // 2
    pts = nodes.points
    m_perp, q_perp = m - t * trace0, q - t * t
    V = Q0 - trace0 ** 2 - m_perp ** 2 / q_perp
    root = np.linalg.cholesky(frame_covariance(T, d))
    B = _bartlett_factor(pts[:, 3 * K:], T, d)
    G = B @ np.swapaxes(B, 1, 2)
    omega = np.sqrt(q_perp) * pts[:, :K] @ root.T
    v0 = (m_perp / q_perp) * omega + np.sqrt(V) * pts[:, K:2 * K] @ root.T
    xi = h_from_u(np.sqrt(noise / 2) * pts[:, 2 * K:3 * K], T)
    LB = np.einsum("nac,cek,nbe->nabk", B, _maps(T)[2].reshape(T, T, K), B)
    weight = G if task == "seq2seq" else np.broadcast_to(np.eye(T), G.shape)
    c = (t - trace0) * np.sqrt(d) * (G - np.eye(T)) - xi - np.einsum("nabk,nk->nab", LB, v0)
    W = np.einsum("nabk,nbc,nacl->nkl", LB, weight, LB)
    lin = np.einsum("nabk,nbc,nac->nk", LB, weight, c)
    z = np.linalg.solve(np.eye(K) / sigma + 2 * W, (omega / sigma - 2 * lin)[..., None])[..., 0]
    R = np.einsum("nabk,nk->nab", LB, z) + c
    loss = np.einsum("nab,nbc,nac->n", R, weight, R)
    return nodes.mean(np.sum((z - omega) ** 2, axis=1) / (2 * sigma) + loss)


@pytest.mark.parametrize("task", ["seq2seq", "seq2lab"])
def test_bartlett_conjugates_are_envelope_derivatives(task):
    """``m̂ = −2α ∂M/∂m``, ``Σ̂ = 4α ∂M/∂q``, ``m̂_I = −2α ∂M/∂t`` at fixed others."""
    T, d, alpha, eps = 2, 40, 0.3, 1e-4
    nodes = GaussianNodes(12, n_points=4096, seed=3)
    base = dict(m=1.1, q=1.4, t=0.6)
    fixed = dict(Q0=1.5, trace0=0.7, noise=0.2, sigma=0.3)
    out = bartlett_output_side(T, nodes, alpha=alpha, n_features=d, task=task, **base, **fixed)

    def derivative(name):
        up, down = ({**base, name: base[name] + sign * eps} for sign in (1, -1))
        return (_moreau_envelope(nodes, T, d, task=task, **up, **fixed)
                - _moreau_envelope(nodes, T, d, task=task, **down, **fixed)) / (2 * eps)

    assert out.m_hat == pytest.approx(-2 * alpha * derivative("m"), rel=1e-3)
    assert out.sigma_hat == pytest.approx(4 * alpha * derivative("q"), rel=1e-3)
    assert out.m_hat_identity == pytest.approx(-2 * alpha * derivative("t"), rel=2e-2,
                                               abs=1e-4)
    assert abs(out.m_hat_identity) > 1e-3           # the trace direction is not free


# -- the metric ---------------------------------------------------------------------------


def test_metric_factor_matches_token_average():
    """``E‖h(Δ) x‖²/d = (1 + c_T/d) E‖h(Δ)‖²`` over Gaussian tokens (c_2 = 14/3)."""
    rng = np.random.default_rng(0)
    d, T, n = 8, 2, 200_000
    A = rng.standard_normal((d, d))
    delta = (A + A.T) / 2
    X = rng.standard_normal((n, T, d))
    h = (np.einsum("nai,ij,nbj->nab", X, delta, X) - np.trace(delta) * np.eye(T)) / np.sqrt(d)
    seq = np.mean(np.sum((h @ X) ** 2, axis=(1, 2)) / d)
    lab = np.mean(np.sum(h ** 2, axis=(1, 2)))
    assert seq / lab == pytest.approx(seq2seq_metric_factor(T, d), rel=0.02)
    assert seq2seq_metric_factor(2, d) - 1 > 0.5      # the factor is not 1 at this d


@settings(max_examples=30, deadline=None)
@given(T=st.integers(1, 6), d=st.integers(1, 10 ** 6))
def test_metric_factor_decreases_to_one(T, d):
    assert 1 < seq2seq_metric_factor(T, 2 * d) < seq2seq_metric_factor(T, d)


# -- routing ------------------------------------------------------------------------------


def _exact_gram_weight(problem, rank_capped=False, alpha=0.3):
    """The exact-Gram correction's domain weight (its ``decide`` rule, with a stand-in core
    that carries only what the rule reads)."""
    from skattn.theory.core.solve import CoreSolution
    from skattn.theory.corrections.exact_gram import ExactGramCorrection

    core = CoreSolution(result=None, rank_capped=rank_capped, collapsed=False,
                        eigenvalues=None)
    return ExactGramCorrection().decide(alpha, problem, core).weight


def test_routed_seq2seq_prediction():
    teacher = _teacher()
    lab = solve_state_evolution(0.3, target=teacher, **LINEAR)
    seq = solve_state_evolution(0.3, target=teacher, task="seq2seq", **LINEAR)
    assert lab.correction == "none"              # linear seq2lab: the Gaussian core at α_eff
    assert seq.converged and seq.correction == "exact_gram" and seq.correction_weight == 1.0
    assert _exact_gram_weight(seq.problem) == 1.0 and _exact_gram_weight(lab.problem) == 0.0
    assert seq.s_error > 1.1 * lab.s_error            # the Gram weights cost accuracy
    assert seq.test_error > seq2seq_metric_factor(2, 40) * lab.test_error
    direct = seq2seq_prediction(lab)
    for name in ("m", "q", "test_error", "train_error", "train_objective", "trace"):
        assert getattr(seq, name) == pytest.approx(getattr(direct, name), rel=1e-12), name
    # it is the exact-Gram fixed point with the seq2seq loss
    own = solve_seq2seq_state_evolution(0.3, target=teacher, model="bartlett", **LINEAR)
    for name in ("m", "q", "sigma", "trace", "test_error", "train_objective"):
        assert getattr(seq, name) == pytest.approx(getattr(own, name), rel=1e-6), name


def test_continuum_and_binding_softmax_caps_are_not_routed():
    problem = StateEvolutionProblem(WishartTarget(0.5), n_tokens=2, reg_lambda=0.05,
                                    task="seq2seq", attention="linear")
    assert _exact_gram_weight(problem) == 0.0                 # continuum
    softmax_capped = problem.replace(n_features=40, attention="softmax", width_ratio=0.5)
    assert _exact_gram_weight(softmax_capped, rank_capped=True) == 0.0
    assert _exact_gram_weight(softmax_capped, rank_capped=False) == 1.0
    assert _exact_gram_weight(problem.replace(n_features=40)) == 1.0
    assert _exact_gram_weight(problem.replace(n_features=40, width_ratio=0.5),
                              rank_capped=True) == 1.0     # linear: the capped channel
    # explain() shows the same row for the solved problem
    table = explain(0.3, problem.replace(n_features=40), options=dict(n_nodes=512))
    assert table.applied == ["exact_gram"]


# -- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, match", [
    (dict(model="exact"), "model"),
    (dict(loss="seq2vec"), "loss"),
    (dict(n_nodes=4), "n_nodes"),
    (dict(tol=0.0), "tol"),
    (dict(damping=1.5), "damping"),
])
def test_solver_rejects_bad_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        solve_seq2seq_state_evolution(0.3, target=_teacher(20), **LINEAR, **kwargs)


def test_solver_rejects_models_outside_its_domain():
    with pytest.raises(ValueError, match="alpha"):
        solve_seq2seq_state_evolution(0.0, target=_teacher(20), **LINEAR)
    with pytest.raises(ValueError, match="n_features"):
        solve_seq2seq_state_evolution(0.3, target=WishartTarget(0.5), n_tokens=2, **LINEAR)
    problem = StateEvolutionProblem(WishartTarget(0.5), n_tokens=2, reg_lambda=0.05,
                                    n_features=20)
    with pytest.raises(ValueError, match="attention"):
        solve_seq2seq_state_evolution(0.3, problem)
    with pytest.raises(ValueError, match="parametrization"):
        solve_seq2seq_state_evolution(0.3, problem.replace(attention="linear",
                                                           parametrization="direct"))
    with pytest.raises(ValueError, match="token_kurtosis"):
        solve_seq2seq_state_evolution(0.3, problem.replace(attention="linear",
                                                           token_kurtosis=-2.0))
    with pytest.raises(TypeError, match="reg_lambda"):
        solve_seq2seq_state_evolution(0.3, target=_teacher(20))
    with pytest.raises(TypeError, match="init"):
        solve_seq2seq_state_evolution(0.3, target=_teacher(20), init=(1.0, 1.0), **LINEAR)
    with pytest.raises(TypeError, match="seq2lab"):
        seq2seq_prediction((1.0, 1.0, 0.5))
    linear = solve_state_evolution(0.3, target=_teacher(40), options=dict(n_nodes=512),
                                   **LINEAR)
    with pytest.raises(ValueError, match="loss='seq2lab'"):
        exact_gram_prediction(linear, loss="seq2lab")
    with pytest.raises(ValueError, match="loss"):
        exact_gram_prediction(linear, loss="seq2vec")


def test_output_sides_reject_bad_input():
    kw = dict(m=1.0, q=1.4, t=0.6, Q0=1.5, trace0=0.7, noise=0.0, sigma=0.3, alpha=0.3,
              n_features=40)
    with pytest.raises(ValueError, match="nodes must have dim 9"):
        seq2seq_output_side(2, GaussianNodes(6, n_points=64), **kw)
    with pytest.raises(ValueError, match="weights"):
        seq2seq_output_side(2, GaussianNodes(9, n_points=64), weights="wishart", **kw)
    with pytest.raises(ValueError, match="Gram matrix"):
        seq2seq_output_side(2, GaussianNodes(9, n_points=64), **{**kw, "t": 1.5})
    with pytest.raises(ValueError, match="nodes must have dim 4K = 12"):
        bartlett_output_side(2, GaussianNodes(9, n_points=64), **kw)
    with pytest.raises(ValueError, match="non-degenerate bulk"):
        bartlett_output_side(2, GaussianNodes(12, n_points=64), **{**kw, "t": 1.2})
    with pytest.raises(ValueError, match="n_features"):
        bartlett_output_side(2, GaussianNodes(12, n_points=64), **{**kw, "n_features": 2})
    with pytest.raises(ValueError, match="sigma"):
        bartlett_output_side(2, GaussianNodes(12, n_points=64), **{**kw, "sigma": 0.0})
    with pytest.raises(ValueError, match="task"):
        bartlett_output_side(2, GaussianNodes(12, n_points=64), task="seq2vec", **kw)
    with pytest.raises(ValueError, match="n_tokens"):
        seq2seq_metric_factor(0, 10)
    with pytest.raises(ValueError, match="n_features"):
        seq2seq_metric_factor(2, 0)


# -- against trained models ---------------------------------------------------------------


def test_predicted_excess_matches_training_d40():
    """Same teacher and tokens, seq2lab vs seq2seq labels (linear T = 2, α = 0.3,
    λ = 0.05, Wishart(0.5), d = 40): the exact-Gram channel predicts the excess of
    ``‖Ŝ − S0‖²_F`` (measured +24 %, predicted +20 %; the Gaussian-weights model
    predicts +10 %)."""
    d = 40
    teacher = _teacher(d)
    X, A = teacher.sample(int(0.3 * d * d), random_state=1000, layout="tokens")
    errors = {}
    for task, y in (("seq2lab", A), ("seq2seq", A @ X)):
        est = TiedAttentionRegressor(reg_lambda=0.05, attention="linear", task=task,
                                     n_tokens=2, dtype="float64", random_state=0).fit(X, y)
        errors[task] = np.sum((est.S_ - teacher.S0_) ** 2) / d
    measured = errors["seq2seq"] / errors["seq2lab"] - 1
    pred = {loss: solve_seq2seq_state_evolution(0.3, target=teacher, model="bartlett",
                                                loss=loss, **LINEAR) for loss in
            ("seq2lab", "seq2seq")}
    predicted = pred["seq2seq"].s_error / pred["seq2lab"].s_error - 1
    assert measured > 0.1
    assert abs(predicted - measured) < 0.3 * measured


def test_bartlett_channel_is_solved_at_nominal_alpha():
    """The exact-Gram channel is solved at α (its token-norm fluctuations are what α_eff
    stands in for in the Gaussian model): passing α(d+1)/d must change its prediction the
    way a larger α does, and its seq2lab loss at α lands near the Gaussian state evolution
    at α_eff (2 % at d = 100), far from the Gaussian one at α."""
    d = 100
    teacher = _teacher(d, seed=3)
    bart = solve_seq2seq_state_evolution(0.3, target=teacher, loss="seq2lab", **LINEAR)
    more = solve_seq2seq_state_evolution(0.3 * (d + 1) / d, target=teacher, loss="seq2lab",
                                         **LINEAR)
    assert more.seq2lab_test_error < bart.seq2lab_test_error
    assert bart.alpha == 0.3
    gauss_eff = solve_state_evolution(0.3, target=teacher, **LINEAR)
    gauss_nominal = solve_state_evolution(0.3 * (d + 1) / d, target=teacher, **LINEAR)
    gap_eff = bart.seq2lab_test_error / gauss_eff.test_error - 1
    gap_nominal = bart.seq2lab_test_error / gauss_nominal.test_error - 1
    assert abs(gap_eff) < 0.025
    assert abs(gap_nominal) > abs(gap_eff) + 0.01
