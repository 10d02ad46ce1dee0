"""Reliability, round 2: overflow, documented ranges, memory guards, one-line CLI errors,
atomic fits and messages that match their cause."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from skattn import AsymptoticPredictor, DirectAttentionRegressor, TiedAttentionRegressor
from skattn._validation import (
    DEFAULT_MEMORY_LIMIT_GB,
    MEMORY_LIMIT_ENV,
    atomic_fit,
    channel_memory_bytes,
    check_finite_result,
    check_memory,
    memory_limit_bytes,
)
from skattn.cli import main
from skattn.data import AttentionIndexedModel, WishartTarget, make_attention_indexed
from skattn.theory import StateEvolutionProblem, solve_state_evolution

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

GIB = 2 ** 30


@pytest.fixture(scope="module")
def data6():
    return make_attention_indexed(60, 6, n_tokens=2, random_state=0, layout="tokens")


def _problem(**changes):
    return StateEvolutionProblem(**{"target": WishartTarget(0.5), "n_tokens": 2,
                                    "reg_lambda": 0.01, **changes})


# ------------------------------------------------------------ 4. overflow, not silent NaN
@pytest.mark.parametrize("make", [
    lambda: TiedAttentionRegressor(max_iter=5, random_state=0),
    lambda: DirectAttentionRegressor(max_iter=5, random_state=0),
    lambda: AsymptoticPredictor(max_iter=5),
], ids=["tied", "direct", "amp"])
def test_predict_on_huge_X_raises_naming_X(make, data6):
    X, y = data6
    est = make().fit(X, y)
    with pytest.raises(ValueError, match=r"X has entries up to 3\.\d+e\+200"):
        est.predict(X * 1e200)
    with pytest.raises(ValueError, match="rescale X"):
        est.attention_matrix(X * 1e200)
    # large but representable inputs still give finite, row-stochastic maps
    A = est.attention_matrix(X * 1e10)
    assert np.all(np.isfinite(A)) and np.allclose(A.sum(-1), 1.0)


def test_teacher_attention_matrix_on_huge_X_raises_naming_X(data6):
    X, _ = data6
    teacher = AttentionIndexedModel(6, random_state=0)
    with pytest.raises(ValueError, match="X has entries up to"):
        teacher.attention_matrix(X * 1e200)
    A = teacher.attention_matrix(X * 1e10)
    assert np.all(np.isfinite(A))


def test_linear_seq2seq_output_overflow_names_X():
    X, y = make_attention_indexed(60, 6, n_tokens=2, attention="linear", task="seq2seq",
                                  random_state=0, layout="tokens")
    est = AsymptoticPredictor(attention="linear", task="seq2seq", max_iter=5).fit(X, y)
    # h ~ |X|² ≈ 1e300 is finite; the output h·x ≈ 1e450 is not
    with pytest.raises(ValueError, match="X has entries up to"):
        est.predict(X * 1e150)


def test_check_finite_result():
    assert check_finite_result(np.ones(3), "X", np.ones(3)).shape == (3,)
    with pytest.raises(ValueError, match=r"Z has entries up to 7"):
        check_finite_result(np.array([1.0, np.nan]), "Z", np.array([-7.0, 2.0]))


# ------------------------------------------------------------ 5. documented ranges
@pytest.mark.parametrize("field", ["beta", "target_beta", "noise"])
def test_problem_scalars_have_documented_upper_bounds(field):
    with pytest.raises(ValueError, match=rf"^{field} must lie in .*1000000\.0\]"):
        _problem(**{field: 1e300})
    assert getattr(_problem(**{field: 1e6}), field) == 1e6  # the bound itself is usable


def test_solver_alpha_upper_bound():
    with pytest.raises(ValueError, match=r"^alpha must lie in \[1e-12, 1000000\.0\]"):
        solve_state_evolution(1e300, _problem(), options=dict(n_nodes=64))


@pytest.mark.parametrize("seed", [-1, 2 ** 32])
def test_solver_random_state_range(seed):
    with pytest.raises(ValueError, match=r"random_state must be an int in \[0, 2\*\*32 - 1\]"):
        solve_state_evolution(0.3, _problem(), options=dict(n_nodes=64, random_state=seed))


def test_wishart_rank_ratio_range_and_draw_size(monkeypatch):
    with pytest.raises(ValueError, match=r"^rank_ratio must lie in \(0, 1000000\.0\]"):
        WishartTarget(1e300)
    with pytest.raises(ValueError, match=r"^rank_ratio=1000000\.0 \(p0 = 5000000000 .*GiB"):
        WishartTarget(1e6).sample(5000)
    assert WishartTarget(1e6).sample(2, random_state=0).shape == (2, 2)


# ------------------------------------------------------------ 6. memory guards
def test_memory_limit_from_environment(monkeypatch):
    monkeypatch.delenv(MEMORY_LIMIT_ENV, raising=False)
    assert memory_limit_bytes() == DEFAULT_MEMORY_LIMIT_GB * GIB
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "0.5")
    assert memory_limit_bytes() == 0.5 * GIB
    assert memory_limit_bytes(2) == 2 * GIB  # an explicit limit wins
    with pytest.raises(ValueError, match=r"what=1 needs about 1 GiB .* limit of 0\.5 GiB"):
        check_memory(GIB, "what=1")
    check_memory(0.4 * GIB, "what=1")
    for bad in ("lots", "-1", "nan"):
        monkeypatch.setenv(MEMORY_LIMIT_ENV, bad)
        with pytest.raises(ValueError, match=MEMORY_LIMIT_ENV):
            memory_limit_bytes()


def test_channel_estimate_grows_with_tokens_and_nodes():
    # T = 40: the T³ × K² table alone is 321 GiB (the allocation that was attempted)
    assert channel_memory_bytes(40, 0) / GIB == pytest.approx(320.6, rel=1e-3)
    assert channel_memory_bytes(2, 8192) < 0.01 * GIB
    assert channel_memory_bytes(4, 8192) < channel_memory_bytes(4, 16384)


@pytest.mark.parametrize("n_tokens", [40, 10 ** 6])
def test_state_evolution_refuses_huge_n_tokens(n_tokens):
    with pytest.raises(ValueError, match=rf"^n_tokens={n_tokens} .* GiB of memory"):
        solve_state_evolution(0.3, n_tokens=n_tokens, reg_lambda=0.01,
                              target=WishartTarget(0.5))


def test_state_evolution_refuses_huge_n_nodes(monkeypatch):
    with pytest.raises(ValueError, match=r"^n_tokens=12 with n_nodes=1000000 .* GiB"):
        solve_state_evolution(0.3, _problem(n_tokens=12), options=dict(n_nodes=10 ** 6))
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "1e-4")  # the limit is read at each call
    with pytest.raises(ValueError, match="n_nodes=8192"):
        solve_state_evolution(0.3, _problem())


def test_teacher_sample_refuses_huge_n_samples():
    teacher = AttentionIndexedModel(12, random_state=0)
    with pytest.raises(ValueError, match=r"^n_samples=144000000 .* GiB"):
        teacher.sample(144_000_000, layout="tokens")


@pytest.mark.parametrize("cls", [TiedAttentionRegressor, AsymptoticPredictor])
def test_fit_refuses_huge_width(cls, data6):
    X, y = data6
    with pytest.raises(ValueError, match=r"^(width|n_samples)=.* GiB of memory"):
        cls(width=1e9).fit(X, y)


def test_fit_memory_names_n_samples_when_data_dominate(monkeypatch, data6):
    X, y = data6
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "1e-6")
    with pytest.raises(ValueError, match=r"^n_samples=60 "):
        DirectAttentionRegressor().fit(X, y)
    with pytest.raises(ValueError, match=r"^n_samples=60 "):
        AsymptoticPredictor().fit(X, y)


# ------------------------------------------------------------ 7. CLI: one line, the option
@pytest.mark.parametrize("argv, option", [
    (["theory", "--alpha", "0.3", "--beta", "1e300"], "--beta"),
    (["theory", "--alpha", "1e300"], "--alpha"),
    (["theory", "--alpha", "0.3", "--noise", "1e300"], "--noise"),
    (["theory", "--alpha", "0.3", "--n-tokens", "40"], "--n-tokens"),
    (["simulate", "--alpha", "1e6", "--n-features", "12"], "--alpha"),
    (["simulate", "--alpha", "0.3", "--n-features", "12", "--width-ratio", "1e9"],
     "--width-ratio"),
])
def test_cli_errors_are_one_line_naming_the_option(capsys, argv, option):
    code = main(argv)
    out, err = capsys.readouterr()
    assert code != 0
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err
    assert f"error: {option}: " in err


def test_cli_amp_with_large_reg_lambda_runs(capsys):
    # used to end in a traceback; AMP now converges to S = 0
    code = main(["simulate", "--alpha", "0.3", "--n-features", "8", "--estimator", "amp",
                 "--reg-lambda", "5", "--n-seeds", "1", "--n-test", "50"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Traceback" not in err and "amp" in out


# ------------------------------------------------------------ 8. atomic fits
def _fitted_state(est):
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in vars(est).items()}


def _same_state(a, b):
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], np.ndarray):
            assert np.array_equal(a[k], b[k]), k
        else:
            assert a[k] is b[k] or a[k] == b[k], k


def test_predictor_failed_refit_leaves_state_and_runs_no_amp(monkeypatch, data6):
    import skattn.estimators.predictor as predictor_module

    X6, y6 = data6
    X10, y10 = make_attention_indexed(60, 10, n_tokens=2, random_state=1, layout="tokens")
    est = AsymptoticPredictor(target=WishartTarget(0.5), n_nodes=256, max_iter=20)
    est.fit(X6, y6)
    before = _fitted_state(est)
    error_before = est.predicted_test_error_

    def no_amp(*args, **kwargs):
        raise AssertionError("AMP ran before the parameters were validated")

    monkeypatch.setattr(predictor_module, "amp", no_amp)
    with pytest.raises(ValueError, match="width_ratio < 1"):
        est.set_params(width=0.5).fit(X10, y10)
    after = _fitted_state(est)
    after["width"] = before["width"]  # set_params itself is not undone
    _same_state(before, after)
    assert est.S_.shape == (6, 6) and est.predicted_test_error_ == error_before
    assert est.predict(X6).shape == y6.shape


@pytest.mark.parametrize("cls", [TiedAttentionRegressor, DirectAttentionRegressor])
def test_torch_failed_refit_leaves_state(cls, data6):
    pa = pytest.importorskip("pyarrow")
    X6, y6 = data6
    X10, y10 = make_attention_indexed(60, 10, n_tokens=2, random_state=1, layout="tokens")
    names = [f"x{i}" for i in range(12)]
    est = cls(max_iter=5, random_state=0, warm_start=True)
    X6f = X6.reshape(60, 12)
    est.fit(pa.table({name: X6f[:, i] for i, name in enumerate(names)}), y6)
    before = _fitted_state(est)
    with pytest.raises(ValueError, match="warm_start=True"):
        est.fit(X10, y10)  # shape mismatch, after the data were validated
    _same_state(before, _fitted_state(est))
    assert list(est.feature_names_in_) == names and est.n_features_in_ == 12


def test_atomic_fit_keeps_what_keep_allows():
    class Boom(Exception):
        pass

    class Est:
        @atomic_fit(keep=lambda exc: isinstance(exc, Boom))
        def fit(self, fail):
            """Doc."""
            self.a_ = 1
            raise fail

    est = Est()
    with pytest.raises(ValueError):
        est.fit(ValueError())
    assert not hasattr(est, "a_")
    with pytest.raises(Boom):
        est.fit(Boom())
    assert est.a_ == 1 and Est.fit.__doc__ == "Doc."


# ------------------------------------------------------------ 10. messages match causes
@pytest.mark.parametrize("param", ["reg_lambda", "beta"])
@pytest.mark.parametrize("cls", [TiedAttentionRegressor, DirectAttentionRegressor,
                                 AsymptoticPredictor])
def test_huge_reg_lambda_or_beta_rejected_with_range(cls, param, data6):
    X, y = data6
    with pytest.raises(ValueError) as info:
        cls(**{param: 1e300}).fit(X, y)
    msg = str(info.value)
    assert f"'{param}'" in msg and "1000000.0]" in msg
    assert "init_scale" not in msg


def test_float32_with_large_logits_warns(data6):
    X, y = data6
    with pytest.warns(UserWarning, match=r"dtype='float32' with beta=100.*dtype='float64'"):
        TiedAttentionRegressor(beta=100.0, max_iter=10, random_state=0).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)  # a UserWarning subclass
        TiedAttentionRegressor(beta=100.0, max_iter=10, random_state=0,
                               dtype="float64").fit(X, y)
        TiedAttentionRegressor(beta=1.0, max_iter=10, random_state=0).fit(X, y)
