"""One vocabulary: CLI help lists the choices and messages use flag names; top-level names
match the README; signatures of the estimators and data generators show real defaults."""

import inspect
import pathlib
import re

import pytest

import skattn
from skattn.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _help(capsys, *argv):
    assert main([*argv, "--help"]) == 0  # the CLI returns, it does not exit
    return capsys.readouterr().out


@pytest.mark.parametrize("command", ["theory", "simulate", "finite-size", "sweep"])
def test_help_lists_the_choices(capsys, command):
    out = " ".join(_help(capsys, command).split())
    assert "--attention {softmax,linear}" in out
    assert "--target {wishart,powerlaw}" in out
    assert "--task {seq2lab,seq2seq}" in out
    assert "one or more of softmax, linear" in out


def test_finite_size_help_has_no_unused_n_features(capsys):
    out = _help(capsys, "finite-size")
    assert "--n-features" not in out and "unused" not in out and "--d D" in out


def test_messages_use_flag_names(capsys):
    code = main(["theory", "--alpha", "0.3", "--target", "powerlaw"])
    err = capsys.readouterr().err
    assert code != 0 and "--n-features" in err
    assert not re.search(r"(?<![-\w])n_features", err)


def test_user_error_translates_names_and_aliases():
    from skattn.cli.arguments import user_error

    msg = str(user_error(ValueError("n_features=3 is too small: pass n_features >= 8")))
    assert msg == "--n-features: --n-features=3 is too small: pass --n-features >= 8"
    msg = str(user_error(ValueError("PowerLawTarget needs n_features."),
                         aliases={"n_features": "d"}))
    assert msg == "PowerLawTarget needs --d."
    # ordinary words are left alone
    assert str(user_error(ValueError("the attention function"))) == "the attention function"


def test_readme_estimators_are_top_level_exports():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for name in re.findall(r"`(\w+Regressor|AsymptoticPredictor)`", readme):
        assert name in skattn.__all__ and getattr(skattn, name) is not None, name


def test_user_guide_lists_every_estimator():
    guide = (ROOT / "docs" / "user_guide.rst").read_text(encoding="utf-8")
    for name in ("TiedAttentionRegressor", "UntiedAttentionRegressor",
                 "DirectAttentionRegressor", "AsymptoticPredictor", "ScaledLambdaRegressor"):
        assert f":class:`~skattn.{name}`" in guide, name
    assert "All three" not in guide


@pytest.mark.parametrize("obj", [skattn.TiedAttentionRegressor, skattn.UntiedAttentionRegressor,
                                 skattn.DirectAttentionRegressor, skattn.AsymptoticPredictor,
                                 skattn.ScaledLambdaRegressor, skattn.AttentionIndexedModel,
                                 skattn.make_attention_indexed])
def test_signatures_show_real_defaults(obj):
    for name, p in inspect.signature(obj).parameters.items():
        assert "unset" not in repr(p.default).lower(), name


def _public_callables():
    """Every public callable of skattn and skattn.theory, with the public methods of the
    classes among them."""
    import skattn.theory

    seen = {}
    for module in (skattn, skattn.theory):
        for name in module.__all__:
            obj = getattr(module, name)
            if not callable(obj):
                continue
            seen.setdefault(id(obj), (f"{module.__name__}.{name}", obj))
            if inspect.isclass(obj):
                for attr, member in vars(obj).items():
                    if not attr.startswith("_") and inspect.isfunction(member):
                        seen.setdefault(id(member), (f"{module.__name__}.{name}.{attr}",
                                                     member))
    return list(seen.values())


def test_no_public_signature_shows_a_placeholder():
    """Every public callable of skattn and skattn.theory shows real defaults in
    ``inspect.signature`` (the thresholds, bayes_optimal, optimal_reg_lambda and
    state_evolution_curve showed ``<unset>`` before)."""
    checked, bad = 0, []
    for qualname, obj in _public_callables():
        try:
            signature = inspect.signature(obj)
        except (TypeError, ValueError):  # builtins without a signature
            continue
        checked += 1
        if "unset" in str(signature).lower():
            bad.append(f"{qualname}{signature}")
    assert checked > 50
    assert not bad, "\n".join(bad)


def test_model_keywords_are_checked_by_name():
    """The thresholds and bayes_optimal take the model as documented keywords: an unknown
    one is a TypeError naming it, a problem with a keyword a ValueError."""
    from skattn.data import WishartTarget
    from skattn.theory import (StateEvolutionProblem, bayes_optimal, bayes_optimal_threshold,
                               interpolation_threshold, perfect_recovery_threshold)

    tg = WishartTarget(0.5)
    for fn in (interpolation_threshold, perfect_recovery_threshold, bayes_optimal_threshold):
        assert fn(n_tokens=2, target=tg) == fn(StateEvolutionProblem(n_tokens=2, target=tg))
        with pytest.raises(TypeError, match="n_token"):
            fn(n_token=2, target=tg)
        with pytest.raises(ValueError, match="attention"):
            fn(StateEvolutionProblem(n_tokens=2, target=tg), attention="softmax")
    with pytest.raises(TypeError, match="reg_lambda"):  # the Bayes learner has no λ
        bayes_optimal(0.1, n_tokens=2, target=tg, reg_lambda=0.1)
    with pytest.raises(TypeError, match="noise"):       # no noise in perfect recovery
        perfect_recovery_threshold(n_tokens=2, target=tg, noise=0.5)


def test_one_demo_timing_across_the_docs():
    """README, index and cli.rst quote the same time for the demo (measured: 60 s on a
    fresh clone, 53 s of CPU time under load on 2026-12-01)."""
    for path in ("README.md", "docs/index.rst", "docs/cli.rst"):
        text = " ".join((ROOT / path).read_text(encoding="utf-8").split())
        assert "about a minute on two cores" in text, path
        assert "under five minutes" not in text, path
