"""What a state-evolution solve reports while it runs (``options={"verbose": ...}``)."""

import re

import pytest

from skattn import WishartTarget
from skattn.theory import SolverOptions, solve_state_evolution

# a softmax T = 2 point at β = 2 on 4096 nodes: a coarse stage on 1024 nodes, warm
# iterations and the certified evaluation, in well under a second
POINT = dict(n_tokens=2, reg_lambda=0.05, noise=0.1, beta=2.0, target_beta=2.0,
             target=WishartTarget(0.5))
OPTIONS = dict(n_nodes=4096)
LINE = re.compile(r"^state evolution \(alpha=0\.3, reg_lambda=0\.05\) evaluation (\d+) "
                  r"\((\d+) nodes, (multi-start|warm|memory|certified)[^)]*\): "
                  r"m=\S+ q=\S+ Σ=\S+ \|r\|=\S+, \d+\.\d\d s$")


def test_verbose_two_reports_every_evaluation_once_and_changes_nothing(capsys):
    quiet = solve_state_evolution(0.3, options=OPTIONS, **POINT)
    assert capsys.readouterr().out == ""
    loud = solve_state_evolution(0.3, options={**OPTIONS, "verbose": 2}, **POINT)
    lines = capsys.readouterr().out.splitlines()
    # the same path and result: reporting reads the evaluations only
    for name in ("m", "q", "sigma", "test_error", "train_error", "certified_fraction"):
        assert getattr(loud, name) == getattr(quiet, name), name
    assert loud.n_iter == quiet.n_iter
    evaluations = [LINE.match(line) for line in lines[:-1]]
    assert all(evaluations), [line for line, m in zip(lines, evaluations) if not m]
    # numbered in order, one line per evaluation the result counts
    assert [int(m.group(1)) for m in evaluations] == list(range(1, loud.n_iter + 1))
    # the coarse stage's nodes first, all of them at the end, certified last
    nodes = [int(m.group(2)) for m in evaluations]
    assert nodes[0] == 1024 and nodes[-1] == 4096
    assert evaluations[-1].group(3) == "certified"
    assert re.search(rf"converged; {loud.n_iter} evaluations in \d+\.\d s, "
                     rf"{100 * loud.certified_fraction:.2f} % of the nodes certified$",
                     lines[-1])


def test_verbose_one_shows_a_bar_without_lines(capsys):
    solve_state_evolution(0.3, options={**OPTIONS, "verbose": True}, **POINT)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "state evolution (alpha=0.3" in captured.err and "certified" in captured.err


@pytest.mark.parametrize("value, error", [(-1, ValueError), (1.5, TypeError),
                                          ("2", TypeError), (None, TypeError)])
def test_bad_verbose_names_the_option(value, error):
    with pytest.raises(error, match="verbose"):
        SolverOptions(verbose=value)


def test_verbose_bool_is_an_int():
    assert SolverOptions(verbose=True).verbose == 1
    assert SolverOptions(verbose=False).verbose == 0
    assert type(SolverOptions(verbose=True).verbose) is int
