"""The validation report's tables of the T ≥ 3 certificate and its solver settings: one
solve per setting at each point (:func:`_arm_comparison`), the uncertified nodes' effect,
the relaxations and the wide search at the nodes left uncertified. Part of the
``validation_report`` extension (its :data:`RENDERERS` take these); each renderer returns
``(title, header, body, note)``."""

from __future__ import annotations


#: states of one point in two settings of a solver rule count as the same within this
_STATE_AGREEMENT = 1e-6


def _arm_comparison(data, key, label):
    """Rows of solves of the same grid points with one setting varied (``arms``, each
    with ``key``): one column per setting, its certified fraction (seconds), and a note
    on the states and the held-out points' totals. ``label(value)`` names a setting."""
    rows = data["rows"]
    values = []
    for r in rows:
        for a in r["arms"]:
            if a[key] not in values:
                values.append(a[key])
    body, totals = [], {i: [0.0, 1.0, 0, 0] for i in range(len(values))}
    for r in rows:
        arms = {values.index(a[key]): a for a in r["arms"]}
        cells = []
        for i in range(len(values)):
            arm = arms.get(i)
            cells.append("–" if arm is None else
                         f"{arm['certified_fraction']:.4f} ({arm['seconds']:.1f} s"
                         + (f", {arm['n_iter']} ev." if "n_iter" in arm else "") + ")"
                         + ("" if arm["converged"] else " unconverged"))
            if arm is not None and r["role"] != "fitted":
                totals[i][0] += arm["seconds"]
                totals[i][1] = min(totals[i][1], arm["certified_fraction"])
                totals[i][2] += 1
                totals[i][3] += arm.get("n_iter", 0)
        body.append([f"T = {r['n_tokens']}, seed {r['seed']} point {r['point']}", r["role"],
                     *cells])
    def spread(r):      # the largest relative difference of a state between settings
        return max((max(v) - min(v)) / max(max(abs(x) for x in v), 1e-300)
                   for v in zip(*(a["state"] for a in r["arms"])))
    moved = [f"T = {r['n_tokens']} seed {r['seed']} point {r['point']} ({spread(r):.1e}"
             + ("" if all(a["converged"] for a in r["arms"]) else ", unconverged") + ")"
             for r in rows if spread(r) > _STATE_AGREEMENT]
    note = (f"The states (m, q, Σ) differ by more than {_STATE_AGREEMENT:g} (relative) "
            "between settings at " + ", ".join(moved) + "; elsewhere they agree to it. "
            if moved else f"Each point's states (m, q, Σ) agree to {_STATE_AGREEMENT:g} "
            "(relative) in every setting. ")
    note += ("Held-out points, summed seconds"
             + (" and evaluations" if any("n_iter" in a for r in rows for a in r["arms"])
                else "")
             + ", least certified fraction: "
             + "; ".join(f"{label(values[i])}: {sec:.1f} s"
                         + (f", {ev} evaluations" if ev else "") + f", {low:.4f}"
                         for i, (sec, low, n, ev) in totals.items() if n) + ".")
    return [label(v) for v in values], body, note


def _split_share(data):
    columns, body, note = _arm_comparison(data, "share", lambda v: f"share {v:g}")
    note = ("Certified fraction of one solve (its seconds), 8192 nodes unless the run was "
            "quick; the least share of a pair's weight in the certificate's unequal "
            f"splits, as a fraction of 1/(2Σ), landed at {data['landed_share']:g}. " + note)
    return ("The certificate's unequal splits: the least share, on points it was not fitted "
            "on", ["point", "role", *columns], body, note)


def _uncertified_effect(data):
    rows = data["rows"]
    settings = [(a["effect_nodes"], a["step"]) for a in rows[0]["arms"]] if rows else []
    body = []
    for r in rows:
        cells = [f"T = {r['n_tokens']} seed {r['seed']} point {r['point']}", r["role"],
                 f"{r['arms'][0]['certified_fraction']:.4g}"]
        for a in r["arms"]:
            share = a["share"]
            cells.append(("–" if share is None or share != share else f"{100 * share:.3g} %")
                         + ("" if a["converged"] else " (unconverged)"))
        body.append(cells)
    landed = data["landed"]
    note = ("The largest first-order move of the test error that the uncertified nodes' "
            "bound leaves open, as a share of it (extras['uncertified_effect']; – where not "
            "estimated), one solve per setting of the output side's Jacobian: its nodes (a "
            "prefix of the quadrature's) and its relative step; landed "
            f"{landed['effect_nodes']} nodes, step {landed['step']:g}. The certified "
            "fraction is the first solve's.")
    return ("The uncertified nodes' effect on the test error, by the Jacobian's settings",
            ["point", "role", "certified", *[f"{n} nodes, step {h:g}" for n, h in settings]],
            body, note)


def _certificate_arms(data, key, label, what, title):
    """A table of one certificate setting's arms (:func:`_arm_comparison`) at the points
    of its study: ``what`` says which setting, ``title`` names the table."""
    columns, body, note = _arm_comparison(data, key, label)
    note = ("Certified fraction of one solve (its seconds and evaluations), 8192 nodes "
            f"unless the run was quick; {what}, everything else as landed. " + note)
    return title, ["point", "role", *columns], body, note


def _star_bound(data):
    return _certificate_arms(
        data, "star", lambda v: "star on" if v else "star off",
        "the star bound (SoftmaxChannel.star_bound) on and off",
        "The certificate's star bound, on and off, on points it was not fitted on")


def _double_star(data):
    return _certificate_arms(
        data, "double", lambda v: "double star on" if v else "double star off",
        "where every star fails, the double star (SoftmaxChannel.double_star, on by "
        "default) on or off",
        "The certificate's double star, on and off, on points it was not fitted on")


def _star_splits(data):
    return _certificate_arms(
        data, "rounds", lambda v: "equal split only" if v == 0 else f"{v} splits",
        "where two or three rows fail, the star bound under the equal split only, or also "
        "under a split where every other row holds (SoftmaxChannel.star_split_rounds)",
        "The star bound under unequal splits, on and off, on points it was not fitted on")


def _star_local(data):
    return _certificate_arms(
        data, "rounds",
        lambda v: "no local pieces" if v == 0 else f"local pieces, {v} round" + "s" * (v > 1),
        "where the star of one failing row still shows a lower point, the star with local "
        "pieces (SoftmaxChannel.star_local_rounds) or without",
        "Local pieces of the star, on and off, on points they were not fitted on")


def _first_warm_starts(data):
    columns, body, note = _arm_comparison(
        data, "starts", lambda v: "multi-start" if v is None else f"{v} start" + "s" * (v > 1))
    landed = data["landed_starts"]
    note = ("Certified fraction of one solve (its seconds and evaluations), 8192 nodes "
            "unless the run was quick; Newton starts of the first warm (uncertified) "
            "evaluation on a node set at T ≥ 3, where no node has a remembered minimiser: "
            "the full multi-start (5) or fewer, from ω; landed at "
            + ("the multi-start" if landed is None else str(landed)) + ". " + note)
    return ("The first warm evaluation: its Newton starts, on points it was not fitted on",
            ["point", "role", *columns], body, note)


def _star_share(k, T):
    """The share of the T(T + 1)/2 entries that the star keeps exact with k rows."""
    return f"{(k * T - k * (k - 1) // 2) / (T * (T + 1) // 2):.0%}"


def _row_relaxations(data):
    tol, kinds = data["tol"], ("rows", "pair", "star", "envelope")
    body = []
    for r in data["rows"]:
        nodes, T = r["nodes"], r["n_tokens"]
        where = f"T = {T} seed {r['seed']} point {r['point']}" + (
            " (from its reported state)" if r.get("init") else "")
        if not nodes:
            body.append([where, f"{r['certified_fraction']:.4f}", f"{r['uncertified']} / 0",
                         f"{r['sigma']:.3g}", "", "", "", "", "", ""])
            continue
        closed = [sum(g[k] > -tol for g in nodes) for k in kinds]
        # the star's exact share with one row with a gap, and at the node with the most
        most = max(g["failing_rows"] for g in nodes)
        body.append([where, f"{r['certified_fraction']:.4f}",
                     f"{r['uncertified']} / {len(nodes)}",
                     f"{r['sigma']:.3g}",
                     f"{sum(g['failing_rows'] > 1 for g in nodes)}",
                     *(f"{c} ({c / len(nodes):.0%})" for c in closed),
                     _star_share(1, T) + (f" ({_star_share(most, T)})" if most > 1
                                          else "")])
    note = ("certified: the solve's fraction. The nodes: one certified prox evaluation at "
            "the solve's fixed point on fresh nodes (8192 unless the run was quick); those it "
            "leaves uncertified, evenly sampled. A relaxation closes a node "
            f"where its least value, found by multi-start L-BFGS (an estimate, not a proof), "
            f"is above the found value less {tol:g}. rows: every pair relaxed by the found "
            "point's multipliers (the certificate's equal split); pair: the row with the "
            "largest gap and one other kept exact in their shared entry (the best one); "
            "star: every entry of the rows with a gap kept exact, the others relaxed; its "
            "exact share: the entries it keeps of T(T + 1)/2 with one such row (in brackets "
            "at the node with the most; at 100 % the star is the problem itself); envelope: "
            "the star of the row with the largest gap alone, each other row's response to "
            "its shared entry replaced by its convex envelope (the relaxation that certified "
            "shifted row bounds can prove).")
    return ("Which relaxation would certify the nodes that the row-wise dual bound leaves",
            ["point", "certified", "uncertified / studied", "Σ", "> 1 row with a gap",
             "closed: rows", "pair", "star", "envelope", "star's exact share"], body, note)


def _uncertified_minimisers(data):
    body = []
    for r in data["rows"]:
        gap = r["smallest_gap"]
        body.append([f"T = {r['n_tokens']} seed {r['seed']} point {r['point']}",
                     f"{r['certified_fraction']:.4f}", f"{r['sigma']:.3g}",
                     f"{r['uncertified']} / {r['searched']}", str(r["beaten"]),
                     f"{r['largest_drop']:.1e}",
                     f"{r['next_minimum_found']}",
                     "–" if gap is None else f"{gap:.1e} / {r['median_gap']:.1e}",
                     f"{r['last_shell_uncertified']} / {r['last_shell_lowered']} / "
                     f"{r['last_shell_beaten']}"])
    note = ("certified: the solve's fraction. The nodes: one certified prox evaluation at "
            "the solve's fixed point on fresh nodes (8192 unless the run was quick); those it "
            "leaves uncertified, evenly sampled, each searched by BFGS from "
            f"{data['rows'][0]['starts'] if data['rows'] else 0} starts around the found "
            "minimiser and around ω. beaten: nodes where a start ended lower than the found "
            f"minimiser by more than {data['tol']:g} (the largest drop beside it); with a "
            "next minimum: nodes where a start ended in another local minimum above the found "
            "one, whose gap in the objective is given (smallest / median). These columns "
            "are of the evaluation without the last shell of starts; the last: the same "
            "evaluation with it (the default), the nodes it leaves uncertified, the "
            "minimisers it lowered, and the searched nodes it leaves uncertified at a value "
            "the search beat.")
    return ("Are the uncertified minimisers global? A wide search at each",
            ["point", "certified", "Σ", "uncertified / searched", "beaten", "largest drop",
             "with a next minimum", "gap to it",
             "last shell: uncertified / lowered / beaten"], body, note)


#: the result files whose tables this module renders
RENDERERS = {
    "split_share.json": _split_share,
    "uncertified_effect.json": _uncertified_effect,
    "row_relaxations.json": _row_relaxations,
    "star_bound.json": _star_bound,
    "star_splits.json": _star_splits,
    "star_local.json": _star_local,
    "double_star.json": _double_star,
    "first_warm_starts.json": _first_warm_starts,
    "uncertified_minimisers.json": _uncertified_minimisers,
}
