"""The validation report is rendered from the committed result files (docs/_ext)."""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import validation_report as report  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"


def test_every_committed_result_file_has_a_renderer_and_provenance():
    files = sorted(p.name for p in RESULTS.iterdir() if p.suffix in (".json", ".jsonl"))
    assert "*Produced by*" in report.read_included("validate_table.rst")
    assert set(files) == set(report.RENDERERS), set(files) ^ set(report.RENDERERS)
    for name in files:
        meta, _ = report.load(name)
        assert meta["command"].startswith("python benchmarks/research/"), name
        assert meta["date"][:4].isdigit(), name


@pytest.mark.parametrize("name", sorted(report.RENDERERS))
def test_each_table_names_its_command_and_date(name):
    text = report.render(name)
    meta, _ = report.load(name)
    assert text.startswith(".. list-table::")
    assert meta["command"] in text and meta["date"] in text
    assert "*Produced by*" in text
    # every row as wide as the header: docutils rejects the list-table otherwise
    _, header, body, *_ = report.RENDERERS[name](report.load(name)[1])
    assert all(len(row) == len(header) for row in body), name


def test_a_rendered_gap_is_the_mean_of_the_file(tmp_path):
    rows = [{"label": "a", "seed": s, "trained": t, "gaussian_alpha_eff": 1.0,
             "exact_gram": 2.0} for s, t in enumerate((1.1, 1.3))]
    (tmp_path / "linear_exact_gram.json").write_text(json.dumps(
        {"command": "python benchmarks/research/linear_exact_gram.py", "date": "2026-01-01",
         "d": 50, "rows": rows}))
    text = report.render("linear_exact_gram.json", tmp_path)
    sem = np.std([0.1, 0.3], ddof=1) / np.sqrt(2)
    assert f"+20.0 ± {100 * sem:.1f} %" in text          # over the Gaussian SE
    assert "-40.0 ± 5.0 %" in text                       # over the exact Gram (0.55, 0.65)
    assert "d = 50" in text


def test_a_file_without_provenance_is_refused(tmp_path):
    (tmp_path / "linear_exact_gram.json").write_text(json.dumps({"rows": []}))
    with pytest.raises(ValueError, match="command"):
        report.render("linear_exact_gram.json", tmp_path)
    with pytest.raises(ValueError, match="no renderer"):
        report.render("unknown.json", tmp_path)


def test_the_speed_grid_table_reads_median_worst_and_certified(tmp_path):
    rows = [{"section": "f", "what": "numpy unit (20 × 512² float64 matmul)", "seconds": 0.05},
            {"section": "f", "what": "  T=2 noise=0", "seconds": 0.3, "config": {}},
            {"section": "f", "what": "T=2 grid of 6 points", "n_tokens": 2, "n_points": 6,
             "median_s": 0.45, "worst_s": 1.02, "median_ratio": 9.0, "worst_ratio": 20.4,
             "goal_median_s": 0.1, "goal_worst_s": 0.5, "median_certified": 1.0,
             "worst_certified": 0.997, "unconverged": 1, "capped": 0}]
    (tmp_path / "speed_grid.json").write_text(json.dumps(
        {"command": "python benchmarks/research/speed_grid.py", "date": "2026-12-03",
         "rows": rows}))
    text = report.render("speed_grid.json", tmp_path)
    assert "T = 2" in text and "0.45 s (9 u)" in text and "1.02 s (20.4 u)" in text
    assert "0.1 / 0.5 s" in text and "1 / 0.997" in text and "1 (0 capped)" in text
    assert "0.05 s" in text                               # the unit, in the note
    assert "scalar unit" not in text                      # older runs have none
    rows.insert(1, {"section": "f", "what": "scalar unit (4e6 exp and log1p, numba, one "
                    "thread)", "seconds": 0.025})
    (tmp_path / "speed_grid.json").write_text(json.dumps(
        {"command": "python benchmarks/research/speed_grid.py", "date": "2026-12-06",
         "rows": rows}))
    assert "scalar unit" in report.render("speed_grid.json", tmp_path)
    assert "0.025 s" in report.render("speed_grid.json", tmp_path)
    # the uncertified nodes' first-order effect on the test error: – in older runs
    assert "- 1 / 0.997\n     - –\n" in text
    rows[-1]["worst_effect_share"] = 0.634
    (tmp_path / "speed_grid.json").write_text(json.dumps(
        {"command": "python benchmarks/research/speed_grid.py", "date": "2026-12-06",
         "rows": rows}))
    assert "63.4 %" in report.render("speed_grid.json", tmp_path)
    assert "held-out" not in report.render("speed_grid.json", tmp_path)
    # the held-out grids: the same table, titled with their seeds
    (tmp_path / "speed_grid_held_out.json").write_text(json.dumps(
        {"command": "python benchmarks/research/speed_grid.py --held-out",
         "date": "2026-12-07", "seeds": [1, 2, 3], "rows": rows}))
    held_out = report.render("speed_grid_held_out.json", tmp_path)
    assert "held-out grids of seeds 1, 2, 3" in held_out and "63.4 %" in held_out


def test_the_uncertified_effect_table_reads_each_setting(tmp_path):
    def arm(nodes, step, share, converged=True):
        return {"effect_nodes": nodes, "step": step, "seconds": 1.0, "converged": converged,
                "certified_fraction": 0.997, "test_error": 1.5, "share": share,
                "effect": None}

    rows = [{"n_tokens": 6, "seed": 0, "point": 2, "role": "grid",
             "arms": [arm(1024, 1e-4, 0.634), arm(8192, 1e-4, 0.526)]},
            {"n_tokens": 3, "seed": 2, "point": 3, "role": "held out",
             "arms": [arm(1024, 1e-4, None, False), arm(8192, 1e-4, float("nan"))]}]
    (tmp_path / "uncertified_effect.json").write_text(json.dumps(
        {"command": "python benchmarks/research/uncertified_effect.py", "date": "2026-12-06",
         "landed": {"effect_nodes": 1024, "step": 1e-4}, "rows": rows}))
    text = report.render("uncertified_effect.json", tmp_path)
    assert "1024 nodes, step 0.0001" in text and "8192 nodes, step 0.0001" in text
    assert "63.4 %" in text and "52.6 %" in text and "0.997" in text
    assert "– (unconverged)" in text and "landed 1024 nodes" in text


def _trace_row(T, seed, point, seconds, converged, stages, ratio=1.0):
    return {"seed": seed, "point": point, "n_nodes": 8192, "seconds": seconds,
            "n_iter": sum(s["evaluations"] for s in stages), "converged": converged,
            "residual": 1e-8 if converged else 3e-4, "stall_floor": None if converged else 3e-4,
            "certified_fraction": 1.0, "test_error": 0.5, "state": [1.0, 1.0, 1.0],
            "q_over_coarse_end": ratio,
            "config": {"n_tokens": T, "noise": 0.2, "kappa": 0.5, "alpha": 0.3,
                       "reg_lambda": 1e-3, "beta": 3.0}, "stages": stages}


def test_the_solver_trace_table_lists_slow_stalled_and_ghost_points(tmp_path):
    fast = [{"stage": "coarse, warm", "evaluations": 15, "seconds": 0.1, "residuals": []},
            {"stage": "fine map 1, warm", "evaluations": 4, "seconds": 0.2, "residuals": []},
            {"stage": "fine map 1, certified", "evaluations": 1, "seconds": 0.2,
             "residuals": []}]
    slow = fast[:1] + [{"stage": "fine map 2, multi-start", "evaluations": 150,
                        "seconds": 90.0, "residuals": []}]
    rows = [_trace_row(3, 0, 0, 0.5, True, fast), _trace_row(3, 0, 1, 0.6, True, fast),
            _trace_row(3, 1, 3, 90.1, False, slow, ratio=15.5)]
    meta = {"command": "python benchmarks/research/solver_trace.py", "date": "2026-12-05"}
    (tmp_path / "solver_trace.jsonl").write_text(
        "\n".join(json.dumps(r) for r in [meta, *rows]) + "\n")
    text = report.render("solver_trace.jsonl", tmp_path)
    assert "T = 3" in text and "3 points" in text and "median 0.6 s, worst 90.1 s" in text
    assert "1 not converged" in text
    assert "seed 1 point 3" in text and "15 / 0 / 150 / 0" in text and "15.5" in text
    assert "seed 0 point 0" not in text                   # fast and converged: summary only
    assert "floor 3.0e-04" in text


def test_the_ghost_table_shows_each_route_and_the_trained_models(tmp_path):
    config = {"n_tokens": 4, "noise": 0.45, "kappa": 0.35, "alpha": 0.28,
              "reg_lambda": 1.1e-3, "beta": 3.06}
    rows = [{"kind": "coarse stage", "alpha_fraction": 1.0, "state": [1.49, 1.83, 0.62],
             "residual": 9.3e-3, "converged": False, "evaluations": 30},
            {"kind": "reported (cold start)", "state": [10.3, 99.4, 44.9], "residual": 8.2e-4,
             "converged": False, "evaluations": 319, "test_error": 1.8455,
             "objective": 0.0624, "certified_fraction": 0.54, "seconds": 178.0},
            {"kind": "trained", "d": 90, "seed": 1, "state": [7.95, 55.9, None],
             "test_error": 1.777, "objective": 0.0714, "n_iter": 619, "seconds": 56.0}]
    (tmp_path / "ghost_point.json").write_text(json.dumps(
        {"command": "python benchmarks/research/ghost_point.py", "date": "2026-12-05",
         "config": config, "seed": 0, "point": 2, "n_nodes": 8192, "rows": rows}))
    text = report.render("ghost_point.json", tmp_path)
    assert "T = 4, grid seed 0 point 2" in text and "λ 0.0011" in text
    assert "coarse stage" in text and "residual 9.3e-03, 30 evaluations" in text
    assert "10.3, 99.4, 44.9" in text and "1.845" in text
    assert "trained, d = 90, teacher 1" in text and "7.95, 55.9, —" in text
    assert "619 L-BFGS iterations" in text


def _rule_row(arm, point, n_iter, test, certified=1.0, T=3, capped=False, applied=None):
    config = {"n_tokens": T, "noise": 0.1, "kappa": 0.5, "alpha": 0.3, "reg_lambda": 0.01,
              "beta": 2.0}
    return {"n_tokens": T, "seed": 4, "point": point, "arm": arm, "config": config,
            "capped": capped, "seconds": None if capped else 0.1 * n_iter, "n_iter": n_iter,
            "converged": n_iter < 50, "residual": 1e-9 if n_iter < 50 else 3e-4,
            "stall_floor": None if n_iter < 50 else 3e-4, "certified_fraction": certified,
            "test_error": test, "train_error": 0.5 * test, "applied": applied}


def test_the_solver_rules_table_compares_each_rule_where_it_applied(tmp_path):
    rows = [{"reference_seconds": 0.07},
            _rule_row("landed", 0, 20, 0.4, applied={"polish_stall_window": 0}),
            _rule_row("shell_starts", 0, 20, 0.4),                      # the same: not listed
            _rule_row("landed", 1, 60, 0.5, certified=0.97,
                      applied={"polish_stall_window": 1, "handover_orthogonal": 0}),
            _rule_row("polish_stall_window", 1, 72, 0.5, certified=0.97),
            _rule_row("shell_starts", 1, 60, 0.505, certified=0.96),   # moved: listed
            _rule_row("landed", 2, 0, 0.0, capped=True)]
    meta = {"command": "python benchmarks/research/solver_rules.py", "date": "2026-12-05"}
    (tmp_path / "solver_rules.jsonl").write_text(
        "\n".join(json.dumps(r) for r in [meta, *rows]) + "\n")
    text = report.render("solver_rules.jsonl", tmp_path)
    assert "applied at 0 of 2 points" in text                   # the handover rule
    assert "applied at 1 of 2 points" in text and "6 s (60)" in text and "7.2 s (72)" in text
    assert "floor 3.0e-04" in text
    assert "run at 2 T = 3–5 points, 1 differ" in text
    assert "1.0e-02" in text and "0.9700 / 0.9600" in text
    assert text.count("seed 4 point 0") == 0 and "1 capped" in text


def test_the_recovery_table_labels_points_without_a_seed(tmp_path):
    on = _rule_row("landed", 7, 60, 2.6e-5, T=4,
                   applied={"handover_orthogonal": 1, "orthogonal_at_recovery": 1})
    off = _rule_row("orthogonal_at_recovery", 7, 70, 2.6e-5 * (1 + 6.4e-8), T=4)
    rows = [dict(r, seed=None) for r in (on, off)]
    meta = {"command": "python benchmarks/research/solver_rules.py --set recovery",
            "date": "2026-12-05"}
    (tmp_path / "solver_rules_recovery.jsonl").write_text(
        "\n".join(json.dumps(r) for r in [meta, *rows]) + "\n")
    text = report.render("solver_rules_recovery.jsonl", tmp_path)
    assert "points near perfect recovery" in text and "T = 4 point 7" in text
    assert "orthogonal_at_recovery" in text and "6.4e-08" in text
    assert "shell_starts" not in text and "seed" not in text.split("*Produced")[0]


def test_the_split_table_lists_the_points_whose_certified_fraction_moved(tmp_path):
    rows = [{"reference_seconds": 0.07},
            _rule_row("landed", 0, 20, 0.4, T=4, certified=0.999, applied={}),
            _rule_row("split_rounds", 0, 20, 0.4, T=4, certified=0.98),   # moved: listed
            _rule_row("landed", 1, 30, 0.3, T=5, applied={}),
            _rule_row("split_rounds", 1, 30, 0.3, T=5)]                    # the same
    meta = {"command": "python benchmarks/research/solver_rules.py --rules split_rounds "
                       "--output solver_rules_split.jsonl", "date": "2026-12-05"}
    (tmp_path / "solver_rules_split.jsonl").write_text(
        "\n".join(json.dumps(r) for r in [meta, *rows]) + "\n")
    text = report.render("solver_rules_split.jsonl", tmp_path)
    assert "The certificate's split search, on and off" in text
    assert "run at 2 T ≥ 3 points, 1 differ" in text
    assert "0.9990 / 0.9800" in text and "seed 4 point 1" not in text
    assert "polish_stall_window" not in text               # not switched in this run


def test_the_memory_table_lists_that_rule_alone(tmp_path):
    applied = {"handover_orthogonal": 0, "polish_stall_window": 0, "multistart_memory": 1}
    rows = [{"reference_seconds": 0.07},
            _rule_row("landed", 0, 26, 0.4, T=6, applied=applied),
            _rule_row("multistart_memory", 0, 22, 0.4 * (1 + 2e-9), T=6),
            _rule_row("landed", 1, 30, 0.3, T=5, applied=dict(applied, multistart_memory=0))]
    meta = {"command": "python benchmarks/research/solver_rules.py --rules multistart_memory "
                       "--output solver_rules_memory.jsonl", "date": "2026-12-07"}
    (tmp_path / "solver_rules_memory.jsonl").write_text(
        "\n".join(json.dumps(r) for r in [meta, *rows]) + "\n")
    text = report.render("solver_rules_memory.jsonl", tmp_path)
    assert "The polish's multi-start memory, on and off" in text
    assert "applied at 1 of 2 points" in text and "2.0e-09" in text
    assert "2.6 s (26)" in text and "2.2 s (22)" in text
    assert "polish_stall_window" not in text and "handover" not in text


def test_the_polish_rules_table_lists_the_two_rules_it_switched(tmp_path):
    applied = {"warm_give_up": 1, "one_certified_polish": 0}      # the rules asked for only
    rows = [{"reference_seconds": 0.07},
            _rule_row("landed", 0, 63, 0.4, T=2, applied=applied),
            _rule_row("warm_give_up", 0, 151, 0.4 * (1 + 3e-8), T=2),
            _rule_row("landed", 1, 28, 1.0, T=6,
                      applied={"warm_give_up": 0, "one_certified_polish": 1}),
            _rule_row("one_certified_polish", 1, 25, 1.0, T=6)]
    meta = {"command": "python benchmarks/research/solver_rules.py --rules "
                       "warm_give_up,one_certified_polish --output solver_rules_polish.jsonl",
            "date": "2026-12-07"}
    (tmp_path / "solver_rules_polish.jsonl").write_text(
        "\n".join(json.dumps(r) for r in [meta, *rows]) + "\n")
    text = report.render("solver_rules_polish.jsonl", tmp_path)
    assert "Solver rules, on and off" in text
    assert text.count("applied at 1 of 2 points") == 2
    assert "6.3 s (63)" in text and "15.1 s (151)" in text and "3.0e-08" in text
    assert "polish_stall_window" not in text and "handover" not in text
    assert "shell_starts" not in text and "multistart_memory" not in text


def test_the_split_share_table_sums_the_held_out_points(tmp_path):
    def row(T, role, arms):
        return {"n_tokens": T, "seed": 2, "point": 1, "role": role,
                "arms": [{"share": s, "certified_fraction": c, "seconds": sec,
                          "converged": True, "state": [1.0, 2.0, 0.5]}
                         for s, c, sec in arms]}
    data = {"command": "python benchmarks/research/split_share.py", "date": "2026-12-05",
            "landed_share": 0.1,
            "rows": [row(6, "fitted", [(0.001, 0.93, 30.0), (0.1, 0.96, 17.0)]),
                     row(3, "held out", [(0.001, 0.97, 7.0), (0.1, 0.98, 5.0)]),
                     row(4, "held out", [(0.001, 0.91, 20.0), (0.1, 0.95, 12.5)])]}
    (tmp_path / "split_share.json").write_text(json.dumps(data))
    text = report.render("split_share.json", tmp_path)
    assert "landed at 0.1" in text
    assert "0.001: 27.0 s, 0.9100" in text and "0.1: 17.5 s, 0.9500" in text
    assert "0.9600 (17.0 s)" in text                       # the fitted point, listed
    assert "agree to 1e-06 (relative) in every setting" in text
    data["rows"][1]["arms"][0]["state"] = [1.0, 2.0, 0.6]
    (tmp_path / "split_share.json").write_text(json.dumps(data))
    assert "between settings at T = 3 seed 2 point 1 (1.7e-01)" in \
        report.render("split_share.json", tmp_path)


def test_the_first_warm_starts_table_sums_seconds_and_evaluations(tmp_path):
    def row(T, role, arms):
        return {"n_tokens": T, "seed": 1, "point": 3, "role": role,
                "arms": [{"starts": s, "certified_fraction": 1.0, "seconds": sec,
                          "n_iter": ev, "converged": conv, "state": [1.0, 2.0, 0.5]}
                         for s, sec, ev, conv in arms]}
    data = {"command": "python benchmarks/research/first_warm_starts.py",
            "date": "2026-12-06", "landed_starts": 1,
            "rows": [row(4, "fitted", [(None, 1.5, 20, True), (1, 1.2, 20, True)]),
                     row(3, "held out", [(None, 2.0, 30, True), (1, 1.0, 31, True)]),
                     row(5, "held out", [(None, 3.0, 25, False), (1, 2.5, 25, True)])]}
    (tmp_path / "first_warm_starts.json").write_text(json.dumps(data))
    text = report.render("first_warm_starts.json", tmp_path)
    assert "landed at 1." in text
    assert "multi-start: 5.0 s, 55 evaluations, 1.0000" in text
    assert "1 start: 3.5 s, 56 evaluations, 1.0000" in text
    assert "1.0000 (3.0 s, 25 ev.) unconverged" in text
    assert "agree to 1e-06 (relative) in every setting" in text
    data["rows"][2]["arms"][1]["state"] = [1.0, 2.0, 0.5 + 1e-9]    # within the agreement
    data["rows"][1]["arms"][1]["state"] = [1.0, 2.01, 0.5]
    (tmp_path / "first_warm_starts.json").write_text(json.dumps(data))
    text = report.render("first_warm_starts.json", tmp_path)
    assert "between settings at T = 3 seed 1 point 3 (5.0e-03); elsewhere" in text


def test_the_row_relaxations_table_counts_the_closed_nodes(tmp_path):
    def node(rows, pair, star, failing=1):
        return {"rows": rows, "pair": pair, "star": star, "envelope": min(star, -0.01),
                "failing_rows": failing}
    data = {"command": "python benchmarks/research/row_relaxations.py", "date": "2026-12-06",
            "tol": 1e-9,
            "rows": [{"n_tokens": 6, "seed": 0, "point": 2, "certified_fraction": 0.966,
                      "sigma": 0.43,
                      "uncertified": 279, "studied": 4,
                      "nodes": [node(-0.1, -0.1, 0.0), node(-0.1, 0.0, 0.0),
                                node(-0.2, -0.1, -0.05, failing=2),
                                node(-1e-3, -1e-10, -1e-10)]},
                     {"n_tokens": 4, "seed": 0, "point": 1, "certified_fraction": 0.9999,
                      "sigma": 3.8,
                      "uncertified": 0, "studied": 0, "nodes": []}]}
    (tmp_path / "row_relaxations.json").write_text(json.dumps(data))
    _, header, body, _ = report.RENDERERS["row_relaxations.json"](data)
    assert all(len(row) == len(header) for row in body)      # a list-table needs it
    text = report.render("row_relaxations.json", tmp_path)
    assert "Which relaxation would certify" in text
    assert "279 / 4" in text
    # rows closes none, pair two (one within the tolerance), star three
    assert "0 (0%)" in text and "2 (50%)" in text and "3 (75%)" in text
    assert text.count("0 (0%)") == 2                      # rows and envelope close none
    assert "29% (52%)" in text    # one row of 6: 6 of 21 entries exact; two rows: 11
    assert "T = 4 seed 0 point 1" in text and "0 / 0" in text
