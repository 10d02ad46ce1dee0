"""The validation report's tables, rendered from the committed result files.

Every table of ``docs/validation_report.rst`` is a ``.. results-table:: NAME`` directive:
this extension reads ``benchmarks/results/NAME`` (written by a script of
``benchmarks/research/``, with the command and the UTC date inside), computes the summary
(mean ± standard error over teachers of ``trained / prediction − 1``) and emits a table whose
caption names the command and the date. No number of the report is typed by hand; a rerun
of the script replaces the file and so the table.

``render(name)`` returns the reST of one table (used by the directive and by
``tests/validation/test_validation_report.py``).
"""

from __future__ import annotations

import collections
import json
import math
import pathlib
import statistics

import certificate_tables

ROOT = pathlib.Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"


# ----------------------------------------------------------------------------------------
# reading
# ----------------------------------------------------------------------------------------

def load(name, results=RESULTS):
    """``(meta, data)`` of one result file; a JSON-lines file gives ``data = {"rows": [...]}``
    and the provenance lines (each run appends one) in ``meta["runs"]``."""
    path = pathlib.Path(results) / name
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        records = [json.loads(line) for line in text.splitlines() if line.strip()]
        runs = [r for r in records if "command" in r]
        if not runs:
            raise ValueError(f"{path}: no line with the command and date")
        meta = dict(runs[-1], runs=runs)
        return meta, {"rows": [r for r in records if "command" not in r]}
    data = json.loads(text)
    if not isinstance(data, dict) or "command" not in data or "date" not in data:
        raise ValueError(f"{path}: a result file must carry 'command' and 'date'")
    meta = {k: data[k] for k in ("command", "date", "quick", "provenance") if k in data}
    return meta, data


# ----------------------------------------------------------------------------------------
# statistics and formatting
# ----------------------------------------------------------------------------------------

def mean_sem(values):
    """Mean and standard error (NaN with fewer than two values)."""
    v = [float(x) for x in values if x is not None and math.isfinite(float(x))]
    if not v:
        return math.nan, math.nan
    m = sum(v) / len(v)
    if len(v) < 2:
        return m, math.nan
    var = sum((x - m) ** 2 for x in v) / (len(v) - 1)
    return m, math.sqrt(var / len(v))


def pct(values):
    """``"+1.2 ± 0.3 %"`` of relative gaps (fractions)."""
    m, s = mean_sem(values)
    if math.isnan(m):
        return "—"
    if math.isnan(s):
        return f"{100 * m:+.1f} %"
    return f"{100 * m:+.1f} ± {100 * s:.1f} %"


def pct_pair(pair):
    """A stored ``[mean, s.e.]`` pair as :func:`pct` writes it."""
    m, s = (float(pair[0]), float(pair[1])) if pair is not None else (math.nan, math.nan)
    if math.isnan(m):
        return "—"
    return f"{100 * m:+.1f} %" if math.isnan(s) else f"{100 * m:+.1f} ± {100 * s:.1f} %"


def gaps(rows, trained, reference):
    """``trained / reference − 1`` of each row where both are finite."""
    out = []
    for r in rows:
        t, p = r.get(trained), r.get(reference)
        if t is None or p is None:
            continue
        t, p = float(t), float(p)
        if math.isfinite(t) and math.isfinite(p) and p != 0:
            out.append(t / p - 1)
    return out


def grouped(rows, key):
    groups = collections.OrderedDict()
    for r in rows:
        groups.setdefault(key(r), []).append(r)
    return groups


def _cell(value):
    text = str(value).replace("|", "/")
    return text if text.strip() else "—"


def list_table(title, header, body, meta, note=""):
    """A reST ``list-table`` whose caption names the command and the date."""
    lines = [f".. list-table:: {title}", "   :header-rows: 1", ""]
    for row in [header] + body:
        lines.append("   * - " + _cell(row[0]))
        lines += [f"     - {_cell(c)}" for c in row[1:]]
    lines.append("")
    runs = meta.get("runs")
    if runs and len(runs) > 1:
        made = "; ".join(f"``{r['command']}`` ({r['date']})" for r in runs)
        lines.append(f"*Produced by* {made}.")
    else:
        lines.append(f"*Produced by* ``{meta['command']}`` *on* {meta['date']}.")
    if meta.get("provenance"):
        lines[-1] += f" ({meta['provenance']}.)"
    if meta.get("quick"):
        lines[-1] += " **A --quick smoke run: not a measurement.**"
    if note:
        lines += ["", note]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------
# one renderer per result file: (title, header, body[, note])
# ----------------------------------------------------------------------------------------

def _per_label(rows, refs, label="label"):
    body = []
    for key, sel in grouped(rows, lambda r: r[label]).items():
        body.append([key, len(sel)] + [pct(gaps(sel, "trained", ref)) for ref in refs])
    return body


def _exact_gram_seq2lab(data):
    return ("Softmax seq2lab at d = {}: trained / prediction − 1".format(data.get("d", 100)),
            ["configuration", "teachers", "Gaussian SE", "exact-Gram channel"],
            _per_label(data["rows"], ("gaussian", "exact_gram")))


def _linear_exact_gram(data):
    return ("Linear seq2lab at d = {}: trained / prediction − 1".format(data.get("d", 100)),
            ["configuration", "teachers", "Gaussian SE at α_eff", "exact-Gram channel"],
            _per_label(data["rows"], ("gaussian_alpha_eff", "exact_gram")))


def _gaussian_sensing(data):
    body = []
    for key, block in data.items():
        if not isinstance(block, dict) or "rows" not in block:
            continue
        rows = block["rows"]
        cells = [key, len(rows), rows[0]["d"] if rows else "—"]
        for design in ("goe", "rank1", "elliptical"):
            cells.append(pct(gaps(rows, design, "prediction")))
        cells.append(pct(gaps(rows, "rank1", "exact_gram")))
        body.append(cells)
    return ("Linear T = 1: ERM on each design / same-instance prediction − 1",
            ["run", "teachers", "d", "GOE design", "rank-one tokens", "elliptical design",
             "rank-one / exact Gram"], body)


def _gaussian_sensing_softmax(data):
    rows = data["rows"]
    ds = sorted({r["d"] for r in rows})
    return ("Softmax T = 2 (α = {}, λ = {}, Δ = {}): trained / same-instance prediction − 1"
            .format(data["alpha"], data["reg_lambda"], data["noise"]),
            ["d", "teachers", "Gaussian design", "token data"],
            [[d, len(sel), pct(gaps(sel, "gaussian_design", "prediction")),
              pct(gaps(sel, "tokens", "prediction"))]
             for d in ds for sel in [[r for r in rows if r["d"] == d]]])


def _leverage_mixture(data):
    # one row per (configuration, d, seed): the last one written, as the script reads it
    rows = list({(r["label"], r["d"], r["seed"]): r for r in data["rows"]}.values())
    body = []
    for (label, d), sel in grouped(rows, lambda r: (r["label"], r["d"])).items():
        body.append([label, d, len(sel), pct(gaps(sel, "trained", "default_se")),
                     pct(gaps(sel, "trained", "leverage"))])
    return ("Trained / prediction − 1: default same-instance SE and the leverage mixture",
            ["configuration", "d", "teachers", "default SE", "leverage mixture"], body)


def _seq2seq_finite_d(data):
    body = [[r["d"], r["n_tokens"], r["noise"], r["n_teachers"],
             pct_pair(r["excess_measured"]), pct_pair(r["excess_bartlett"]),
             pct_pair(r["test_gap_mc_routed"])] for r in data["summary"]]
    return ("Linear seq2seq at finite d (α = {}, λ = {})".format(data["alpha"],
                                                              data["reg_lambda"]),
            ["d", "T", "Δ", "teachers", "excess seq2seq / seq2lab, trained",
             "the same, exact-Gram SE", "seq2seq test error / routed SE − 1"], body)


def _seq2seq_softmax(data):
    s = data.get("settings", {})
    body = [[r["d"], r["n_tokens"], r["n_teachers"], pct_pair(r["gap_today"]),
             pct_pair(r["gap_bartlett"])] for r in data["summary"]]
    return ("Softmax seq2seq at finite d (α = {}, λ = {}): trained / prediction − 1"
            .format(s.get("alpha", "?"), s.get("reg_lambda", "?")),
            ["d", "T", "teachers", "seq2lab SE", "exact-Gram seq2seq SE"], body)


def _spiked_points(data):
    body = []
    for p in data["points"]:
        body.append([p["n_tokens"], p["d"], p["gamma"], p["reg_lambda"], p["noise"],
                     f"{p.get('beta', 1.0):g} / {p.get('target_beta', 1.0):g}",
                     f"{p['trained_mean']:.5f} ± {p['trained_sem']:.5f}",
                     pct([p["spiked_gap"]]), pct([p["gaussian_gap"]])])
    return (f"Power-law targets (α = {data['alpha']}): prediction / trained − 1",
            ["T", "d", "γ", "λ", "Δ", "β / β0", "trained", "spiked SE", "Gaussian SE"], body)


def _spiked_learning_curve(data):
    body = []
    for p in data["points"]:
        m = p["trained_mean"]
        body.append([p["gamma"], p["d"], p["alpha"], f"{m:.5f} ± {p['trained_sem']:.5f}",
                     pct([p["spiked"] / m - 1]), pct([p["gaussian"] / m - 1])])
    meta = data.get("meta", {})
    return ("Learning curve, T = 2 softmax (Δ = {}, λ = {}): prediction / trained − 1"
            .format(meta.get("noise", "?"), meta.get("reg_lambda", "?")),
            ["γ", "d", "α", "trained", "spiked SE", "Gaussian SE"], body)


def _threshold_scan_token(data):
    rows = data["rows"]
    key = "reg_lambda" if data.get("scan", "").endswith("lambda") else "alpha"
    body = [[v, len(sel), pct(gaps(sel, "trained", "gaussian_se")),
             pct(gaps(sel, "trained", "token"))]
            for v, sel in grouped(rows, lambda r: r[key]).items()]
    name = "λ" if key == "reg_lambda" else "α"
    return (f"Linear T = 1 at d = {data.get('d', 100)}, scan in {name}: trained / prediction − 1",
            [name, "teachers", "Gaussian SE", "token leverage"], body)


def _token_leverage(data):
    body = []
    for key, block in data.items():
        if key in ("command", "date", "quick", "provenance"):
            continue
        rows = block["rows"] if isinstance(block, dict) else block
        body.append([key, len(rows), pct(gaps(rows, "trained", "gaussian_se")),
                     pct(gaps(rows, "trained", "token"))])
    return ("Linear T = 1, rank-one tokens: trained / prediction − 1",
            ["run", "teachers", "Gaussian SE", "token leverage"], body)


def _correction_edges(data):
    body = []
    for r in data["rows"]:
        kind = r["kind"]
        if kind == "d_steps":
            body.append([f"{r['attention']} T = {r['n_tokens']}", f"d = {r['d']}",
                         f"largest step {100 * r['max_relative_step']:.3f} %"])
        elif kind in ("kurtosis", "width"):
            body.append([kind, f"{r['values'][0]:g} vs {r['values'][1]:g}",
                         f"change {100 * r['relative_change']:+.4f} %"])
        elif kind == "alpha_perf":
            body.append(["noiseless linear T = 1", f"α = {r['alpha_over_alpha_perf']:g} α_perf",
                         f"{r['test_error']:.4g} ({r['correction']} {r['weight']:.2f}; core "
                         f"{r['core_test_error']:.4g})"])
        elif kind == "wishart38":
            body.append(["Wishart(0.5) teacher, d = 38",
                         f"top-mode share {r['top_mode_share']:.2f}",
                         f"trained {r['trained_mean']:.4f} ± {r['trained_sem']:.4f}: "
                         f"{100 * r['gap']:+.1f} % vs the prediction ({r['correction']}), "
                         f"{100 * r['core_gap']:+.1f} % vs the core"])
    return ("The correction table at its domain edges",
            ["case", "where", "result"], body)


def _speed_grid(data):
    rows = data["rows"]
    unit = next(r["seconds"] for r in rows if r["what"].startswith("numpy unit"))
    body = []
    for r in rows:
        if "median_s" not in r:
            continue
        body.append([f"T = {r['n_tokens']}", str(r["n_points"]),
                     f"{r['median_s']:.3g} s ({r['median_ratio']:.3g} u)",
                     f"{r['worst_s']:.3g} s ({r['worst_ratio']:.3g} u)"
                     + (" (capped)" if r["capped"] else ""),
                     f"{r['goal_median_s']:g} / {r['goal_worst_s']:g} s",
                     f"{r['median_certified']:.4g} / {r['worst_certified']:.4g}",
                     _share(r.get("worst_effect_share")),
                     f"{r['unconverged']} ({r['capped']} capped)"])
    scalar = next((r["seconds"] for r in rows if r["what"].startswith("scalar unit")), None)
    note = (f"u: the numpy unit of the same run (20 × 512² float64 matmul, {unit:.3g} s)"
            + ("" if scalar is None else
               f"; the scalar unit (4e6 exp and log1p, compiled, one thread) took "
               f"{scalar:.3g} s, which the solves' compiled loops follow more closely")
            + ". A capped point counts as the cap and as certified fraction 0. Uncertified "
            "effect: the largest first-order move of the test error that the uncertified "
            "nodes' bound leaves open, as a share of it (extras['uncertified_effect']; – "
            "where this run did not record it).")
    seeds = data.get("seeds", [0])
    where = "" if seeds == [0] else \
        f", held-out grids of seeds {', '.join(str(seed) for seed in seeds)}"
    return (f"The theory engine over a grid of configurations per T (continuum, 8192 "
            f"nodes{where})",
            ["T", "points", "median", "worst", "goal median / worst",
             "certified median / worst", "uncertified effect, worst", "not converged"],
            body, note)


def _share(value):
    """A share as a percentage, – where there is none."""
    return "–" if value is None else f"{100 * value:.3g} %"


def _warm_start_rule(data):
    rows = data["rows"]
    body, sums = [], collections.OrderedDict()
    for r in rows:
        warm, cold = r["warm"], r["cold"]
        chosen = warm if r["rule_warm"] else cold
        best = min(warm["seconds"], cold["seconds"])
        body.append([f"T = {r['n_tokens']}", r["point"], f"{r['beta']:g}",
                     f"{warm['seconds']:.2f} s ({warm['n_iter']})"
                     + ("" if warm["converged"] else " unconverged"),
                     f"{cold['seconds']:.2f} s ({cold['n_iter']})"
                     + ("" if cold["converged"] else " unconverged"),
                     "warm" if r["rule_warm"] else "cold",
                     f"{chosen['seconds'] / best:.2f}"])
        total = sums.setdefault(r["n_tokens"], [0.0, 0.0, 0.0])
        total[0] += chosen["seconds"]
        total[1] += warm["seconds"]
        total[2] += cold["seconds"]
    note = ("Seconds of one solve from the original starts (evaluations in brackets), "
            f"{rows[0]['n_nodes']} nodes, no coarse stage, at most {data['max_iter']} "
            "evaluations; the rule: warm up to β = "
            f"{data['warm_from_starts_max_beta']:g} at T = 2, at every β for T ≥ 3. "
            "Sums, rule / always warm / always cold: "
            + "; ".join(f"T = {T}: {a:.1f} / {b:.1f} / {c:.1f} s"
                        for T, (a, b, c) in sums.items()) + ".")
    return ("The warm-iteration rule from the original starts: both choices forced",
            ["T", "point", "β", "warm", "cold", "rule", "rule / faster"], body, note)


#: a traced solve is listed one by one when it took this long, stalled, or left a ghost
_TRACE_SLOW_S = 10.0
_GHOST_RATIO = 2.0


def _trace_kind(stage):
    if stage.startswith("coarse"):
        return "coarse"
    for kind in ("certified", "warm", "multi-start"):
        if kind in stage:
            return kind
    return "other"


def _solver_trace(data):
    rows = list({(r["config"]["n_tokens"], r["seed"], r["point"]): r
                 for r in data["rows"]}.values())
    kinds = ("coarse", "warm", "multi-start", "certified")
    body = []
    for T, sel in grouped(rows, lambda r: r["config"]["n_tokens"]).items():
        seconds = sorted(r["seconds"] for r in sel)
        shares = collections.Counter()
        for r in sel:
            for s in r["stages"]:
                shares[_trace_kind(s["stage"])] += s["seconds"]
        total = sum(shares.values()) or 1.0
        body.append([f"T = {T}", f"{len(sel)} points", f"median {statistics.median(seconds):.3g} s, "
                     f"worst {seconds[-1]:.3g} s",
                     ", ".join(f"{k} {100 * shares[k] / total:.0f} %" for k in kinds),
                     f"{sum(not r['converged'] for r in sel)} not converged", ""])
        for r in sel:
            ghost = r.get("q_over_coarse_end")
            if r["seconds"] < _TRACE_SLOW_S and r["converged"] and \
                    not (ghost and ghost > _GHOST_RATIO):
                continue
            c = r["config"]
            evaluations = collections.Counter()
            for s in r["stages"]:
                evaluations[_trace_kind(s["stage"])] += s["evaluations"]
            body.append([f"  seed {r['seed']} point {r['point']}",
                         f"β {c['beta']:.2f}, λ {c['reg_lambda']:.2g}, Δ {c['noise']:.2g}",
                         f"{r['seconds']:.3g} s, {r['n_iter']} evaluations",
                         " / ".join(str(evaluations[k]) for k in kinds),
                         "converged" if r["converged"] else
                         f"floor {r['stall_floor'] or r['residual']:.1e}",
                         "" if ghost is None else f"{ghost:.3g}"])
    note = ("Per T: the median and worst seconds and the share of the map's time per kind of "
            "evaluation (coarse nodes; all nodes with the warm, the multi-start and the "
            "certified prox). Below each T, the points that took 10 s or more, stalled, or "
            "whose coarse stage ended far from the reported fixed point, with their "
            "evaluations per kind and q at the reported point over q at the coarse stage's "
            "end (a ghost: a near-fixed point the coarse iteration cannot leave).")
    nodes = sorted({r["n_nodes"] for r in rows})
    return ("Where the continuum solves spend their evaluations (grid points, "
            f"{', '.join(map(str, nodes))} nodes)",
            ["T / point", "configuration", "time", "coarse / warm / multi-start / certified",
             "result", "q / q coarse"], body, note)


def _ghost_point(data):
    c = data["config"]

    def state(values):
        return ", ".join("—" if v is None else f"{v:.3g}" for v in values)

    body = []
    for r in data["rows"]:
        if r["kind"] == "trained":
            where = f"trained, d = {r['d']}, teacher {r['seed']}"
            status = f"{r['n_iter']} L-BFGS iterations"
        else:
            where = r["kind"] + (f", α × {r['alpha_fraction']:g}"
                                 if "continued" in r["kind"] else "")
            status = ("converged" if r["converged"] else f"residual {r['residual']:.1e}") \
                + f", {r['evaluations']} evaluations"
        body.append([where, state(r["state"]), status,
                     f"{r['test_error']:.4g}" if "test_error" in r else "",
                     f"{r['objective']:.4g}" if "objective" in r else ""])
    note = ("The coarse rows use 1024 nodes and the sampled prior side, as the solver's "
            "coarse stage does (tolerance 1e-3); the continuum rows all "
            f"{data['n_nodes']} nodes. Trained: m = Tr(S0 S)/d, q = Tr S²/d, the test error "
            "on fresh samples and the objective per d².")
    return (f"A ghost up close: T = {c['n_tokens']}, grid seed {data['seed']} point "
            f"{data['point']} (β {c['beta']:.3g}, λ {c['reg_lambda']:.2g}, Δ {c['noise']:.2g}, "
            f"κ0 {c['kappa']:.2g}, α {c['alpha']:.3g})",
            ["where", "m, q, Σ", "status", "test error", "objective / d²"], body, note)


def _rule_outcome(r):
    if r.get("capped"):
        return "capped"
    out = f"{r['seconds']:.3g} s ({r['n_iter']})"
    return out + ("" if r["converged"] else f", floor {r['stall_floor'] or r['residual']:.1e}")


def _rules_differ(on, off):
    return (on["n_iter"] != off["n_iter"] or on["certified_fraction"] != off["certified_fraction"]
            or abs(off["test_error"] / on["test_error"] - 1) > 1e-12
            or abs(off["train_error"] / on["train_error"] - 1) > 1e-12)


# the titles of the tables of one rule switched alone
_ALONE_TITLES = {"split_rounds": "The certificate's split search",
                 "multistart_memory": "The polish's multi-start memory"}


def _solver_rules(data):
    rows = [r for r in data["rows"] if "arm" in r]
    landed = {(r["n_tokens"], r["seed"], r["point"]): r for r in rows if r["arm"] == "landed"}
    solved = [r for r in landed.values() if not r["capped"]]
    body = []
    every_point = {"shell_starts": "T = 3–5", "split_rounds": "T ≥ 3"}
    # a run of one of these rules alone (``--rules split_rounds``) lists that rule only
    switched = {r["arm"] for r in rows} - {"landed"}
    alone = next(iter(switched)) if len(switched) == 1 and switched <= set(_ALONE_TITLES) \
        else None
    for rule in ("handover_orthogonal", "orthogonal_at_recovery", "polish_stall_window",
                 "shell_starts", "split_rounds", "multistart_memory", "warm_give_up",
                 "one_certified_polish"):
        if alone is not None and rule != alone:
            continue
        pairs = [(landed[(r["n_tokens"], r["seed"], r["point"])], r) for r in rows
                 if r["arm"] == rule]
        pairs = [(on, off) for on, off in pairs if not off["capped"]]
        if not pairs and not any(rule in (r.get("applied") or {}) for r in solved):
            continue                     # a rule this run did not know, or did not switch
        differ = [(on, off) for on, off in pairs if _rules_differ(on, off)]
        if rule in every_point:
            where = f"run at {len(pairs)} {every_point[rule]} points, {len(differ)} differ"
        else:
            where = f"applied at {len(pairs)} of {len(solved)} points"
        body.append([rule, where,
                     f"{sum(on['seconds'] for on, _ in pairs):.3g} s "
                     f"({sum(on['n_iter'] for on, _ in pairs)})",
                     f"{sum(off['seconds'] for _, off in pairs):.3g} s "
                     f"({sum(off['n_iter'] for _, off in pairs)})", "", ""])
        for on, off in (differ if rule in every_point else pairs):
            c = on["config"]
            where = f"point {on['point']}" if on["seed"] is None else \
                f"seed {on['seed']} point {on['point']}"
            body.append([f"  T = {on['n_tokens']} {where}",
                         f"β {c['beta']:.2f}, λ {c['reg_lambda']:.2g}, Δ {c['noise']:.2g}",
                         _rule_outcome(on), _rule_outcome(off),
                         f"{off['test_error'] / on['test_error'] - 1:.1e}",
                         f"{on['certified_fraction']:.4f} / {off['certified_fraction']:.4f}"])
    seeds = sorted({r["seed"] for r in rows if r["seed"] is not None})
    capped = len(landed) - len(solved)
    note = ("Each rule switched off alone, at the points where it applied (the shell starts "
            "at every T = 3–5 point and the split search at every T ≥ 3 point, listed where "
            "the result moved); elsewhere the path is "
            "the same by construction. Seconds (evaluations), summed per rule and per point, "
            "with the floor where a solve stalled; the test error with the rule off over "
            "that with it on, minus 1. "
            + (f"Grid seeds {', '.join(map(str, seeds))}, " if seeds else
               "Noiseless configurations near perfect recovery (``RECOVERY_CONFIGS``), ")
            + f"{len(landed)} points, {capped} capped with every rule on (not compared).")
    if alone is not None:
        title = _ALONE_TITLES[alone] + ", on and off, on grid points it was not fitted on"
    else:
        title = "Solver rules, on and off, on " + ("grid points they were not fitted on"
                                                   if seeds else "points near perfect recovery")
    return (title,
            ["rule / point", "configuration", "on", "off", "test error off / on − 1",
             "certified on / off"], body, note)


RENDERERS = {
    **certificate_tables.RENDERERS,
    "speed_grid.json": _speed_grid,
    "speed_grid_held_out.json": _speed_grid,
    "ghost_point.json": _ghost_point,
    "solver_trace.jsonl": _solver_trace,
    "solver_rules.jsonl": _solver_rules,
    "solver_rules_recovery.jsonl": _solver_rules,
    "solver_rules_split.jsonl": _solver_rules,
    "solver_rules_memory.jsonl": _solver_rules,
    "solver_rules_polish.jsonl": _solver_rules,
    "warm_start_rule.json": _warm_start_rule,
    "correction_edges.json": _correction_edges,
    "exact_gram_seq2lab.json": _exact_gram_seq2lab,
    "linear_exact_gram.json": _linear_exact_gram,
    "gaussian_sensing.json": _gaussian_sensing,
    "gaussian_sensing_softmax.json": _gaussian_sensing_softmax,
    "leverage_mixture.jsonl": _leverage_mixture,
    "seq2seq_finite_d.json": _seq2seq_finite_d,
    "seq2seq_softmax.json": _seq2seq_softmax,
    "spiked_tokens.json": _spiked_points,
    "spiked_noiseless.json": _spiked_points,
    "spiked_beta.json": _spiked_points,
    "spiked_gamma.json": _spiked_points,
    "spiked_learning_curve.json": _spiked_learning_curve,
    "threshold_scan_lin_token.json": _threshold_scan_token,
    "threshold_scan_lin_lambda_token.json": _threshold_scan_token,
    "token_leverage.json": _token_leverage,
}


def render(name, results=RESULTS):
    """The reST table of one result file (see :data:`RENDERERS`)."""
    if name not in RENDERERS:
        raise ValueError(f"no renderer for result file {name!r}; known: {sorted(RENDERERS)}")
    meta, data = load(name, results)
    title, header, body, *note = RENDERERS[name](data)
    return list_table(title, header, body, meta, *note)


def read_included(name, results=RESULTS):
    """The text of a reST result file, checked to name its command and date."""
    text = (pathlib.Path(results) / name).read_text(encoding="utf-8")
    if "*Produced by* ``" not in text or " *on* " not in text:
        raise ValueError(f"{name} does not end with its '*Produced by* ``command`` *on* "
                         "date' line")
    return text


# ----------------------------------------------------------------------------------------
# Sphinx
# ----------------------------------------------------------------------------------------

def setup(app):
    from docutils.parsers.rst import Directive
    from docutils.statemachine import StringList
    from sphinx.util.nodes import nested_parse_with_titles

    class ResultsTable(Directive):
        """``.. results-table:: NAME``: the table of ``benchmarks/results/NAME``."""

        required_arguments = 1
        has_content = False

        def run(self):
            from docutils import nodes

            name = self.arguments[0]
            env = self.state.document.settings.env
            env.note_dependency(str(RESULTS / name))
            try:
                text = render(name)
            except (OSError, ValueError, KeyError) as exc:
                raise self.error(f"results-table {name}: {exc}") from None
            node = nodes.container()
            nested_parse_with_titles(self.state, StringList(text.splitlines(), name), node)
            return node.children

    class ResultsInclude(Directive):
        """``.. results-include:: NAME.rst``: a table written as reST by a run (the
        validation grid's ``--table``); it must end with its *Produced by* line."""

        required_arguments = 1
        has_content = False

        def run(self):
            from docutils import nodes

            name = self.arguments[0]
            path = RESULTS / name
            env = self.state.document.settings.env
            env.note_dependency(str(path))
            try:
                text = read_included(name)
            except (OSError, ValueError) as exc:
                raise self.error(f"results-include {name}: {exc}") from None
            node = nodes.container()
            nested_parse_with_titles(self.state, StringList(text.splitlines(), name), node)
            return node.children

    app.add_directive("results-table", ResultsTable)
    app.add_directive("results-include", ResultsInclude)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
