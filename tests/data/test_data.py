"""Targets and the attention-indexed teacher (docs/theory.rst §1)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skattn.data import (
    AttentionIndexedModel,
    PowerLawTarget,
    SpectrumTarget,
    WishartTarget,
    make_attention_indexed,
    preactivation,
    softmax,
)


def test_wishart_target_q0_and_law():
    target = WishartTarget(0.5)
    s0 = target.sample(400, random_state=0)
    assert np.allclose(s0, s0.T)
    eig = np.linalg.eigvalsh(s0)
    assert eig.min() > -1e-10
    # Q0 = Tr S0²/d → 1 + κ0 with O(1/d) fluctuations
    assert abs(np.sum(s0 ** 2) / 400 - 1.5) < 0.05
    assert abs(target.second_moment() - 1.5) < 1e-12
    # atom at zero of mass 1 − κ0
    assert abs(np.mean(eig < 1e-8) - 0.5) < 0.01


def test_power_law_target_normalisation():
    target = PowerLawTarget(1.0, cutoff=20)
    eig = target.eigenvalues(100)
    assert np.isclose(np.sum(eig ** 2), 100)
    assert np.all(eig[20:] == 0) and np.all(np.diff(eig) <= 0)
    s0 = target.sample(100, random_state=1)
    assert np.allclose(np.sort(np.linalg.eigvalsh(s0))[::-1], eig, atol=1e-9)
    with pytest.raises(ValueError, match="n_features"):
        target.spectral_law()
    # the profile is theory.laws' (data samples from the theory's formula, one way)
    from skattn.theory.laws import power_law_eigenvalues

    np.testing.assert_array_equal(eig, power_law_eigenvalues(1.0, 100, cutoff=20))
    with pytest.raises(ValueError, match="gamma"):
        power_law_eigenvalues(0.0, 10)
    with pytest.raises(ValueError, match="cutoff"):
        power_law_eigenvalues(1.0, 10, cutoff=0)


def test_spectrum_target_matrix_and_errors():
    m = np.diag([2.0, 1.0, 0.0])
    t = SpectrumTarget(m)
    assert np.array_equal(t.sample(3), m)
    with pytest.raises(ValueError, match="n_features"):
        t.sample(4)
    with pytest.raises(ValueError, match="non-negative"):
        SpectrumTarget([1.0, -1.0])
    with pytest.raises(ValueError, match="eigenvalues"):
        SpectrumTarget([[1.0, 2.0], [0.0, 1.0]])


@pytest.mark.parametrize("attention", ["softmax", "linear"])
def test_teacher_shapes_and_rows(attention):
    model = AttentionIndexedModel(20, n_tokens=3, attention=attention, random_state=0)
    X, y = model.sample(50, random_state=1, layout="tokens")
    assert X.shape == (50, 3, 20) and y.shape == (50, 3, 3)
    if attention == "softmax":
        assert np.allclose(y.sum(-1), 1.0)
    X2, y2 = model.sample(50, task="seq2seq", random_state=1, layout="tokens")
    assert np.array_equal(X, X2)
    assert y2.shape == (50, 3, 20)
    assert np.allclose(y2, y @ X)


def test_teacher_noise_variances():
    model = AttentionIndexedModel(4, n_tokens=3, noise=0.8, random_state=0)
    xi = model.sample_noise(200_000, random_state=0)
    var = xi.var(axis=0)
    assert np.allclose(np.diag(var), 0.8, rtol=0.02)
    assert np.allclose(var[~np.eye(3, dtype=bool)], 0.4, rtol=0.02)
    assert np.allclose(xi, np.swapaxes(xi, 1, 2))


def test_preactivation_components_are_standardised():
    # for fixed S, h_ab/√(1+δ_ab) ~ N(0, Tr S²/d) at large d
    d = 300
    s = WishartTarget(1.0).sample(d, random_state=0)
    X = np.random.default_rng(1).standard_normal((4000, 2, d))
    h = preactivation(X, s)
    q0 = np.sum(s ** 2) / d
    assert abs(np.var(h[:, 0, 1]) / q0 - 1) < 0.08
    assert abs(np.var(h[:, 0, 0]) / (2 * q0) - 1) < 0.08
    assert abs(np.mean(h[:, 0, 0])) < 0.1


def test_teacher_seed_independence():
    a = AttentionIndexedModel(10, random_state=3)
    b = AttentionIndexedModel(10, random_state=3)
    assert np.array_equal(a.S0_, b.S0_)
    Xa, _ = a.sample(5, random_state=0, layout="tokens")
    Xb, _ = b.sample(5, random_state=1, layout="tokens")
    assert not np.array_equal(Xa, Xb)
    X1, y1 = make_attention_indexed(30, 8, random_state=4, layout="tokens")
    X2, y2 = make_attention_indexed(30, 8, random_state=4, layout="tokens")
    assert np.array_equal(X1, X2) and np.array_equal(y1, y2)


@settings(max_examples=30, deadline=None)
@given(beta=st.floats(0.01, 50.0), scale=st.floats(1.0, 1e4))
def test_softmax_is_stable(beta, scale):
    z = np.random.default_rng(0).standard_normal((5, 4, 4)) * scale
    s = softmax(z, beta)
    assert np.all(np.isfinite(s))
    assert np.allclose(s.sum(-1), 1.0)


@pytest.mark.parametrize("kwargs, name", [
    (dict(n_features=0), "n_features"),
    (dict(n_features=5, n_tokens=1), "n_tokens"),
    (dict(n_features=5, beta=0.0), "beta"),
    (dict(n_features=5, noise=-1.0), "noise"),
    (dict(n_features=5, attention="relu"), "attention"),
    (dict(n_features=5, target="wishart"), "target"),
])
def test_teacher_bad_input(kwargs, name):
    with pytest.raises((ValueError, TypeError), match=name):
        AttentionIndexedModel(**kwargs)


def test_sample_bad_input():
    model = AttentionIndexedModel(5)
    with pytest.raises(ValueError, match="n_samples"):
        model.sample(0, layout="tokens")
    with pytest.raises(ValueError, match="task"):
        model.sample(3, task="seq2vec", layout="tokens")


def test_random_state_helper_accepts_generators_and_names_bad_seeds():
    from skattn._validation import check_random_state_arg

    X1, y1 = make_attention_indexed(10, 4, random_state=np.random.default_rng(3), layout="tokens")
    X2, y2 = make_attention_indexed(10, 4, random_state=np.random.default_rng(3), layout="tokens")
    np.testing.assert_array_equal(X1, X2)
    np.testing.assert_array_equal(y1, y2)
    assert isinstance(check_random_state_arg(np.random.default_rng(0)), np.random.RandomState)
    rs = np.random.RandomState(0)
    assert check_random_state_arg(rs) is rs
    for bad in (-1, 2 ** 32, "seed", 1.5, True):
        with pytest.raises(ValueError, match="seed_arg"):
            check_random_state_arg(bad, name="seed_arg")
