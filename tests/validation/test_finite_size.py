"""Finite-size scaling (skattn.validation; docs/theory.rst §10)."""

import numpy as np
import pytest

from skattn.validation import (
    EXPONENTS,
    FSSConfig,
    fit_finite_size,
    finite_size_scaling,
    select_fit,
)

D = np.array([40, 60, 100, 160, 250, 400])


def _synthetic(exponent, e_inf=0.09, c=0.4, rel_noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    true = e_inf + c * D.astype(float) ** (-exponent)
    sem = np.full(D.shape, 2e-4)
    return true + rel_noise * sem * rng.standard_normal(D.shape), sem


@pytest.mark.parametrize("exponent", EXPONENTS)
def test_fit_recovers_parameters_on_clean_data(exponent):
    mean, sem = _synthetic(exponent)
    fit = fit_finite_size(D, mean, sem, exponent)
    assert fit.e_inf == pytest.approx(0.09, abs=1e-10)
    assert fit.c == pytest.approx(0.4, abs=1e-8)
    assert fit.chi2 == pytest.approx(0.0, abs=1e-12)
    assert fit.dof == D.size - 2


@pytest.mark.parametrize("exponent", EXPONENTS)
def test_fit_interval_covers_truth_with_noise(exponent):
    covered = 0
    for seed in range(40):
        mean, sem = _synthetic(exponent, rel_noise=1.0, seed=seed)
        fit = fit_finite_size(D, mean, sem, exponent)
        lo, hi = fit.e_inf_ci
        covered += lo <= 0.09 <= hi
        assert fit.c_ci[0] < fit.c < fit.c_ci[1]
    assert covered >= 34  # nominal 95 % of 40 = 38; the rescaling only widens


@pytest.mark.parametrize("exponent", EXPONENTS)
def test_model_selection_picks_the_generating_form(exponent):
    mean, sem = _synthetic(exponent, rel_noise=1.0, seed=3)
    fits = [fit_finite_size(D, mean, sem, a) for a in EXPONENTS]
    best, weight = select_fit(fits)
    assert best.exponent == exponent
    assert weight > 0.99


def test_fit_zero_spread_gets_a_floor_not_infinite_weight():
    mean, _ = _synthetic(0.5)
    fit = fit_finite_size(D, mean, np.zeros(D.shape), 0.5)
    assert np.isfinite(fit.e_inf_se) and np.all(np.isfinite(fit.e_inf_ci))


@pytest.mark.parametrize("d, match", [
    ((60, 100), "at least 3 distinct"),
    ((60, 60, 100), "at least 3 distinct"),
    ((4, 60, 100), ">= 8"),
    ((60.5, 80, 100), "integers"),
    # past int64: "too large", not "must hold integers >= 8" (issue #28)
    ((8, 10, 2 ** 64), r"\[8, 9223372036854775807\].*got 18446744073709551616 \(too large\)"),
])
def test_fit_rejects_bad_d(d, match):
    with pytest.raises(ValueError, match=match):
        fit_finite_size(d, np.ones(len(d)), np.ones(len(d)), 0.5)


def test_cli_names_a_too_large_d(capsys):
    """``skattn finite-size --d 8,10,2**64`` said "d must hold integers >= 8"."""
    from skattn.cli import main

    assert main(["finite-size", "--alpha", "0.3", "--d", f"8,10,{2 ** 64}"]) != 0
    err = capsys.readouterr().err
    assert "too large" in err and str(2 ** 64) in err and ">= 8" not in err


def test_fit_rejects_nan_and_bad_shapes():
    with pytest.raises(ValueError, match="finite"):
        fit_finite_size((10, 20, 30), (1.0, np.nan, 1.0), (0.1, 0.1, 0.1), 0.5)
    with pytest.raises(ValueError, match="shape"):
        fit_finite_size((10, 20, 30), (1.0, 1.0), (0.1, 0.1, 0.1), 0.5)
    with pytest.raises(ValueError, match="exponent"):
        fit_finite_size((10, 20, 30), (1.0, 1.0, 1.0), (0.1, 0.1, 0.1), 0.0)
    with pytest.raises(ValueError, match="fits"):
        select_fit([])


@pytest.mark.parametrize("kw, match", [
    (dict(d=(60, 100)), "d needs at least 3"),
    (dict(d=(4, 8, 12)), "d must hold integers >= 8"),
    (dict(n_seeds=1), "n_seeds must lie in"),
    (dict(n_test=10), "n_test must lie in"),
])
def test_finite_size_scaling_rejects_bad_arguments(kw, match, tmp_path):
    cfg = dict(alpha=0.3, reg_lambda=0.05)
    with pytest.raises(ValueError, match=match):
        finite_size_scaling(cfg, **{"d": (8, 12, 16), "n_seeds": 2, **kw},
                            output=tmp_path / "x.csv")


@pytest.mark.parametrize("spec, match", [
    (dict(alpha=-1, reg_lambda=0.1), "alpha"),
    (dict(alpha=0.3, reg_lambda=0.0, estimator="direct"), "reg_lambda"),
    (dict(alpha=0.3, reg_lambda=0.1, target={"family": "gauss"}), "family"),
    (dict(alpha=0.3, reg_lambda=0.1, target={"family": "powerlaw"}), "gamma"),
    (dict(alpha=0.3, reg_lambda=0.1, width=0.5), "unknown keys"),
    (dict(alpha=0.3, reg_lambda=0.1, n_tokens=1), "n_tokens"),
])
def test_config_rejects_bad_input(spec, match):
    with pytest.raises(ValueError, match=match):
        FSSConfig.from_dict(spec)


def test_config_round_trip_and_flags():
    cfg = FSSConfig(alpha=0.3, reg_lambda=0.1, target={"family": "powerlaw", "gamma": 1.5})
    assert FSSConfig.from_dict(cfg.to_dict()) == cfg
    # factored softmax seq2lab T = 2 on a spiky target: the spiked state evolution's domain
    assert not cfg.outside_gaussian_equivalence and not cfg.has_continuum
    for changes in (dict(estimator="direct"), dict(n_tokens=5), dict(task="seq2seq"),
                    dict(width_ratio=0.5)):
        assert FSSConfig(**{**cfg.to_dict(), **changes}).outside_gaussian_equivalence, changes
    assert not FSSConfig(alpha=0.3, reg_lambda=0.1, attention="linear", n_tokens=1,
                         target={"family": "powerlaw", "gamma": 1.5}
                         ).outside_gaussian_equivalence


def test_end_to_end_tiny_run_resumes(tmp_path):
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    cfg = dict(alpha=0.3, reg_lambda=0.05, n_tokens=1, attention="linear", max_iter=100)
    out = tmp_path / "fss.csv"
    kw = dict(d=(8, 12, 16), n_seeds=2, output=out, n_test=200)
    res = finite_size_scaling(cfg, **kw)
    assert res.n_run == 3 * 2 + 1 and res.n_skipped == 0
    for comp in (res.test, res.objective):
        assert np.all(np.isfinite(comp.mean)) and np.all(np.isfinite(comp.sem))
        assert np.isfinite(comp.reference) and comp.reference_kind == "continuum"
        assert np.isfinite(comp.extrapolated) and np.all(np.isfinite(comp.extrapolated_ci))
        assert np.isfinite(comp.relative_gap)
        assert set(comp.fits) == set(EXPONENTS) and comp.chosen in comp.fits.values()
        assert isinstance(comp.verdict, str) and comp.verdict
        assert np.all(np.isfinite(comp.se_finite_mean))  # the same-instance hook
    assert all("se_same_instance_test_error" in r for r in res.rows)
    again = finite_size_scaling(cfg, **kw)
    assert again.n_run == 0 and again.n_skipped == 7
    np.testing.assert_allclose(again.mean, res.mean)
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ax = res.plot()
    assert ax.get_xlabel().startswith("d^(-")
    res.plot(quantity="train_objective")
    plt.close("all")


def test_validation_configs_cover_the_grid():
    from skattn.validation import VALIDATION_CONFIGS as V

    assert len(V) >= 30
    assert len({c.label for c in V}) == len(V)
    assert {c.n_tokens for c in V} >= {1, 2, 3, 4}
    assert {c.attention for c in V} == {"softmax", "linear"}
    assert any(c.noise == 0 for c in V) and any(0.1 <= c.noise <= 0.5 for c in V)
    assert any(c.beta > c.target_beta for c in V) and any(c.beta < c.target_beta for c in V)
    assert {c.task for c in V} == {"seq2lab", "seq2seq"}
    assert sum(c.width_ratio < 1 for c in V) >= 2
    assert any(c.estimator == "direct" for c in V)
    assert any(c.attention == "softmax" and c.target["family"] == "powerlaw" for c in V)
    assert any(not c.has_continuum and not c.outside_gaussian_equivalence for c in V)
    assert any(c.reg_lambda <= 1e-3 for c in V)


def test_run_validation_grid_tiny(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    pytest.importorskip("matplotlib")
    torch.set_num_threads(1)
    from skattn.validation import run_validation_grid

    cfgs = [dict(label="lin T1 tiny", alpha=0.3, reg_lambda=0.05, n_tokens=1,
                 attention="linear", max_iter=100)]
    out = tmp_path / "grid.csv"
    res = run_validation_grid(out, d=(8, 12, 16), n_seeds=2, configs=cfgs, n_test=200)
    assert len(res) == 1 and not isinstance(res[0][1], str)
    table = (tmp_path / "grid_table.md").read_text(encoding="utf-8")
    assert "lin T1 tiny" in table and "sim d=16" in table
    assert (tmp_path / "grid_gaps.png").stat().st_size > 0
    assert "wall time" in capsys.readouterr().out
    run_validation_grid(out, d=(8, 12, 16), n_seeds=2, configs=cfgs, n_test=200,
                        table=tmp_path / "t.rst", command="python -m skattn.validation --d 8")
    text = (tmp_path / "t.rst").read_text(encoding="utf-8")
    assert "0 rows run now, 7 resumed" in text
    # the table names the command and the UTC date (the validation report shows both)
    assert "*Produced by* ``python -m skattn.validation --d 8`` *on* 20" in text


def test_domain_reasons_parse_joined_and_truncated_messages():
    from skattn.validation import domain_reasons

    text = ("outside the validated domain: spiky target: its top mode carries 83% of "
            "||S0||_F^2 (above 25%); the linear channel needs only second moments; "
            "outside the validated domain: strong rank cap: width_ratio=0.25 is bel")
    assert domain_reasons(text) == ["spiky target", "strong rank cap"]
    assert domain_reasons("") == [] and domain_reasons("something else") == []


def test_domain_warnings_count_seeds_at_the_largest_d():
    from skattn.validation import FiniteSizeResult

    spiky = "outside the validated domain: spiky target: top mode 31%"
    rows = [{"d": 40, "se_same_instance_domain": spiky},
            {"d": 100, "se_same_instance_domain": ""},
            {"d": 100, "se_same_instance_domain": spiky},
            {"d": 100}, {"d": 100, "se_same_instance_domain": spiky + "; " + spiky}]
    res = FiniteSizeResult(config=FSSConfig(alpha=0.3, reg_lambda=0.1), test=None,
                           objective=None, se={}, rows=rows, n_run=0, n_skipped=0,
                           wall_time=0.0, output="")
    assert res.domain_warnings == {"spiky target": 0.5} and res.outside_domain
    res.rows = rows[:1] + rows[1:2]  # warned only at d = 40: inside at the largest d
    assert res.domain_warnings == {} and not res.outside_domain


def test_validation_grid_flags_a_prediction_outside_the_domain(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("matplotlib")
    torch.set_num_threads(1)
    from skattn.validation import run_validation_grid

    # linear attention on a γ = 1.5 power law: the top mode carries ~80 % of ‖S0‖²_F,
    # and the same-instance prediction raises DomainWarning("spiky target")
    cfgs = [dict(label="lin T1 spiky tiny", alpha=0.3, reg_lambda=0.05, n_tokens=1,
                 attention="linear", max_iter=100,
                 target={"family": "powerlaw", "gamma": 1.5, "cutoff": None})]
    res = run_validation_grid(tmp_path / "grid.csv", d=(12, 16, 20), n_seeds=2,
                              configs=cfgs, n_test=200)
    result = res[0][1]
    assert result.domain_warnings == {"spiky target": 1.0}
    table = (tmp_path / "grid_table.md").read_text(encoding="utf-8")
    assert "lin T1 spiky tiny ⚠ outside domain (spiky target)" in table


def test_rows_carry_the_token_leverage_prediction_where_it_applies():
    """Linear T = 1 (factored, full width) inside the token-leverage domain gets
    ``se_token_test_error``; noiseless below α_perf, softmax and T = 2 do not."""
    import warnings

    from skattn.data import AttentionIndexedModel
    from skattn.validation import FSSConfig, fss_row, token_leverage_row

    noisy = FSSConfig(label="t", alpha=0.3, reg_lambda=0.05, n_tokens=1, attention="linear",
                      noise=0.3, max_iter=200)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        row = fss_row("simulation", noisy.to_json(), d=40, seed=0, n_test=500,
                       same_instance_se=True)
    assert np.isfinite(row["se_token_test_error"]) and row["se_token_mc_error"] > 0
    # the token prediction sits above the Gaussian one on rank-one tokens
    assert row["se_token_test_error"] > row["se_same_instance_test_error"]

    def teacher(cfg, d=40):
        return AttentionIndexedModel(d, n_tokens=cfg.n_tokens, target=cfg.make_target(),
                                     noise=cfg.noise, attention=cfg.attention, random_state=0)

    noiseless = FSSConfig(label="t", alpha=0.3, reg_lambda=0.05, n_tokens=1,
                          attention="linear")
    assert token_leverage_row(noiseless, teacher(noiseless)) == {}  # below α_perf: warns
    softmax = FSSConfig(label="t", alpha=0.3, reg_lambda=0.1)
    assert token_leverage_row(softmax, teacher(softmax)) == {}
    two = FSSConfig(label="t", alpha=0.3, reg_lambda=0.05, n_tokens=2, attention="linear",
                    noise=0.3)
    assert token_leverage_row(two, teacher(two)) == {}
    assert token_leverage_row(noisy, teacher(noisy, d=16)) == {}  # d < 40: warns


# ---- the public row API and the one target schema ----------------------------------------

def test_seed_for_is_the_seed_sequence_of_the_row_and_names_streams():
    from skattn.validation import SEED_STREAMS, seed_for

    want = int(np.random.SeedSequence([3, 40, 1]).generate_state(1)[0])
    assert seed_for(3, 40, "train") == seed_for(3, 40, 1) == want
    assert len({seed_for(0, 40, s) for s in SEED_STREAMS}) == len(SEED_STREAMS)
    with pytest.raises(ValueError, match="stream"):
        seed_for(0, 40, "labels")
    with pytest.raises(ValueError, match="seed"):
        seed_for(-1, 40, "teacher")


def test_make_teacher_is_the_teacher_the_rows_train_on():
    from skattn.validation import FSSConfig, make_teacher

    cfg = FSSConfig(alpha=0.3, reg_lambda=0.1, noise=0.2)
    a, b = make_teacher(cfg, 12, 1), make_teacher(cfg.to_dict(), 12, 1)
    np.testing.assert_array_equal(a.S0_, b.S0_)
    assert not np.array_equal(a.S0_, make_teacher(cfg, 12, 2).S0_)
    assert a.noise == 0.2 and a.n_tokens == 2


def test_fss_row_rejects_an_unknown_kind():
    from skattn.validation import FSSConfig, fss_row

    with pytest.raises(ValueError, match="kind"):
        fss_row("theory", FSSConfig(alpha=0.3, reg_lambda=0.1).to_json())


def test_experiments_rows_and_validation_configs_share_one_target_spec():
    from skattn.data import PowerLawTarget, WishartTarget, target_from_spec
    from skattn.experiments import make_target, row_target_spec
    from skattn.validation import FSSConfig

    spec = row_target_spec("wishart", kappa0=0.3)
    assert spec == {"family": "wishart", "kappa0": 0.3}
    assert FSSConfig(alpha=0.3, reg_lambda=0.1, target=spec).make_target() == \
        make_target("wishart", kappa0=0.3) == WishartTarget(0.3)
    pl = row_target_spec("powerlaw", gamma=1.5)
    assert target_from_spec(pl) == PowerLawTarget(1.5)
    with pytest.raises(ValueError, match="kappa0"):
        row_target_spec("wishart")
    with pytest.raises(ValueError, match="target\\['family'\\]"):
        target_from_spec({"family": "gaussian"})
