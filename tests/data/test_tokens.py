"""Token laws, token covariance and multi-head teachers (beyond docs/theory.rst §1's assumptions)."""

import numpy as np
import pytest
import scipy.special
from hypothesis import given, settings
from hypothesis import strategies as st

from skattn.data import (
    AttentionIndexedModel,
    PowerLawTarget,
    WishartTarget,
    attention_map,
    check_token_covariance,
    make_attention_indexed,
    preactivation,
    sample_tokens,
)

N_DRAWS = 400_000
# fourth moment E z⁴ of each unit-variance law: Var of the mean of z² is (E z⁴ − 1)/n
FOURTH_MOMENT = {
    ("gaussian", None): 3.0,
    ("rademacher", None): 1.0,
    ("student_t", 5.0): 3.0 + 6.0 / (5.0 - 4.0),
    ("student_t", 10.0): 3.0 + 6.0 / (10.0 - 4.0),
}


@pytest.mark.parametrize("law, df", list(FOURTH_MOMENT))
def test_token_laws_have_zero_mean_and_unit_variance(law, df):
    z = sample_tokens((N_DRAWS // 8, 2, 4), law, token_df=df, random_state=0).ravel()
    n = z.size
    # 5 standard errors: a false alarm has probability < 1e-6 per moment
    assert abs(z.mean()) < 5 / np.sqrt(n)
    # the second moment about the true mean 0 (Rademacher: exactly 1)
    assert abs(np.mean(z ** 2) - 1) <= 5 * np.sqrt((FOURTH_MOMENT[law, df] - 1) / n)


def test_rademacher_is_plus_minus_one_and_student_t_is_heavy_tailed():
    z = sample_tokens((1000, 2, 5), "rademacher", random_state=0)
    assert set(np.unique(z)) == {-1.0, 1.0}
    t = sample_tokens((20000, 2, 5), "student_t", token_df=3, random_state=0)
    g = sample_tokens((20000, 2, 5), "gaussian", random_state=0)
    assert np.max(np.abs(t)) > 2 * np.max(np.abs(g))


@pytest.mark.parametrize("law, df", [("gaussian", None), ("rademacher", None),
                                     ("student_t", 3.0)])
def test_tokens_reproducible_with_random_state(law, df):
    kw = dict(n_tokens=3, token_distribution=law, token_df=df, random_state=1)
    a = AttentionIndexedModel(6, **kw).sample(20, random_state=7, layout="tokens")
    b = AttentionIndexedModel(6, **kw).sample(20, random_state=7, layout="tokens")
    c = AttentionIndexedModel(6, **kw).sample(20, random_state=8, layout="tokens")
    assert all(np.array_equal(u, v) for u, v in zip(a, b))
    assert not np.array_equal(a[0], c[0])
    X1, y1 = make_attention_indexed(10, 4, token_distribution=law, token_df=df, random_state=3,
                                    layout="tokens")
    X2, y2 = make_attention_indexed(10, 4, token_distribution=law, token_df=df, random_state=3,
                                    layout="tokens")
    assert np.array_equal(X1, X2) and np.array_equal(y1, y2)


def test_callable_token_distribution():
    def uniform(rng, shape):
        return rng.uniform(-np.sqrt(3), np.sqrt(3), size=shape)

    model = AttentionIndexedModel(5, token_distribution=uniform, random_state=0)
    X, y = model.sample(30, random_state=0, layout="tokens")
    assert X.shape == (30, 2, 5) and np.all(np.abs(X) <= np.sqrt(3))
    assert np.allclose(y.sum(-1), 1.0)
    np.testing.assert_array_equal(X, uniform(np.random.RandomState(0), (30, 2, 5)))


@pytest.mark.parametrize("bad, match", [
    (lambda rng, shape: rng.standard_normal(shape[1:]), "shape"),
    (lambda rng, shape: rng.standard_normal(shape).T, "shape"),
    (lambda rng, shape: rng.standard_normal(shape).tolist(), "shape"),
    (lambda rng, shape: np.full(shape, np.nan), "NaN"),
    (lambda rng, shape: np.full(shape, np.inf), "NaN"),
    (lambda rng, shape: np.full(shape, "a"), "real"),
])
def test_callable_token_distribution_is_checked(bad, match):
    model = AttentionIndexedModel(4, token_distribution=bad, random_state=0)
    with pytest.raises(ValueError, match="token_distribution") as info:
        model.sample(3, random_state=0, layout="tokens")
    assert match in str(info.value)


@pytest.mark.parametrize("kwargs, name", [
    (dict(token_distribution="student_t"), "token_df"),
    (dict(token_distribution="student_t", token_df=2.0), "token_df"),
    (dict(token_distribution="student_t", token_df=1.5), "token_df"),
    (dict(token_distribution="student_t", token_df=np.inf), "token_df"),
    (dict(token_distribution="laplace"), "token_distribution"),
    (dict(token_distribution=3), "token_distribution"),
    (dict(token_covariance=-np.eye(4)), "token_covariance"),
    (dict(token_covariance=np.diag([1.0, 1.0, 1.0, -1e-3])), "token_covariance"),
    (dict(token_covariance=np.triu(np.ones((4, 4)))), "token_covariance"),
    (dict(token_covariance=np.eye(3)), "token_covariance"),
    (dict(token_covariance=np.full((4, 4), np.nan)), "token_covariance"),
    (dict(n_heads=0), "n_heads"),
    (dict(n_heads=2, target=[WishartTarget(0.5)] * 3), "target"),
    (dict(n_heads=3, target=[WishartTarget(0.5)]), "target"),
    (dict(n_heads=2, target=[WishartTarget(0.5), "wishart"]), "target"),
])
def test_bad_token_and_head_arguments(kwargs, name):
    with pytest.raises((ValueError, TypeError), match=name):
        AttentionIndexedModel(4, **kwargs)
    with pytest.raises((ValueError, TypeError), match=name):
        make_attention_indexed(5, 4, **kwargs)


def test_psd_check_tolerates_rounding():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((6, 3))
    singular = w @ w.T  # rank 3: eigenvalues at zero up to rounding
    C, C_sqrt = check_token_covariance(singular, 6)
    np.testing.assert_allclose(C_sqrt @ C_sqrt, singular, atol=1e-10)
    slightly_asymmetric = singular + 1e-14 * np.triu(np.ones((6, 6)))
    check_token_covariance(slightly_asymmetric, 6)


def test_token_covariance_tokens_and_centring():
    d = 6
    C = np.diag(np.linspace(0.5, 1.5, d))
    C[0, 1] = C[1, 0] = 0.2
    model = AttentionIndexedModel(d, token_covariance=C, token_distribution="rademacher",
                                  random_state=0)
    X = model.sample_tokens(100_000, random_state=1)
    emp = np.einsum("nai,naj->ij", X, X) / (X.shape[0] * X.shape[1])
    assert np.max(np.abs(emp - C)) < 0.02
    # the centring Tr(S0 C) makes the diagonal pre-activation mean-zero; Tr S0 does not
    h = preactivation(X, model.S0_, C)
    h_iso = preactivation(X, model.S0_)
    sem = np.std(h[:, 0, 0]) / np.sqrt(h.shape[0])
    assert abs(h[:, 0, 0].mean()) < 5 * sem
    shift = (np.trace(model.S0_) - np.trace(model.S0_ @ C)) / np.sqrt(d)
    assert abs(shift) > 10 * sem
    np.testing.assert_allclose(h[:, 0, 0].mean() - h_iso[:, 0, 0].mean(), shift, rtol=1e-8)


def test_identity_covariance_changes_nothing():
    a = make_attention_indexed(20, 5, random_state=0, return_target=True, layout="tokens")
    b = make_attention_indexed(20, 5, token_covariance=np.eye(5), random_state=0,
                               return_target=True, layout="tokens")
    for u, v in zip(a, b):
        np.testing.assert_allclose(u, v, atol=1e-12)


def test_single_head_is_todays_model():
    """Same seeds give the same data as the paper's model, written out independently."""
    d, T, n = 7, 3, 40
    S0 = WishartTarget(0.5).sample(d, random_state=11)
    X_ref = np.random.RandomState(12).standard_normal((n, T, d))
    h_ref = (np.einsum("nai,ij,nbj->nab", X_ref, S0, X_ref) - np.trace(S0) * np.eye(T))
    y_ref = scipy.special.softmax(1.5 * h_ref / np.sqrt(d), axis=-1)
    for model in (AttentionIndexedModel(d, n_tokens=T, beta=1.5, random_state=11),
                  AttentionIndexedModel(d, n_tokens=T, beta=1.5, n_heads=1,
                                        target=[WishartTarget(0.5)], random_state=11)):
        X, y = model.sample(n, random_state=12, layout="tokens")
        assert model.S0_.shape == (d, d) and isinstance(model.Q0_, float)
        np.testing.assert_array_equal(model.S0_, S0)
        np.testing.assert_array_equal(X, X_ref)
        np.testing.assert_allclose(y, y_ref, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("attention", ["softmax", "linear"])
def test_multi_head_teacher(attention):
    d, H, T = 8, 3, 4
    targets = [WishartTarget(0.5), PowerLawTarget(1.0), WishartTarget(2.0)]
    model = AttentionIndexedModel(d, n_tokens=T, n_heads=H, target=targets,
                                  attention=attention, noise=0.2, random_state=0)
    assert model.S0_.shape == (H, d, d) and model.Q0_.shape == (H,)
    np.testing.assert_allclose(model.Q0_[1], 1.0)  # power-law normalisation
    X, y = model.sample(50, random_state=1, layout="tokens")
    assert y.shape == (50, T, T)
    if attention == "softmax":
        np.testing.assert_allclose(y.sum(-1), 1.0)
    # without noise: the mean over heads of the single-head maps
    per_head = [attention_map(preactivation(X, S), model.beta, attention) for S in model.S0_]
    np.testing.assert_allclose(model.attention_matrix(X), np.mean(per_head, axis=0),
                               rtol=1e-12, atol=1e-14)
    Xs, ys = model.sample(5, task="seq2seq", random_state=1, layout="tokens")
    assert ys.shape == (5, T, d)


def test_one_target_gives_independent_heads():
    model = AttentionIndexedModel(10, n_heads=2, random_state=0)
    assert not np.allclose(model.S0_[0], model.S0_[1])
    again = AttentionIndexedModel(10, n_heads=2, random_state=0)
    np.testing.assert_array_equal(model.S0_, again.S0_)


def test_multi_head_noise_is_per_head():
    model = AttentionIndexedModel(3, n_tokens=2, n_heads=2, noise=0.6, random_state=0)
    xi = model.sample_noise(100_000, random_state=0)
    assert xi.shape == (100_000, 2, 2, 2)
    var = xi.var(axis=0)
    np.testing.assert_allclose(var[:, 0, 0], 0.6, rtol=0.03)
    np.testing.assert_allclose(var[:, 0, 1], 0.3, rtol=0.03)
    assert abs(np.corrcoef(xi[:, 0, 0, 1], xi[:, 1, 0, 1])[0, 1]) < 0.02


@settings(max_examples=25, deadline=None)
@given(H=st.integers(1, 4), T=st.integers(2, 5), beta=st.floats(0.1, 10.0),
       seed=st.integers(0, 2 ** 16))
def test_multi_head_rows_sum_to_one(H, T, beta, seed):
    rng = np.random.default_rng(seed)
    S = rng.standard_normal((H, 5, 5))
    S = S + np.swapaxes(S, 1, 2)
    X = rng.standard_normal((6, T, 5))
    h = preactivation(X, S)
    assert h.shape == (6, H, T, T)
    A = attention_map(h, beta, head_axis=-3)
    assert A.shape == (6, T, T) and np.all(A >= 0)
    np.testing.assert_allclose(A.sum(-1), 1.0)
    # identical heads give the single-head map
    same = attention_map(preactivation(X, np.stack([S[0]] * H)), beta, head_axis=-3)
    np.testing.assert_allclose(same, attention_map(preactivation(X, S[0]), beta), atol=1e-12)


def test_head_axis_cannot_be_a_token_axis():
    h = np.zeros((3, 2, 4, 4))
    for axis in (-1, -2, 2, 3, 4, -5):
        with pytest.raises(ValueError, match="head_axis"):
            attention_map(h, head_axis=axis)
