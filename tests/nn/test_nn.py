"""Torch backend: pre-activations, attention, losses, modules and training (docs/theory.rst §1–2)."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from skattn.data import make_attention_indexed, preactivation as np_preactivation
from skattn.data import softmax as np_softmax
from skattn.data import teacher
from skattn.data.teacher import TASKS
from skattn.metrics import attention_error
from skattn.nn import (
    DirectAttention,
    FactoredAttention,
    TrainingDivergedError,
    TrainingResult,
    functional as F,
    train,
)

HYP = settings(max_examples=25, deadline=None)



dims = st.tuples(st.integers(1, 6), st.integers(1, 5), st.integers(1, 8), st.integers(1, 8))
seeds = st.integers(0, 2 ** 31 - 1)


def _data(n, T, d, seed, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, T, d, generator=g, dtype=dtype)


def _factor(d, p, seed, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed + 1)
    return torch.randn(d, p, generator=g, dtype=dtype)


# --------------------------------------------------------------------------- functional
@HYP
@given(dims, seeds)
def test_preactivation_matches_numpy(shape, seed):
    n, T, d, _ = shape
    X = _data(n, T, d, seed)
    G = torch.randn(d, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    S = (G + G.T) / 2
    expected = np_preactivation(X.numpy(), S.numpy())
    np.testing.assert_allclose(F.preactivation(X, S).numpy(), expected, rtol=1e-10,
                               atol=1e-10)


@HYP
@given(dims, seeds)
def test_factored_preactivation_matches_S(shape, seed):
    n, T, d, p = shape
    X, W = _data(n, T, d, seed), _factor(d, p, seed)
    S = F.factored_S(W)
    np.testing.assert_allclose(F.preactivation_factored(X, W).numpy(),
                               np_preactivation(X.numpy(), S.numpy()), rtol=1e-10, atol=1e-10)
    # Tr S = ‖W‖²_F / √(p d)
    assert math.isclose(torch.trace(S).item(), (W ** 2).sum().item() / math.sqrt(p * d),
                        rel_tol=1e-12)


@HYP
@given(st.integers(1, 6), st.integers(1, 6),
       st.floats(0.01, 1e3), st.floats(1e-3, 1e3), seeds)
def test_softmax_rows_sum_to_one(n, T, scale, beta, seed):
    h = torch.randn(n, T, T, generator=torch.Generator().manual_seed(seed),
                    dtype=torch.float64) * scale
    A = F.attention_map(h, beta, "softmax")
    assert torch.all(torch.isfinite(A))
    assert torch.all(A >= 0)
    np.testing.assert_allclose(A.sum(-1).numpy(), 1.0, rtol=1e-12)
    np.testing.assert_allclose(A.numpy(), np_softmax(h.numpy(), beta), rtol=1e-9, atol=1e-12)


def test_linear_attention_is_identity():
    h = torch.randn(3, 4, 4)
    assert torch.equal(F.attention_map(h, 2.0, "linear"), h)


def test_per_sample_loss_matches_metric():
    rng = np.random.default_rng(0)
    for shape, task in [((7, 3, 3), "seq2lab"), ((7, 3, 5), "seq2seq")]:
        y, yp = rng.normal(size=shape), rng.normal(size=shape)
        loss = F.per_sample_loss(torch.tensor(yp), torch.tensor(y), task)
        assert loss.shape == (7,)
        assert math.isclose(loss.mean().item(), attention_error(y, yp, task=task),
                            rel_tol=1e-12)


def test_functional_rejects_unknown_options():
    h = torch.zeros(1, 2, 2)
    with pytest.raises(ValueError, match="attention"):
        F.attention_map(h, 1.0, "relu")
    with pytest.raises(ValueError, match="task"):
        F.attention_output(h, torch.zeros(1, 2, 3), "seq2vec")
    with pytest.raises(ValueError, match="task"):
        F.per_sample_loss(h, h, "seq2vec")


@HYP
@given(dims, seeds, st.sampled_from(["softmax", "linear"]), st.sampled_from(TASKS),
       st.floats(0.1, 10.0))
def test_forward_model_numpy_matches_torch(shape, seed, attention, task, beta):
    """One forward model: data.teacher (numpy) and nn.functional (torch) agree in float64."""
    n, T, d, _ = shape
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, T, d))
    G = rng.standard_normal((d, d))
    S = (G + G.T) / 2
    A_np = teacher.attention_map(teacher.preactivation(X, S), beta, attention)
    out_np = teacher.attention_output(A_np, X, task)
    Xt, St = torch.from_numpy(X), torch.from_numpy(S)
    out_torch = F.attention_output(F.attention_map(F.preactivation(Xt, St), beta, attention),
                                   Xt, task).numpy()
    np.testing.assert_allclose(out_np, out_torch, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------------- invariances
@HYP
@given(dims, seeds, st.sampled_from(["softmax", "linear"]),
       st.sampled_from(["seq2lab", "seq2seq"]))
def test_token_permutation_equivariance(shape, seed, attention, task):
    n, T, d, p = shape
    X = _data(n, T, d, seed)
    m = FactoredAttention(d, p, attention=attention, task=task, W=_factor(d, p, seed),
                          dtype=torch.float64)
    perm = torch.as_tensor(np.random.default_rng(seed).permutation(T))
    with torch.no_grad():
        A, A_perm = m.attention_matrix(X), m.attention_matrix(X[:, perm])
        out, out_perm = m(X), m(X[:, perm])
    # permuting tokens permutes rows and columns of the attention matrix
    np.testing.assert_allclose(A_perm.numpy(), A[:, perm][:, :, perm].numpy(), atol=1e-10)
    expected = out[:, perm][:, :, perm] if task == "seq2lab" else out[:, perm]
    np.testing.assert_allclose(out_perm.numpy(), expected.numpy(), atol=1e-10)


@HYP
@given(dims, seeds, st.sampled_from(["softmax", "linear"]))
def test_rotation_invariance(shape, seed, attention):
    n, T, d, p = shape
    X, W = _data(n, T, d, seed), _factor(d, p, seed)
    Q, _ = torch.linalg.qr(torch.randn(d, d, generator=torch.Generator().manual_seed(seed + 2),
                                       dtype=torch.float64))
    m = FactoredAttention(d, p, attention=attention, W=W, dtype=torch.float64)
    m_rot = FactoredAttention(d, p, attention=attention, W=Q.T @ W, dtype=torch.float64)
    with torch.no_grad():
        np.testing.assert_allclose(m_rot(X @ Q).numpy(), m(X).numpy(), atol=1e-10)
        # same for the direct model: V → Oᵀ V O
        D = DirectAttention(d, attention=attention, V=W @ W.T, dtype=torch.float64)
        D_rot = DirectAttention(d, attention=attention, V=Q.T @ W @ W.T @ Q,
                                dtype=torch.float64)
        np.testing.assert_allclose(D_rot(X @ Q).numpy(), D(X).numpy(), atol=1e-9)


@HYP
@given(st.integers(1, 12), st.integers(1, 12), seeds)
def test_nuclear_norm_identity(d, p, seed):
    """min ‖W‖²_F over W Wᵀ/√(pd) = S equals √(pd) Tr S, attained by the balanced factor."""
    rank = min(d, p)
    rng = np.random.default_rng(seed)
    U, _ = np.linalg.qr(rng.normal(size=(d, d)))
    lam = np.zeros(d)
    lam[:rank] = rng.uniform(0.0, 3.0, size=rank)
    S = (U * lam) @ U.T  # PSD, rank ≤ p
    # balanced factorisation W = (pd)^{1/4} U Λ^{1/2}, padded to p columns
    W = np.zeros((d, p))
    W[:, :rank] = (p * d) ** 0.25 * U[:, :rank] * np.sqrt(lam[:rank])
    Wt = torch.tensor(W)
    np.testing.assert_allclose(F.factored_S(Wt).numpy(), S, atol=1e-10)
    assert math.isclose((W ** 2).sum(), math.sqrt(p * d) * np.trace(S), rel_tol=1e-10,
                        abs_tol=1e-12)
    # every other factorisation W R (R orthogonal) has the same norm: the min is attained
    R, _ = np.linalg.qr(rng.normal(size=(p, p)))
    assert math.isclose(((W @ R) ** 2).sum(), math.sqrt(p * d) * np.trace(S), rel_tol=1e-10,
                        abs_tol=1e-12)
    # so λ‖W‖² is the trace penalty λ̃ d Tr S with λ̃ = √κ λ
    m = FactoredAttention(d, p, W=Wt, dtype=torch.float64)
    kappa = p / d
    assert math.isclose(m.penalty().item(), math.sqrt(kappa) * d * np.trace(S), rel_tol=1e-10,
                        abs_tol=1e-12)


# ------------------------------------------------------------------------ modules/grad
@pytest.mark.parametrize("attention", ["softmax", "linear"])
@pytest.mark.parametrize("task", ["seq2lab", "seq2seq"])
def test_gradcheck_factored_objective(attention, task):
    n, T, d, p = 5, 3, 4, 3
    X = _data(n, T, d, 0)
    y = torch.rand(n, T, T if task == "seq2lab" else d, dtype=torch.float64)
    m = FactoredAttention(d, p, attention=attention, task=task, beta=1.3, dtype=torch.float64)

    def objective(W):
        with torch.no_grad():
            m.W.copy_(W)
        Z = F.preactivation_factored(X, W)
        out = F.attention_output(F.attention_map(Z, 1.3, attention), X, task)
        return F.per_sample_loss(out, y, task).sum() + 0.1 * (W ** 2).sum()

    W0 = _factor(d, p, 0).requires_grad_(True)
    assert torch.autograd.gradcheck(objective, (W0,))
    # and the module's objective agrees with the functional one
    with torch.no_grad():
        m.W.copy_(W0)
        assert math.isclose(m.objective(X, y, 0.1).item(), objective(W0).item(), rel_tol=1e-12)


@pytest.mark.parametrize("attention", ["softmax", "linear"])
@pytest.mark.parametrize("task", ["seq2lab", "seq2seq"])
def test_gradcheck_direct_objective(attention, task):
    n, T, d = 5, 3, 4
    X = _data(n, T, d, 1)
    y = torch.rand(n, T, T if task == "seq2lab" else d, dtype=torch.float64)
    m = DirectAttention(d, attention=attention, task=task, dtype=torch.float64)

    def objective(Vp):
        V = (Vp + Vp.T) / 2  # the module's symmetrisation
        out = F.attention_output(F.attention_map(F.preactivation(X, F.direct_S(V)), 1.0,
                                                 attention), X, task)
        return F.per_sample_loss(out, y, task).sum() + 0.1 * (V ** 2).sum()

    V0 = torch.randn(d, d, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    V0 = ((V0 + V0.T) / 2).requires_grad_(True)
    assert torch.autograd.gradcheck(objective, (V0,))
    with torch.no_grad():
        m.V_param.copy_(V0)
        assert math.isclose(m.objective(X, y, 0.1).item(), objective(V0).item(), rel_tol=1e-12)


def test_module_gradients_match_autograd_of_functional():
    X = _data(6, 2, 5, 4)
    y = torch.rand(6, 2, 2, dtype=torch.float64)
    m = DirectAttention(5, V=torch.eye(5, dtype=torch.float64), dtype=torch.float64)
    m.objective(X, y, 0.3).backward()
    g = m.V_param.grad
    torch.testing.assert_close(g, g.T)  # projected onto symmetric matrices


def test_direct_V_stays_symmetric_under_adam():
    X, y = make_attention_indexed(200, 8, random_state=0, layout="tokens")
    Xt, yt = torch.tensor(X), torch.tensor(y)
    m = DirectAttention(8, V=np.random.default_rng(0).normal(size=(8, 8)), init_scale=0.0,
                        dtype=torch.float64)
    train(m, Xt, yt, reg_lambda=0.1, solver="adam", max_iter=30, learning_rate_init=0.1)
    V = m.V_param.detach()
    torch.testing.assert_close(V, V.T)
    assert math.isclose(m.penalty().item(), (V ** 2).sum().item(), rel_tol=1e-12)


def test_module_shapes_and_errors():
    m = FactoredAttention(6, 3, dtype=torch.float64)
    assert m.W.shape == (6, 3) and m.n_features == 6 and m.width == 3
    assert torch.all(m.W != 0)  # never the zero stationary point
    with pytest.raises(ValueError, match="W must have shape"):
        FactoredAttention(6, 3, W=torch.zeros(5, 3))
    with pytest.raises(ValueError, match="V must have shape"):
        DirectAttention(6, V=torch.zeros(5, 5))
    with pytest.raises(ValueError, match="attention"):
        FactoredAttention(6, 3, attention="relu")
    with pytest.raises(ValueError, match="task"):
        DirectAttention(6, task="seq2vec")


# ----------------------------------------------------------------------------- training
def _problem(n=300, d=12, T=2, seed=0, task="seq2lab", attention="softmax"):
    X, y = make_attention_indexed(n, d, n_tokens=T, task=task, attention=attention,
                                  random_state=seed, layout="tokens")
    return torch.tensor(X), torch.tensor(y)


@pytest.mark.parametrize("model", ["factored", "direct"])
def test_adam_and_lbfgs_reach_same_objective(model):
    X, y = _problem()
    d = X.shape[-1]
    results = {}
    for solver in ("adam", "lbfgs"):
        if model == "factored":
            m = FactoredAttention(d, d, W=_factor(d, d, 0), dtype=torch.float64)
        else:
            m = DirectAttention(d, dtype=torch.float64)
        res = train(m, X, y, reg_lambda=0.05, solver=solver, max_iter=5000, tol=1e-9,
                    n_iter_no_change=20, learning_rate_init=0.05)
        assert isinstance(res, TrainingResult)
        assert res.converged
        assert res.n_iter == len(res.objective_history)
        results[solver] = res.objective
    assert math.isclose(results["adam"], results["lbfgs"], rel_tol=1e-3)


def test_lbfgs_objective_is_monotone_and_result_consistent():
    X, y = _problem()
    m = FactoredAttention(12, 6, W=_factor(12, 6, 1), dtype=torch.float64)
    res = train(m, X, y, reg_lambda=0.01, solver="lbfgs", max_iter=300)
    h = res.objective_history
    assert np.all(np.diff(h) <= 1e-9 * np.abs(h[:-1]))
    assert h[0] <= res.initial_objective
    with torch.no_grad():
        data = m.data_loss(X, y).item()
        assert math.isclose(res.objective, data + 0.01 * m.penalty().item(), rel_tol=1e-10)
    assert math.isclose(res.train_error, data / X.shape[0], rel_tol=1e-10)


def test_minibatch_adam_scales_data_term():
    X, y = _problem(n=400)
    m = FactoredAttention(12, 12, W=_factor(12, 12, 2), dtype=torch.float64)
    # the scaled minibatch objective is an unbiased estimate of the full one
    with torch.no_grad():
        full = m.objective(X, y, 0.1).item()
        parts = [m.objective(X[i:i + 100], y[i:i + 100], 0.1, data_scale=4.0).item()
                 for i in range(0, 400, 100)]
    assert math.isclose(np.mean(parts), full, rel_tol=1e-12)
    ref = FactoredAttention(12, 12, W=_factor(12, 12, 2), dtype=torch.float64)
    full_res = train(ref, X, y, reg_lambda=0.1, solver="lbfgs", max_iter=500, tol=1e-9)
    res = train(m, X, y, reg_lambda=0.1, solver="adam", batch_size=100, max_iter=100,
                learning_rate_init=0.05, random_state=0, tol=1e-7)
    assert res.objective < 1.01 * full_res.objective


def test_training_diverges_cleanly():
    X, y = _problem(attention="linear")
    X, y = X.float(), y.float()
    m = FactoredAttention(12, 12, attention="linear", W=_factor(12, 12, 0, torch.float32),
                          dtype=torch.float32)
    with pytest.raises(TrainingDivergedError, match="learning_rate_init") as info:
        train(m, X, y, reg_lambda=0.01, solver="adam", learning_rate_init=1e12, max_iter=50)
    err = info.value
    assert isinstance(err, ValueError) and isinstance(err, ArithmeticError)
    assert "float64" in str(err)
    assert torch.all(torch.isfinite(m.W))
    with torch.no_grad():
        assert math.isfinite(m.objective(X, y, 0.01).item())
    assert err.result is not None and np.all(np.isfinite(err.result.objective_history))


def test_not_converged_flag():
    X, y = _problem()
    m = FactoredAttention(12, 12, W=_factor(12, 12, 0), dtype=torch.float64)
    res = train(m, X, y, reg_lambda=0.01, solver="adam", max_iter=3)
    assert res.n_iter == 3 and not res.converged


def test_train_rejects_unknown_solver():
    X, y = _problem(n=10)
    with pytest.raises(ValueError, match="solver"):
        train(FactoredAttention(12, 2), X.float(), y.float(), solver="sgd")


def test_verbose_progress_bar(capsys):
    X, y = _problem(n=50)
    m = FactoredAttention(12, 4, W=_factor(12, 4, 0), dtype=torch.float64)
    train(m, X, y, reg_lambda=0.01, solver="lbfgs", max_iter=5, verbose=2)
    err = capsys.readouterr().err
    assert "objective/d²" in err


@pytest.fixture(scope="module")
def sharp_problem():
    from skattn.data import WishartTarget
    return make_attention_indexed(120, 20, n_tokens=2, target=WishartTarget(0.5),
                                  random_state=0, layout="tokens")


@pytest.mark.parametrize("est_name", ["TiedAttentionRegressor", "DirectAttentionRegressor"])
def test_adam_stall_is_not_convergence(sharp_problem, est_name):
    # β = 100: Adam's step collapses (lr_decay) far from the minimum L-BFGS reaches; the
    # objective stops changing, but that is a stall, not convergence
    import skattn
    from sklearn.exceptions import ConvergenceWarning

    X, y = sharp_problem
    Est = getattr(skattn, est_name)
    with pytest.warns(ConvergenceWarning, match="stalled"):
        adam = Est(solver="adam", beta=100.0, max_iter=300, random_state=0).fit(X, y)
    assert adam.converged_ is False and adam.n_iter_ < 300
    # L-BFGS, given the iterations it needs (790 for the tied model with numpy 2.4 / torch
    # 2.13), converges far below the point where Adam stalled
    lbfgs = Est(solver="lbfgs", beta=100.0, max_iter=3000, random_state=0).fit(X, y)
    assert lbfgs.converged_ is True
    assert lbfgs.train_objective_ < 0.01 * adam.train_objective_


def test_converged_means_small_relative_gradient(sharp_problem):
    X, y = (torch.as_tensor(a) for a in sharp_problem)
    m = FactoredAttention(20, 20, W=_factor(20, 20, 0), dtype=torch.float64)
    w0 = float(torch.linalg.norm(m.W.detach()))
    res = train(m, X, y, reg_lambda=0.01, solver="lbfgs", tol=1e-9)
    assert res.converged and "converged" in res.message
    # the stationarity test, recomputed from autograd at the returned parameters
    m.zero_grad()
    obj = m.objective(X, y, 0.01)
    obj.backward()
    r = float(torch.linalg.norm(m.W.grad)) * max(float(torch.linalg.norm(m.W.detach())), w0) / max(
        abs(res.initial_objective), abs(obj.item()))
    assert r == pytest.approx(res.relative_gradient_norm, rel=1e-6)
    assert r <= 10 * math.sqrt(1e-9)
    # the same run judged with a stricter gtol is reported, not hidden
    m2 = FactoredAttention(20, 20, W=_factor(20, 20, 0), dtype=torch.float64)
    strict = train(m2, X, y, reg_lambda=0.01, solver="lbfgs", tol=1e-9, gtol=r / 10)
    assert not strict.converged and "stalled" in strict.message
    with pytest.raises(ValueError, match="gtol"):
        train(m2, X, y, solver="lbfgs", gtol=0.0)


def _reference_factored_objective(X, W, y, beta, reg_lambda):
    """The tied objective in plain torch operations (autograd of ``Z Zᵀ`` and
    ``torch.softmax``): the reference for the hand-written backward passes (#30)."""
    d, p = W.shape[-2:]
    Z = X @ W if W.ndim == 2 else torch.einsum("...td,hdp->...htp", X, W)
    T = X.shape[-2]
    trace = torch.sum(W * W) if W.ndim == 2 else torch.sum(W * W, dim=(-2, -1))[:, None, None]
    h = (Z @ Z.transpose(-1, -2) - trace * torch.eye(T, dtype=X.dtype)) / (math.sqrt(p * d)
                                                                           * math.sqrt(d))
    A = torch.softmax(beta * h, dim=-1)
    if W.ndim == 3:
        A = A.mean(dim=-3)
    return torch.sum((A - y) ** 2) + reg_lambda * torch.sum(W * W)


@pytest.mark.parametrize("T", [2, 3, 6, 10])  # slab backward / batched matmul; short rows / not
@pytest.mark.parametrize("n_heads", [1, 3])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_tied_step_gradient_matches_plain_autograd(T, n_heads, dtype):
    n, d, p, beta = 40, 7, 5, 1.7
    gen = torch.Generator().manual_seed(T + 10 * n_heads)
    X = torch.randn(n, T, d, generator=gen, dtype=dtype)
    y = torch.softmax(torch.randn(n, T, T, generator=gen, dtype=dtype), dim=-1)
    m = FactoredAttention(d, p, beta=beta, n_heads=n_heads, generator=gen, dtype=dtype)
    m.objective(X, y, 0.05).backward()
    W = m.W.detach().clone().requires_grad_(True)
    ref = _reference_factored_objective(X, W, y, beta, 0.05)
    ref.backward()
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(m.objective(X, y, 0.05).detach(), ref.detach(), **tol)
    torch.testing.assert_close(m.W.grad, W.grad, **tol)


def test_gram_and_short_softmax_have_second_derivatives():
    gen = torch.Generator().manual_seed(5)
    Z = torch.randn(3, 2, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradgradcheck(F.token_gram, (Z,))
    t = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda z, s: F.token_gram(z, s, 0.3), (Z, t))
    assert torch.autograd.gradgradcheck(lambda z, s: F.token_gram(z, s, 0.3), (Z, t))
    Zh = torch.randn(3, 2, 2, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    th = torch.rand(2, 1, 1, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda z, s: F.token_gram(z, s, 0.3), (Zh, th))
    h = torch.randn(3, 3, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda z: F.softmax(z, 2.5), (h,))
    # large logits stay finite (the row maximum is subtracted)
    big = torch.tensor([[[800.0, 0.0], [0.0, -900.0]]], dtype=torch.float64)
    torch.testing.assert_close(F.softmax(big, 1.0), torch.softmax(big, dim=-1))


@pytest.mark.parametrize("T", [2, 6])
@pytest.mark.parametrize("model", ["untied", "untied3", "direct"])
def test_untied_and_direct_gradients_match_plain_autograd(T, model):
    from skattn.nn import UntiedAttention

    n, d, p, beta, lam = 30, 6, 4, 1.3, 0.07
    gen = torch.Generator().manual_seed(T)
    X = torch.randn(n, T, d, generator=gen, dtype=torch.float64)
    y = torch.softmax(torch.randn(n, T, T, generator=gen, dtype=torch.float64), dim=-1)
    if model == "direct":
        m = DirectAttention(d, beta=beta, init_scale=1.0, generator=gen, dtype=torch.float64)
        params = [m.V_param]
    else:
        m = UntiedAttention(d, p, beta=beta, n_heads=3 if model == "untied3" else 1,
                            generator=gen, dtype=torch.float64)
        params = [m.W_Q, m.W_K]
    m.objective(X, y, lam).backward()
    ref = [q.detach().clone().requires_grad_(True) for q in params]
    if model == "direct":
        V = (ref[0] + ref[0].T) / 2
        h = ((X @ (V / math.sqrt(d))) @ X.transpose(-1, -2)
             - torch.trace(V / math.sqrt(d)) * torch.eye(T, dtype=X.dtype)) / math.sqrt(d)
        A, pen = torch.softmax(beta * h, -1), torch.sum(V * V)
    else:
        WQ, WK = ref
        if WQ.ndim == 2:
            Q, K, tr = X @ WQ, X @ WK, torch.sum(WQ * WK)
        else:
            Q = torch.einsum("ntd,hdp->nhtp", X, WQ)
            K = torch.einsum("ntd,hdp->nhtp", X, WK)
            tr = torch.sum(WQ * WK, dim=(-2, -1))[:, None, None]
        h = (Q @ K.transpose(-1, -2) - tr * torch.eye(T, dtype=X.dtype)) / (math.sqrt(p * d)
                                                                             * math.sqrt(d))
        A = torch.softmax(beta * h, -1)
        A = A.mean(-3) if WQ.ndim == 3 else A
        pen = (torch.sum(WQ * WQ) + torch.sum(WK * WK)) / 2
    (torch.sum((A - y) ** 2) + lam * pen).backward()
    for q, r in zip(params, ref):
        torch.testing.assert_close(q.grad, r.grad, rtol=1e-12, atol=1e-12)


def test_token_bilinear_gradients_with_broadcast():
    gen = torch.Generator().manual_seed(9)
    Q = torch.randn(3, 2, 2, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    K = torch.randn(3, 1, 2, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(F.token_bilinear, (Q, K))
    assert torch.autograd.gradgradcheck(F.token_bilinear, (Q, K))
