"""Hypothesis fuzzing of the public API with random valid and invalid parameters.

Valid inputs must give finite outputs (a ConvergenceWarning or ``converged=False`` is
allowed: the budgets here are tiny); invalid inputs must raise ``ValueError`` or
``TypeError`` (scikit-learn's ``InvalidParameterError`` is a ``ValueError``) whose message
names the offending argument. Sizes are tiny (d ≤ 8, n ≤ 30, max_iter ≤ 5) and every test
has a bounded ``max_examples``, so the whole file runs in well under a minute on two cores.
The bad-input cases it found were fixed at their source; each is now a plain test.
"""

import re
import warnings

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning

from skattn import (
    AsymptoticPredictor,
    AttentionIndexedModel,
    DirectAttentionRegressor,
    PowerLawTarget,
    SpectrumTarget,
    TiedAttentionRegressor,
    WishartTarget,
    make_attention_indexed,
)
from skattn.metrics import attention_error
from skattn.nn.training import TrainingDivergedError
from skattn.theory import DiscreteLaw, WishartLaw, free_convolution, solve_state_evolution

ESTIMATORS = [TiedAttentionRegressor, DirectAttentionRegressor]
BAD = (ValueError, TypeError)


def fuzz(n):
    """Bounded, reproducible hypothesis settings (derandomised: the same cases every run)."""
    return settings(max_examples=n, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])


@pytest.fixture(autouse=True, scope="module")
def _single_torch_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def raises_naming(name, func):
    """``func()`` raises ValueError/TypeError whose message names ``name``."""
    with pytest.raises(BAD, match=re.escape(name)):
        func()


def quiet(func):
    """Run ``func`` with convergence and row-sum warnings silenced (tiny budgets)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", UserWarning)
        return func()


# ------------------------------------------------------------------ strategies
@st.composite
def problems(draw, linear_ok=True):
    """A tiny attention-indexed problem and the matching estimator keyword arguments."""
    attention = draw(st.sampled_from(["softmax", "linear"] if linear_ok else ["softmax"]))
    T = draw(st.integers(1 if attention == "linear" else 2, 3))
    d = draw(st.integers(1, 8))
    n = draw(st.integers(2, 30))
    task = draw(st.sampled_from(["seq2lab", "seq2seq"]))
    noise = draw(st.sampled_from([0.0, 0.1]))
    beta0 = draw(st.floats(0.1, 5.0))
    X, y = make_attention_indexed(n, d, n_tokens=T, beta=beta0, noise=noise,
                                  attention=attention, task=task,
                                  random_state=draw(st.integers(0, 2**16)), layout="tokens")
    return X, y, dict(attention=attention, task=task)


finite_positive = st.floats(1e-3, 50.0)

BAD_REAL_POSITIVE = [0.0, -1.0, np.nan, np.inf, "a", None]
BAD_REAL_NONNEG = [-1.0, -1e-9, np.nan, np.inf, "a", None]
BAD_INT_POSITIVE = [0, -3, 2.5, np.nan, "a"]


# ------------------------------------------------------- estimators: valid
@pytest.mark.parametrize("Est", ESTIMATORS)
@fuzz(40)
@given(problem=problems(),
       reg_lambda=st.one_of(st.just(0.0), st.floats(1e-4, 1e3)),
       beta=finite_positive,
       solver=st.sampled_from(["lbfgs", "adam"]),
       max_iter=st.integers(1, 5),
       dtype=st.sampled_from(["float32", "float64"]),
       flat=st.booleans())
def test_estimator_valid_inputs_give_finite_outputs(Est, problem, reg_lambda, beta, solver,
                                                    max_iter, dtype, flat):
    X, y, kw = problem
    est = Est(reg_lambda=reg_lambda, beta=beta, solver=solver, max_iter=max_iter,
              dtype=dtype, random_state=0, device="cpu", n_tokens=X.shape[1], **kw)
    n = X.shape[0]
    if flat:
        X, y = X.reshape(n, -1), y.reshape(n, -1)
    try:
        quiet(lambda: est.fit(X, y))
    except TrainingDivergedError:  # a documented, informative outcome (a ValueError)
        return
    pred = est.predict(X)
    assert pred.shape == y.shape
    assert np.all(np.isfinite(pred))
    assert np.isfinite(est.train_objective_)
    assert np.all(np.isfinite(est.S_))
    assert np.all(np.isfinite(est.attention_matrix(X)))


@fuzz(25)
@given(problem=problems(linear_ok=False), width=st.one_of(st.integers(1, 16),
                                                          st.floats(1e-3, 4.0)),
       init_scale=st.floats(1e-2, 3.0))
def test_tied_width_and_init_scale(problem, width, init_scale):
    X, y, kw = problem
    est = TiedAttentionRegressor(width=width, init_scale=init_scale, max_iter=3,
                                 random_state=0, device="cpu", **kw)
    quiet(lambda: est.fit(X, y))
    assert est.width_ >= 1
    assert np.all(np.isfinite(est.predict(X)))


# ----------------------------------------------------- estimators: invalid
COMMON_BAD = {
    "reg_lambda": BAD_REAL_NONNEG,
    "beta": BAD_REAL_POSITIVE,
    "attention": ["relu", "", None, 1],
    "task": ["seq2vec", None],
    "n_tokens": [0, -1, 2.5, "a"],
    "solver": ["sgd", None],
    "learning_rate_init": BAD_REAL_POSITIVE,
    "max_iter": BAD_INT_POSITIVE,
    "tol": BAD_REAL_NONNEG,
    "n_iter_no_change": BAD_INT_POSITIVE,
    "batch_size": BAD_INT_POSITIVE,
    "device": ["tpu", 3, "cuda:x"],
    "dtype": ["float16", np.float32, None],
    "random_state": ["seed", -1, 1.5],
    "verbose": [-1, "loud"],
    "warm_start": ["yes", 2],
}
EST_BAD = {
    TiedAttentionRegressor: {**COMMON_BAD,
                             "width": [0, -2, 0.0, -0.5, np.nan, np.inf, "a", None],
                             "init_scale": [0.0, -1.0, np.nan, np.inf, "a"]},
    DirectAttentionRegressor: {**COMMON_BAD, "init_scale": [-1.0, np.nan, np.inf, "a"]},
}


def _bad_param_cases():
    return [(Est, name, value) for Est, table in EST_BAD.items()
            for name, values in table.items() for value in values]


@pytest.fixture(scope="module")
def data():
    return make_attention_indexed(12, 3, n_tokens=2, random_state=0, layout="tokens")


@fuzz(60)
@given(case=st.sampled_from(_bad_param_cases()))
def test_estimator_invalid_parameter_is_named(data, case):
    Est, name, value = case
    X, y = data
    raises_naming(name, lambda: Est(max_iter=2, **{name: value}).fit(X, y))


@pytest.mark.parametrize("Est", ESTIMATORS)
@fuzz(10)
@given(where=st.sampled_from(["X", "y"]), value=st.sampled_from([np.nan, np.inf, -np.inf]),
       idx=st.integers(0, 10 ** 6))
def test_estimator_non_finite_array_is_named(Est, data, where, value, idx):
    X, y = (a.copy() for a in data)
    arr = X if where == "X" else y
    arr.flat[idx % arr.size] = value
    raises_naming(f"Input {where} contains", lambda: Est(max_iter=2).fit(X, y))


@pytest.mark.parametrize("Est", ESTIMATORS + [AsymptoticPredictor])
@pytest.mark.parametrize("case, match", [
    pytest.param(lambda X, y: (X[:0], y[:0]), "0 sample", id="empty"),
    pytest.param(lambda X, y: (X[..., None], y), "X must be 3-D", id="X-4d"),
    pytest.param(lambda X, y: (X[:, 0, 0], y), "X must be 3-D", id="X-1d"),
    pytest.param(lambda X, y: (X, y[..., None]), "y must have 1, 2 or 3", id="y-4d"),
    pytest.param(lambda X, y: (X[:5], y[:4]), "inconsistent numbers of samples", id="n-mismatch"),
    pytest.param(lambda X, y: (X, y[:, :, :1]), "y of shape", id="y-shape"),
    pytest.param(lambda X, y: (X[:, :, :0], y), "0 features", id="d=0"),
    pytest.param(lambda X, y: (X[:, :1], y[:, :1, :1]), "needs n_tokens >= 2", id="softmax-T=1"),
    pytest.param(lambda X, y: (X, None), "requires y", id="y-None"),
    pytest.param(lambda X, y: (np.full(X.shape, "a"), y), "could not convert", id="X-str"),
])
def test_estimator_bad_arrays(Est, data, case, match):
    X, y = case(*data)
    est = Est(max_iter=2)
    with pytest.raises(ValueError, match=re.escape(match)) as info:
        est.fit(X, y)
    assert "reshape" not in str(info.value)


@pytest.mark.parametrize("Est", ESTIMATORS + [AsymptoticPredictor])
def test_estimator_zero_tokens_is_named(Est):
    with pytest.raises(ValueError) as info:
        Est(attention="linear", max_iter=2).fit(np.zeros((5, 0, 3)), np.zeros((5, 0, 0)))
    assert "reshape" not in str(info.value)


@pytest.mark.parametrize("Est", ESTIMATORS)
def test_estimator_bad_predict_inputs(Est, data):
    X, y = data
    est = quiet(lambda: Est(max_iter=2, random_state=0).fit(X, y))
    raises_naming("X has shape", lambda: est.predict(X[:, :, :2]))
    raises_naming("X has shape", lambda: est.attention_matrix(X[:, :, :2]))
    raises_naming("Input X contains NaN", lambda: est.predict(X + np.nan))
    raises_naming("0 sample", lambda: est.predict(X[:0]))


@pytest.mark.parametrize("Est", ESTIMATORS)
def test_score_with_mismatched_y_names_y(Est, data):
    X, y = data
    est = quiet(lambda: Est(max_iter=2, random_state=0).fit(X, y))
    with pytest.raises(ValueError) as info:
        est.score(X, y[:5])
    assert "reshape" not in str(info.value)


# ----------------------------------------------------------- AsymptoticPredictor
@fuzz(40)
@given(problem=problems(), reg_lambda=st.floats(1e-3, 10.0), damping=st.floats(0.1, 1.0),
       max_iter=st.integers(1, 5), parametrization=st.sampled_from(["factored", "direct"]),
       width=st.floats(0.2, 2.0))
def test_predictor_valid_inputs_give_finite_outputs(problem, reg_lambda, damping, max_iter,
                                                    parametrization, width):
    X, y, kw = problem
    if kw["task"] == "seq2seq" and X.shape[2] < X.shape[1]:
        return  # d < T: seq2seq outputs do not determine the attention (tested below)
    est = AsymptoticPredictor(width=width, reg_lambda=reg_lambda, damping=damping,
                              max_iter=max_iter, parametrization=parametrization,
                              n_tokens=X.shape[1], **kw)
    quiet(lambda: est.fit(X, y))
    assert est.state_ is None
    assert np.all(np.isfinite(est.S_))
    assert np.all(np.isfinite(est.predict(X)))
    assert isinstance(est.converged_, bool)


def test_predictor_seq2seq_fewer_features_than_tokens_is_named():
    X, y = make_attention_indexed(6, 1, n_tokens=2, task="seq2seq", random_state=0, layout="tokens")
    with pytest.raises(ValueError) as info:
        AsymptoticPredictor(max_iter=2).fit(X, y)
    assert "n_features" in str(info.value) or "n_tokens" in str(info.value)


PREDICTOR_BAD = {
    "width": [0, -1.0, 0.0, np.nan, np.inf, "a"],
    "parametrization": ["lowrank", None],
    "reg_lambda": BAD_REAL_NONNEG,
    "beta": BAD_REAL_POSITIVE,
    "attention": ["relu"],
    "task": ["seq2vec"],
    "target": ["wishart", 3],
    "target_beta": BAD_REAL_POSITIVE,
    "noise": BAD_REAL_NONNEG,
    "n_features": [1, 0, 2.5, "a"],
    "max_iter": BAD_INT_POSITIVE,
    "tol": [0.0, -1.0, np.nan, "a"],
    "damping": [0.0, -0.1, 1.5, np.nan, "a"],
    "n_nodes": [8, 0, 16.5, "a"],
    "random_state": ["seed", -1],
}


@fuzz(40)
@given(case=st.sampled_from([(k, v) for k, vs in PREDICTOR_BAD.items() for v in vs]))
def test_predictor_invalid_parameter_is_named(data, case):
    name, value = case
    X, y = data
    kwargs = {"max_iter": 2, "n_nodes": 64, name: value}
    raises_naming(name, lambda: quiet(lambda: AsymptoticPredictor(**kwargs).fit(X, y)))


def test_predictor_data_free_errors(data):
    X, y = data
    raises_naming("width=10", lambda: AsymptoticPredictor(width=10, max_iter=2).fit(X, y))
    raises_naming("reg_lambda", lambda: AsymptoticPredictor(
        parametrization="direct", reg_lambda=0.0, max_iter=2).fit(X, y))
    raises_naming("target", lambda: AsymptoticPredictor().state_evolution(0.5, 2))
    raises_naming("n_features", lambda: AsymptoticPredictor(
        width=2, target=WishartTarget()).state_evolution(0.5, 2))
    raises_naming("alpha", lambda: AsymptoticPredictor(
        target=WishartTarget(), attention="linear").state_evolution(-1.0, 1))


# --------------------------------------------------------- data generators
@fuzz(60)
@given(n=st.integers(1, 30), d=st.integers(1, 8), attention=st.sampled_from(["softmax",
                                                                            "linear"]),
       T=st.integers(1, 4), beta=st.floats(1e-3, 50.0), noise=st.floats(0.0, 10.0),
       task=st.sampled_from(["seq2lab", "seq2seq"]), seed=st.integers(0, 2**32 - 1),
       target=st.sampled_from(["wishart", "powerlaw", "spectrum"]))
def test_make_attention_indexed_valid(n, d, attention, T, beta, noise, task, seed, target):
    if attention == "softmax":
        T = max(T, 2)
    tgt = {"wishart": WishartTarget(0.5), "powerlaw": PowerLawTarget(1.5),
           "spectrum": SpectrumTarget(np.arange(d, dtype=float))}[target]
    X, y, S0 = make_attention_indexed(n, d, n_tokens=T, target=tgt, beta=beta, noise=noise,
                                      attention=attention, task=task, return_target=True,
                                      random_state=seed, layout="tokens")
    assert X.shape == (n, T, d)
    assert y.shape == ((n, T, T) if task == "seq2lab" else (n, T, d))
    assert np.all(np.isfinite(X)) and np.all(np.isfinite(y))
    assert np.allclose(S0, S0.T)
    if attention == "softmax" and task == "seq2lab":
        np.testing.assert_allclose(y.sum(-1), 1.0, atol=1e-10)


MAKE_BAD = {
    "n_samples": [0, -1, 2.5, np.nan, "a", True],
    "n_features": [0, -2, 3.0, "a", None],
    "n_tokens": [1, 0, 2.5],  # 1 is invalid with the default softmax attention
    "target": ["wishart", WishartLaw(0.5), 3],
    "beta": BAD_REAL_POSITIVE,
    "noise": BAD_REAL_NONNEG,
    "attention": ["relu"],
    "task": ["auto", "seq2vec"],
}


@fuzz(40)
@given(case=st.sampled_from([(k, v) for k, vs in MAKE_BAD.items() for v in vs]),
       model=st.booleans())
def test_generators_invalid_parameter_is_named(case, model):
    name, value = case
    kwargs = {"n_samples": 4, "n_features": 3, name: value}
    if model and name not in ("n_samples", "task"):
        kwargs.pop("n_samples")
        raises_naming(name, lambda: AttentionIndexedModel(**kwargs))
    else:
        raises_naming(name, lambda: make_attention_indexed(**kwargs))


def test_model_sample_errors():
    model = AttentionIndexedModel(3, random_state=0)
    raises_naming("n_samples", lambda: model.sample(0, layout="tokens"))
    raises_naming("task", lambda: model.sample(2, task="seq2vec", layout="tokens"))
    raises_naming("n_features=3", lambda: make_attention_indexed(
        4, 3, target=SpectrumTarget([1.0, 2.0]), layout="tokens"))


def test_make_bad_random_state_is_named():
    raises_naming("random_state", lambda: make_attention_indexed(4, 3, random_state="x",
                                                                 layout="tokens"))


def test_model_attention_matrix_wrong_shape_is_named():
    model = AttentionIndexedModel(3, random_state=0)
    with pytest.raises(ValueError) as info:
        model.attention_matrix(np.zeros((2, 2, 4)))
    assert "X" in str(info.value)


def test_model_attention_matrix_nan_raises():
    model = AttentionIndexedModel(3, random_state=0)
    raises_naming("X", lambda: model.attention_matrix(np.full((2, 2, 3), np.nan)))


def test_sample_noise_negative_is_named():
    model = AttentionIndexedModel(3, noise=1.0, random_state=0)
    raises_naming("n_samples", lambda: model.sample_noise(-1))


# ------------------------------------------------------------------ targets
@fuzz(60)
@given(d=st.integers(1, 8), seed=st.integers(0, 2**16),
       kind=st.sampled_from(["wishart", "powerlaw", "spectrum", "matrix"]),
       scale=st.floats(1e-3, 1e3), cutoff=st.one_of(st.none(), st.integers(1, 12)))
def test_targets_valid_sample_is_finite_psd(d, seed, kind, scale, cutoff):
    rng = np.random.default_rng(seed)
    if kind == "wishart":
        target = WishartTarget(scale)
    elif kind == "powerlaw":
        target = PowerLawTarget(min(scale, 50.0), cutoff=cutoff)
    elif kind == "spectrum":
        target = SpectrumTarget(scale * rng.random(d))
    else:
        A = rng.standard_normal((d, d))
        target = SpectrumTarget(A @ A.T)
    S0 = target.sample(d, random_state=seed)
    assert S0.shape == (d, d)
    assert np.all(np.isfinite(S0))
    assert np.allclose(S0, S0.T)
    assert np.linalg.eigvalsh(S0).min() > -1e-8 * max(1.0, np.abs(S0).max())
    assert np.isfinite(target.second_moment(d))


TARGET_BAD = [
    (WishartTarget, (), "rank_ratio", [0.0, -1.0, np.nan, np.inf, "a", True, None]),
    (PowerLawTarget, (), "gamma", [0.0, -1.0, np.nan, np.inf, "a", None]),
    (PowerLawTarget, (1.0,), "cutoff", [0, -1, 2.5, "a"]),
    (SpectrumTarget, (), "eigenvalues", [[], [-1.0, 1.0], [np.nan, 1.0], [np.inf],
                                         "abc", None, np.zeros((2, 3)), [[1.0, 2.0], [0.0, 1.0]],
                                         np.zeros((2, 2, 2)), np.zeros((0, 0))]),
]


@fuzz(30)
@given(case=st.sampled_from([(cls, pre, name, v) for cls, pre, name, vs in TARGET_BAD
                             for v in vs]))
def test_targets_invalid_parameter_is_named(case):
    cls, pre, name, value = case
    raises_naming(name, lambda: cls(*pre, value))


@pytest.mark.parametrize("target", [WishartTarget(0.5), PowerLawTarget(1.0),
                                    SpectrumTarget([1.0, 2.0])], ids=repr)
@pytest.mark.parametrize("n_features", [0, -1, 2.5, np.nan, "a"])
def test_target_sample_bad_n_features(target, n_features):
    raises_naming("n_features", lambda: target.sample(n_features, random_state=0))


def test_target_law_errors():
    raises_naming("n_features", lambda: PowerLawTarget(1.0).spectral_law())
    raises_naming("n_features=3", lambda: SpectrumTarget([1.0, 2.0]).sample(3))
    raises_naming("n_features=3", lambda: SpectrumTarget([1.0, 2.0]).spectral_law(3))


# ------------------------------------------------------------------ metrics
@fuzz(60)
@given(n=st.integers(1, 30), T=st.integers(1, 4), k=st.integers(1, 8),
       task=st.sampled_from(["auto", "seq2lab", "seq2seq"]), seed=st.integers(0, 2**16),
       scale=st.floats(1e-6, 1e6))
def test_attention_error_valid(n, T, k, task, seed, scale):
    if task == "seq2lab":
        k = T
    rng = np.random.default_rng(seed)
    a, b = scale * rng.standard_normal((2, n, T, k))
    err = attention_error(a, b, task=task)
    assert np.isfinite(err) and err >= 0
    assert attention_error(a, a, task=task) == 0.0


METRIC_BAD = [
    ("task", lambda a: (a, a, "seq2vec")),
    ("same shape", lambda a: (a, a[:, :1], "auto")),
    ("y_true must have 3 dimensions", lambda a: (a[0], a[0], "auto")),
    ("y_pred must have 3 dimensions", lambda a: (a, a[..., None], "auto")),
    ("y_true must hold at least one sample", lambda a: (a[:0], a[:0], "auto")),
    ("y_true contains NaN", lambda a: (a + np.nan, a, "auto")),
    ("y_pred contains NaN", lambda a: (a, a * np.inf, "auto")),
    ("y_true must be an array of real numbers", lambda a: ("abc", a, "auto")),
    ("y_true must have 3 dimensions", lambda a: (None, a, "auto")),
    ("y_true must be an array of real numbers", lambda a: ([[[1.0], [1.0, 2.0]]], a, "auto")),
]


@fuzz(20)
@given(case=st.sampled_from(METRIC_BAD), n=st.integers(1, 5))
def test_attention_error_invalid_is_named(case, n):
    match, build = case
    y_true, y_pred, task = build(np.ones((n, 2, 2)))
    raises_naming(match, lambda: attention_error(y_true, y_pred, task=task))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_attention_error_zero_features_raises():
    z = np.ones((2, 2, 0))
    raises_naming("y_true", lambda: attention_error(z, z, task="seq2seq"))


def test_attention_error_seq2lab_non_square_raises():
    a = np.ones((2, 2, 3))
    raises_naming("seq2lab", lambda: attention_error(a, a, task="seq2lab"))


# ------------------------------------------------------------ state evolution
SE_OPTIONS = dict(n_nodes=256, max_iter=20)
SE_FAST = dict(attention="linear", n_tokens=1, options=SE_OPTIONS)
#: the numerical options, passed in options= (not as keywords: those are deprecated)
SE_OPTION_NAMES = ("n_nodes", "tol", "max_iter", "damping", "sigma_hat_form", "init",
                   "random_state", "n_coarse_nodes")


@fuzz(40)
@given(alpha=st.floats(1e-2, 1e2), reg_lambda=st.one_of(st.just(0.0), st.floats(1e-4, 1e3)),
       width_ratio=st.floats(1.0, 4.0), kappa0=st.floats(0.1, 2.0),
       noise=st.floats(0.0, 2.0), beta=st.floats(0.1, 5.0),
       parametrization=st.sampled_from(["factored", "direct"]))
def test_state_evolution_valid_is_finite(alpha, reg_lambda, width_ratio, kappa0, noise, beta,
                                         parametrization):
    if parametrization == "direct":
        reg_lambda = max(reg_lambda, 1e-4)
    # λ = 0 at or below the interpolation threshold: the λ → 0⁺ limit, finite too
    res = solve_state_evolution(alpha, reg_lambda=reg_lambda, target=WishartTarget(kappa0),
                                width_ratio=width_ratio, noise=noise, beta=beta,
                                target_beta=beta, parametrization=parametrization, **SE_FAST)
    assert isinstance(res.converged, bool)
    for name in ("m", "q", "sigma", "test_error", "train_error", "train_objective"):
        assert np.isfinite(getattr(res, name)), name
    assert res.test_error >= 0


SE_BAD = {
    "alpha": [0.0, -1.0, np.nan, np.inf, "a", None],
    "n_tokens": [0, 2.5, "a"],
    "reg_lambda": BAD_REAL_NONNEG,
    "target": ["wishart", None, 3, PowerLawTarget(1.0), SpectrumTarget([1.0, 2.0])],
    "width_ratio": [0.0, -1.0, np.nan, np.inf, 0.5],
    "beta": BAD_REAL_POSITIVE,
    "target_beta": BAD_REAL_POSITIVE,
    "noise": BAD_REAL_NONNEG,
    "attention": ["relu"],
    "task": ["auto", "seq2vec"],
    "parametrization": ["lowrank"],
    "n_features": [1, 0, 2.5, "a"],
    "n_nodes": [8, 0, 16.5],
    "tol": [0.0, -1.0, np.nan],
    "max_iter": [0, 2.5],
    "damping": [0.0, 1.5, np.nan],
    "sigma_hat_form": ["exact"],
}


@fuzz(50)
@given(case=st.sampled_from([(k, v) for k, vs in SE_BAD.items() for v in vs]))
def test_state_evolution_invalid_is_named(case):
    name, value = case
    kwargs = {"alpha": 0.5, "reg_lambda": 0.1, "target": WishartTarget(0.5), **SE_FAST}
    if name in SE_OPTION_NAMES:
        kwargs["options"] = {**SE_OPTIONS, name: value}
    else:
        kwargs[name] = value
    # width_ratio < 1 and finite-size targets explain themselves via n_features
    match = "n_features" if (name == "target" and not isinstance(value, (str, int))
                             and value is not None) or (name == "width_ratio"
                                                        and value == 0.5) else name
    raises_naming(match, lambda: solve_state_evolution(**kwargs))


def test_state_evolution_direct_needs_positive_reg_lambda():
    raises_naming("reg_lambda", lambda: solve_state_evolution(
        0.5, reg_lambda=0.0, target=WishartTarget(0.5), parametrization="direct", **SE_FAST))
    raises_naming("n_tokens", lambda: solve_state_evolution(
        0.5, reg_lambda=0.1, target=WishartTarget(0.5),
        **{**SE_FAST, "attention": "softmax"}))


@pytest.mark.parametrize("init", ["x", (1.0, 2.0)])
def test_state_evolution_bad_init_is_named(init):
    with pytest.raises(BAD) as info:
        solve_state_evolution(0.5, reg_lambda=0.1, target=WishartTarget(0.5),
                              **{**SE_FAST, "options": {**SE_OPTIONS, "init": init}})
    assert "init" in str(info.value)


def test_state_evolution_bad_random_state_is_named():
    raises_naming("random_state", lambda: solve_state_evolution(
        0.5, reg_lambda=0.1, target=WishartTarget(0.5),
        **{**SE_FAST, "options": {**SE_OPTIONS, "random_state": "x"}}))


# ---------------------------------------------------------- free convolution
@fuzz(60)
@given(kind=st.sampled_from(["wishart", "discrete"]), kappa=st.floats(0.05, 4.0),
       delta=st.one_of(st.just(0.0), st.floats(1e-6, 1e3)),
       atoms=st.lists(st.floats(0.0, 10.0), min_size=1, max_size=6))
def test_free_convolution_valid_is_finite(kind, kappa, delta, atoms):
    law = WishartLaw(kappa) if kind == "wishart" else DiscreteLaw(atoms)
    mu = free_convolution(law, delta)
    m2 = mu.second_moment()
    assert np.isfinite(m2)
    # the semicircle adds δ² to the second moment
    np.testing.assert_allclose(m2, law.second_moment() + delta ** 2, rtol=1e-6, atol=1e-9)
    lo, hi = mu.support()
    assert np.isfinite(lo) and np.isfinite(hi) and lo <= hi


FREE_BAD = [
    ("law", ("wishart", 0.3), {}),
    ("law", (WishartTarget(0.5), 0.3), {}),
    ("law", (None, 0.3), {}),
    ("delta", (WishartLaw(0.5), -1.0), {}),
    ("delta", (WishartLaw(0.5), np.nan), {}),
    ("delta", (WishartLaw(0.5), np.inf), {}),
    ("delta", (WishartLaw(0.5), "a"), {}),
    ("delta", (WishartLaw(0.5), None), {}),
    ("rtol", (WishartLaw(0.5), 0.3), {"rtol": 0.0}),
    ("rtol", (WishartLaw(0.5), 0.3), {"rtol": np.nan}),
    ("rtol", (WishartLaw(0.5), 0.3), {"rtol": -1e-3}),
]


@fuzz(15)
@given(case=st.sampled_from(FREE_BAD))
def test_free_convolution_invalid_is_named(case):
    name, args, kwargs = case
    raises_naming(name, lambda: free_convolution(*args, **kwargs))


@fuzz(40)
@given(exponent=st.integers(0, 300), attention=st.sampled_from(["softmax", "linear"]))
def test_forward_at_any_scale_is_finite_or_names_X(exponent, attention):
    """Scaled inputs give finite maps or a ValueError naming X, never a silent NaN."""
    teacher = AttentionIndexedModel(4, attention=attention, random_state=0)
    X = np.random.RandomState(1).standard_normal((3, 2, 4)) * 10.0 ** exponent
    try:
        A = teacher.attention_matrix(X)
    except ValueError as exc:
        assert str(exc).startswith("X has entries up to")
        assert exponent > 100  # x_a^T S x_b stays finite while |X|² does
    else:
        assert np.all(np.isfinite(A))
