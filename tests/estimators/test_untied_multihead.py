"""Untied (W_Q ≠ W_K) and multi-head attention: forward model, penalty, estimators."""

import math
import pickle
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV

from skattn import TiedAttentionRegressor, UntiedAttentionRegressor, make_attention_indexed
from skattn.data import WishartTarget
from skattn.data import attention_map as np_attention_map
from skattn.data import preactivation as np_preactivation
from skattn.nn import FactoredAttention, UntiedAttention, train
from skattn.nn import functional as F

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")
seeds = st.integers(0, 2 ** 31 - 1)
HYP = settings(max_examples=25, deadline=None)


def _randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed),
                       dtype=torch.float64)


def _multihead_teacher(n_heads, d, seed):
    """One Wishart S_k per head."""
    rng = np.random.default_rng(seed)
    return np.stack([WishartTarget(0.5).sample(d, random_state=rng) for _ in range(n_heads)])


def _multihead_sample(S, n, n_tokens, seed):
    """Gaussian tokens and the mean over heads of softmax(h(S_k; x))."""
    X = np.random.default_rng(seed).standard_normal((n, n_tokens, S.shape[-1]))
    y = np.mean([np_attention_map(np_preactivation(X, S_k)) for S_k in S], axis=0)
    return X, y


# ------------------------------------------------------------------ forward model
@HYP
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 7), st.integers(1, 7),
       st.integers(1, 3), seeds)
def test_untied_preactivation_matches_the_dense_formula(n, T, d, p, n_heads, seed):
    """h from X W_Q, X W_K equals (xᵀ S x − δ Tr S)/√d with S = W_Q W_Kᵀ/√(pd), per head."""
    X = _randn(n, T, d, seed=seed)
    W_Q, W_K = _randn(n_heads, d, p, seed=seed + 1), _randn(n_heads, d, p, seed=seed + 2)
    h = F.preactivation_untied(X, W_Q, W_K)
    S = F.untied_S(W_Q, W_K)
    assert h.shape == (n, n_heads, T, T)
    np.testing.assert_allclose(F.preactivation(X, S).numpy(), h.numpy(), atol=1e-10)
    for k in range(n_heads):
        np.testing.assert_allclose(h[:, k].numpy(), np_preactivation(X.numpy(), S[k].numpy()),
                                   rtol=1e-10, atol=1e-10)
        # the single-head path agrees with the head axis
        np.testing.assert_allclose(F.preactivation_untied(X, W_Q[k], W_K[k]).numpy(),
                                   h[:, k].numpy(), rtol=1e-12, atol=1e-12)


def test_untied_preactivation_is_not_symmetric():
    X = _randn(5, 3, 6, seed=0)
    h = F.preactivation_untied(X, _randn(6, 6, seed=1), _randn(6, 6, seed=2))
    assert not torch.allclose(h, h.transpose(-1, -2))


def test_untied_preactivation_rejects_mismatched_factors():
    with pytest.raises(ValueError, match="W_Q and W_K must have the same shape"):
        F.preactivation_untied(_randn(2, 2, 4), _randn(4, 2), _randn(4, 3))


@pytest.mark.parametrize("attention", ["softmax", "linear"])
@pytest.mark.parametrize("task", ["seq2lab", "seq2seq"])
def test_untied_at_equal_factors_is_the_tied_model(attention, task):
    """W_Q = W_K = W: same predictions, penalty, objective, and gradient ∂_Q + ∂_K = ∂_W."""
    d, p, T, n = 8, 5, 3, 40
    X = _randn(n, T, d, seed=3)
    W = _randn(d, p, seed=4)
    y = _randn(n, T, T if task == "seq2lab" else d, seed=5).softmax(-1)
    tied = FactoredAttention(d, p, W=W, attention=attention, task=task, dtype=torch.float64)
    untied = UntiedAttention(d, p, W_Q=W, W_K=W, attention=attention, task=task,
                             dtype=torch.float64)
    np.testing.assert_allclose(untied(X).detach().numpy(), tied(X).detach().numpy(),
                               rtol=1e-12, atol=1e-14)
    assert untied.penalty().item() == pytest.approx(tied.penalty().item(), rel=1e-14)
    L_tied = tied.objective(X, y, 0.3)
    L_untied = untied.objective(X, y, 0.3)
    assert L_untied.item() == pytest.approx(L_tied.item(), rel=1e-12)
    L_tied.backward()
    L_untied.backward()
    np.testing.assert_allclose((untied.W_Q.grad + untied.W_K.grad).numpy(),
                               tied.W.grad.numpy(), rtol=1e-9, atol=1e-12)


@HYP
@given(st.integers(2, 10), st.integers(1, 3), seeds)
def test_untied_penalty_is_the_nuclear_norm_at_the_balanced_factorisation(d, n_heads, seed):
    """W_Q = c U√Σ, W_K = c V√Σ (c = (pd)^{1/4}) factor S with penalty √(pd) ‖S‖_*; any
    other factorisation W_Q R, W_K R⁻ᵀ costs at least as much."""
    p = d
    S = _randn(n_heads, d, d, seed=seed)
    U, sig, Vh = torch.linalg.svd(S)
    c = (p * d) ** 0.25
    W_Q = c * U * sig.sqrt()[:, None, :]
    W_K = c * Vh.transpose(-1, -2) * sig.sqrt()[:, None, :]
    if n_heads == 1:  # the single-head layout has no head axis
        W_Q, W_K = W_Q[0], W_K[0]
    m = UntiedAttention(d, p, W_Q=W_Q, W_K=W_K, n_heads=n_heads, dtype=torch.float64)
    np.testing.assert_allclose(m.S().detach().numpy().reshape(n_heads, d, d),
                               S.numpy(), atol=1e-10)
    nuclear = sig.sum().item()  # summed over heads, as the penalty is
    assert m.penalty().item() == pytest.approx(math.sqrt(p * d) * nuclear, rel=1e-10)
    R = _randn(d, d, seed=seed + 1) + 3 * torch.eye(d, dtype=torch.float64)
    other = UntiedAttention(d, p, W_Q=W_Q @ R, W_K=W_K @ torch.linalg.inv(R).T,
                            n_heads=n_heads, dtype=torch.float64)
    np.testing.assert_allclose(other.S().detach().numpy(), m.S().detach().numpy(), atol=1e-8)
    assert other.penalty().item() >= m.penalty().item() * (1 - 1e-10)


def test_untied_penalty_equals_tied_trace_penalty_for_psd_S():
    """For PSD S = W Wᵀ/√(pd) the nuclear norm is the trace: √(pd) Tr S = ‖W‖²_F."""
    d = p = 6
    W = _randn(d, p, seed=7)
    S = F.factored_S(W)
    sig = torch.linalg.svdvals(S)
    assert math.sqrt(p * d) * sig.sum().item() == pytest.approx(
        FactoredAttention(d, p, W=W, dtype=torch.float64).penalty().item(), rel=1e-10)


@pytest.mark.parametrize("Module", [FactoredAttention, UntiedAttention])
@pytest.mark.parametrize("attention", ["softmax", "linear"])
def test_multihead_output_is_the_mean_of_the_heads(Module, attention):
    d, p, T, n, H = 7, 3, 4, 30, 3
    X = _randn(n, T, d, seed=8)
    m = Module(d, p, n_heads=H, attention=attention, beta=1.7, dtype=torch.float64,
               generator=torch.Generator().manual_seed(0))
    A = m.attention_matrix(X).detach()
    assert A.shape == (n, T, T)
    S = m.S().detach()
    assert S.shape == (H, d, d)
    heads = [np_attention_map(np_preactivation(X.numpy(), S[k].numpy()), 1.7, attention)
             for k in range(H)]
    np.testing.assert_allclose(A.numpy(), np.mean(heads, axis=0), rtol=1e-10, atol=1e-12)
    if attention == "softmax":
        np.testing.assert_allclose(A.sum(-1).numpy(), 1.0, rtol=1e-12)
    # heads start distinct, penalties add up
    assert not torch.allclose(S[0], S[1])
    params = list(m.parameters())
    assert m.penalty().item() == pytest.approx(
        sum((P ** 2).sum().item() for P in params) / len(params), rel=1e-12)


def test_identical_heads_equal_one_head():
    d, p = 6, 4
    X = _randn(20, 3, d, seed=9)
    W = _randn(d, p, seed=10)
    one = FactoredAttention(d, p, W=W, dtype=torch.float64)
    two = FactoredAttention(d, p, W=torch.stack([W, W]), n_heads=2, dtype=torch.float64)
    np.testing.assert_allclose(two(X).detach().numpy(), one(X).detach().numpy(), rtol=1e-12)


@pytest.mark.parametrize("Module", [FactoredAttention, UntiedAttention])
def test_module_rejects_bad_n_heads(Module):
    with pytest.raises(ValueError, match="n_heads must be an int >= 1"):
        Module(4, 2, n_heads=0)
    with pytest.raises(TypeError, match="n_heads must be an int >= 1"):
        Module(4, 2, n_heads=2.0)
    with pytest.raises(ValueError, match=r"must have shape \(2, 4, 2\)"):
        Module(4, 2, n_heads=2, **{("W" if Module is FactoredAttention else "W_Q"):
                                   torch.zeros(4, 2)})


# --------------------------------------------------------------------- estimators
@pytest.fixture(scope="module")
def data():
    return make_attention_indexed(240, 8, n_tokens=3, random_state=0, layout="tokens")


def test_n_heads_one_is_the_single_head_estimator(data):
    X, y = data
    default = TiedAttentionRegressor(random_state=0, device="cpu", max_iter=60)
    explicit = clone(default).set_params(n_heads=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        default.fit(X, y)
        explicit.fit(X, y)
    assert default.W_.shape == (8, 8) and default.S_.shape == (8, 8)
    np.testing.assert_array_equal(explicit.S_, default.S_)
    np.testing.assert_array_equal(explicit.predict(X), default.predict(X))
    # the same fit done by hand with the single-head module and the training loop
    rng = np.random.RandomState(0)
    module = FactoredAttention(8, 8, W=rng.standard_normal((8, 8)), dtype=torch.float32)
    train(module, torch.as_tensor(X, dtype=torch.float32),
          torch.as_tensor(y, dtype=torch.float32), reg_lambda=default.reg_lambda,
          max_iter=60, random_state=rng)
    np.testing.assert_array_equal(default.W_, module.W.detach().double().numpy())
    np.testing.assert_allclose(default.head_spectra_[0],
                               np.sort(np.linalg.eigvalsh(default.S_))[::-1], atol=1e-12)


@pytest.mark.parametrize("n_heads", [1, 2])
def test_untied_estimator_fits_and_reports(data, n_heads):
    X, y = data
    d = X.shape[-1]
    est = UntiedAttentionRegressor(width=0.5, reg_lambda=0.05, n_heads=n_heads,
                                   random_state=0, device="cpu", dtype="float64").fit(X, y)
    p = est.width_
    shape = (d, p) if n_heads == 1 else (n_heads, d, p)
    assert est.W_Q_.shape == est.W_K_.shape == shape
    assert est.S_.shape == shape[:-1] + (d,)
    assert est.converged_ and est.n_iter_ == len(est.loss_curve_)
    # S_ is the untied product, generically not symmetric
    np.testing.assert_allclose(est.S_, est.W_Q_ @ np.swapaxes(est.W_K_, -1, -2)
                               / math.sqrt(p * d), atol=1e-12)
    assert not np.allclose(est.S_, np.swapaxes(est.S_, -1, -2))
    S_heads = est.S_.reshape(-1, d, d)
    np.testing.assert_allclose(est.head_spectra_, np.linalg.svd(S_heads, compute_uv=False),
                               atol=1e-12)
    # the objective uses the halved penalty (‖W_Q‖² + ‖W_K‖²)/2
    penalty = (np.sum(est.W_Q_ ** 2) + np.sum(est.W_K_ ** 2)) / 2
    objective = X.shape[0] * est.train_error_ + 0.05 * penalty
    assert est.train_objective_ * d ** 2 == pytest.approx(objective, rel=1e-8)
    # predict (from S_) agrees with the torch module's forward
    module = UntiedAttention(d, p, W_Q=est.W_Q_, W_K=est.W_K_, n_heads=n_heads,
                             dtype=torch.float64)
    np.testing.assert_allclose(est.predict(X), module(torch.as_tensor(X)).detach().numpy(),
                               rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(est.predict(X).sum(-1), 1.0, rtol=1e-12)
    assert est.score(X, y) > 0.9


@pytest.mark.parametrize("Est", [TiedAttentionRegressor, UntiedAttentionRegressor])
def test_multihead_recovers_a_multihead_teacher(Est):
    d, H, T = 8, 2, 3
    S = _multihead_teacher(H, d, seed=0)
    X, y = _multihead_sample(S, 700, T, seed=1)
    X_test, y_test = _multihead_sample(S, 400, T, seed=2)
    kw = dict(reg_lambda=1e-3, random_state=0, device="cpu", dtype="float64")
    est = Est(n_heads=H, **kw).fit(X, y)
    assert est.S_.shape == (H, d, d)
    chance = np.mean((y_test - 1.0 / T) ** 2)  # the uniform attention map
    error = np.mean((est.predict(X_test) - y_test) ** 2)
    assert error < 0.01 * chance
    assert est.score(X_test, y_test) > 0.95
    # one head cannot represent the mean of two softmaxes: the head axis is what helps
    single = Est(**kw).fit(X, y)
    assert error < 0.1 * np.mean((single.predict(X_test) - y_test) ** 2)


@pytest.mark.parametrize("Est", [TiedAttentionRegressor, UntiedAttentionRegressor])
def test_grid_search_over_reg_lambda(Est, data):
    X, y = data
    search = GridSearchCV(Est(n_heads=2, random_state=0, device="cpu", max_iter=100),
                          param_grid={"reg_lambda": [1e-3, 10.0]}, cv=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        search.fit(X, y)
    assert search.best_params_["reg_lambda"] == 1e-3
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))
    assert search.predict(X).shape == y.shape


@pytest.mark.parametrize("Est", [TiedAttentionRegressor, UntiedAttentionRegressor])
@pytest.mark.parametrize("bad", [0, -1, 1.5, 2.0, "2", True, None])
def test_bad_n_heads_is_named(Est, bad, data):
    X, y = data
    with pytest.raises(ValueError, match="'n_heads' parameter"):
        Est(n_heads=bad).fit(X, y)


def test_untied_rejects_zero_init_scale(data):
    X, y = data
    with pytest.raises(ValueError, match="'init_scale' parameter"):
        UntiedAttentionRegressor(init_scale=0.0).fit(X, y)


@pytest.mark.parametrize("Est", [TiedAttentionRegressor, UntiedAttentionRegressor])
def test_pickle_round_trip(Est, data):
    X, y = data
    est = Est(n_heads=2, random_state=0, device="cpu", max_iter=50)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, y)
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(again.predict(X), est.predict(X))
    np.testing.assert_array_equal(again.head_spectra_, est.head_spectra_)
    assert again.get_params() == est.get_params()


def test_untied_warm_start_continues_and_checks_heads(data):
    X, y = data
    est = UntiedAttentionRegressor(random_state=0, device="cpu", max_iter=20,
                                   warm_start=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, y)
        first = list(est.loss_curve_)
        est.fit(X, y)
    assert est.loss_curve_[:len(first)] == first and len(est.loss_curve_) > len(first)
    assert est.loss_curve_[-1] <= first[-1]
    est.set_params(n_heads=2)
    with pytest.raises(ValueError, match="warm_start=True"):
        est.fit(X, y)


def test_heads_start_from_distinct_factors(data):
    X, y = data
    est = UntiedAttentionRegressor(n_heads=3, random_state=0, device="cpu", max_iter=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, y)
    for a in range(3):
        for b in range(a + 1, 3):
            assert not np.allclose(est.W_Q_[a], est.W_Q_[b])
    assert not np.allclose(est.W_Q_, est.W_K_)


@cuda
@pytest.mark.parametrize("Est", [TiedAttentionRegressor, UntiedAttentionRegressor])
def test_cuda_multihead_matches_cpu(Est, data):
    X, y = data
    kw = dict(n_heads=2, dtype="float64", random_state=0, max_iter=100)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gpu = Est(device="cuda", **kw).fit(X, y)
        cpu = Est(device="cpu", **kw).fit(X, y)
    assert gpu.device_.startswith("cuda")
    assert gpu.train_objective_ == pytest.approx(cpu.train_objective_, rel=1e-3)
    again = pickle.loads(pickle.dumps(gpu))
    np.testing.assert_allclose(again.predict(X[:5]), gpu.predict(X[:5]))
