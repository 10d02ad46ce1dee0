"""Progress bars count real work: an early stop ends at 100 %; verbose=2 logs each step."""

import io
import re
import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning
from tqdm import tqdm

from skattn import TiedAttentionRegressor, make_attention_indexed
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


def test_converged_fit_bar_ends_at_total(capsys):
    X, y = _small_fit_data()
    module = FactoredAttention(6, 6, W=np.random.default_rng(0).standard_normal((6, 6)),
                               dtype=torch.float64)
    result = train(module, X, y, reg_lambda=0.1, max_iter=5000, verbose=1)
    assert result.n_iter < 5000  # stopped early
    err = capsys.readouterr().err
    final = err.strip().split("\r")[-1]
    assert f"{result.n_iter}/{result.n_iter}" in final and "100%" in final
    assert "/5000" not in final


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
