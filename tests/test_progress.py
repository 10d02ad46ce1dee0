"""Progress bars count real work: loops that stop on convergence show no total (iterations,
objective, elapsed time), long calls a ticker; verbose=2 logs each step; verbose=0 is
silent."""

import io
import re
import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning
from tqdm import tqdm

from skattn import TiedAttentionRegressor, WishartTarget, make_attention_indexed
from skattn._progress import finish_progress, log_step, progress_bar
from skattn.nn.modules import FactoredAttention
from skattn.nn.training import train


def test_finish_progress_sets_total_to_the_work_done():
    out = io.StringIO()
    bar = tqdm(total=5000, file=out, disable=False)
    bar.update(79)
    assert finish_progress(bar) == 79
    assert "79/79" in out.getvalue() and "100%" in out.getvalue()


def test_finish_progress_leaves_an_unfinished_bar():
    bar = tqdm(total=50, file=io.StringIO())
    bar.update(7)
    assert finish_progress(bar, completed=False) == 50


@pytest.mark.parametrize("verbose, shown", [(0, False), (False, False), (1, True),
                                            (True, True), (2, True)])
def test_progress_bar_shown_from_verbose_1(verbose, shown):
    bar = progress_bar(10, verbose, "x", file=io.StringIO())
    assert bar.disable is not shown
    bar.close()


def test_log_step_only_at_verbose_2(capsys):
    log_step(1, "quiet")
    log_step(2, "loud")
    captured = capsys.readouterr()
    assert "loud" in captured.out + captured.err
    assert "quiet" not in captured.out + captured.err


def _small_fit_data():
    X, y = make_attention_indexed(n_samples=60, n_features=6, random_state=0, layout="tokens")
    return torch.as_tensor(X), torch.as_tensor(y)


def test_training_bar_has_no_fake_total(capsys):
    """The bar shows the iterations done, the objective and the elapsed time, and never
    max_iter as a total (an ETA from it was minutes for a fit of seconds)."""
    X, y = _small_fit_data()
    module = FactoredAttention(6, 6, W=np.random.default_rng(0).standard_normal((6, 6)),
                               dtype=torch.float64)
    result = train(module, X, y, reg_lambda=0.1, max_iter=5000, verbose=1)
    assert result.n_iter < 5000  # stopped early
    err = capsys.readouterr().err
    assert "/5000" not in err and "%" not in err  # no total, no percentage, no ETA
    final = err.strip().split("\r")[-1]
    assert f"{result.n_iter}it" in final
    assert "objective/d²=" in final
    assert re.search(r"\[\d\d:\d\d", final)  # elapsed time


def test_amp_bar_has_no_fake_total(capfd):
    from skattn import AsymptoticPredictor

    X, y = make_attention_indexed(n_samples=200, n_features=6, random_state=0)
    est = AsymptoticPredictor(max_iter=500, verbose=1).fit(X, y)
    err = capfd.readouterr().err
    assert "/500" not in err and "%" not in err
    assert f"AMP: {est.n_iter_}it" in err.strip().split("\r")[-1]


def test_ticker_shows_elapsed_time_then_done(capsys):
    import time

    from skattn import _progress

    with _progress.ticker(1, "solve", delay=0.2):
        time.sleep(1.3)  # shown after 0.2 s, then refreshed every 0.5 s
    err = capsys.readouterr().err
    assert "solve: 00:00 elapsed" in err and "solve: 00:01 elapsed" in err
    assert re.search(r"solve: done in 1\.\d s", err)
    with _progress.ticker(0, "quiet", delay=0):
        time.sleep(0.1)
    with _progress.ticker(1, "fast"):  # ends before the default delay of 1 s: nothing
        pass
    with pytest.raises(KeyError), _progress.ticker(1, "boom", delay=0.1):
        time.sleep(0.3)
        raise KeyError("x")
    err = capsys.readouterr().err
    assert "quiet" not in err and "fast" not in err
    assert re.search(r"boom: failed in 0\.\d s", err)


def test_asymptotic_predictor_shows_the_state_evolution_at_verbose_1(capfd, monkeypatch):
    from skattn import AsymptoticPredictor, _progress

    monkeypatch.setattr(_progress, "_TICKER_DELAY", 0.0)  # shown however fast the solve

    X, y = make_attention_indexed(n_samples=200, n_features=10, random_state=0)
    kw = dict(target=WishartTarget(0.5), n_nodes=256, max_iter=300)
    AsymptoticPredictor(verbose=1, **kw).fit(X, y)
    err = capfd.readouterr().err
    assert "AMP:" in err and re.search(r"state evolution at alpha=2: done in \d", err)
    AsymptoticPredictor(verbose=0, **kw).fit(X, y)
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == ""


def test_asymptotic_predictor_logs_the_state_evolution_at_verbose_2(capfd):
    from skattn import AsymptoticPredictor

    X, y = make_attention_indexed(n_samples=200, n_features=10, random_state=0)
    kw = dict(target=WishartTarget(0.5), n_nodes=256, max_iter=300)
    est = AsymptoticPredictor(verbose=2, **kw).fit(X, y)
    captured = capfd.readouterr()
    # the solve's own lines, one per evaluation, and its result line; no ticker
    lines = re.findall(r"state evolution \(alpha=2, reg_lambda=0\.01\) evaluation \d+ ",
                       captured.out)
    assert len(lines) == est.state_.n_iter > 0
    assert "state evolution (alpha=2, reg_lambda=0.01): converged" in captured.out
    assert "done in" not in captured.err
    quiet = AsymptoticPredictor(verbose=0, **kw).fit(X, y)
    assert quiet.state_.test_error == est.state_.test_error


def test_verbose_2_logs_every_iteration(capsys):
    X, y = _small_fit_data()
    est = TiedAttentionRegressor(reg_lambda=0.1, max_iter=5, dtype="float64", device="cpu",
                                 random_state=0, verbose=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X.numpy(), y.numpy())
    captured = capsys.readouterr()
    lines = re.findall(r"lbfgs iteration \d+: objective", captured.out + captured.err)
    assert len(lines) == est.n_iter_ == 5


def test_verbose_0_is_silent(capsys):
    X, y = _small_fit_data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        TiedAttentionRegressor(max_iter=3, device="cpu", random_state=0).fit(X.numpy(),
                                                                               y.numpy())
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""
