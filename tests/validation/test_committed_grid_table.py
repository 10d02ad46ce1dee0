"""The committed validation-grid table (benchmarks/results/validate_table.rst, rendered in
the validation report) is a whole run of the current grid, and each "undecided" verdict in
it holds to the rule that produced it (skattn.validation.fits.undecided_reason)."""

from __future__ import annotations

import pathlib
import re

from skattn.validation import VALIDATION_CONFIGS
from skattn.validation.fits import DECIDING_WIDTH, MIN_DECIDING_D, MIN_DECIDING_SEEDS

TABLE = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "validate_table.rst"


def _verdicts():
    text = TABLE.read_text(encoding="utf-8")
    test, objective = text.split("Training objective")
    out = {}
    for name, part in (("test", test), ("objective", objective)):
        rows = re.split(r"\n   \* - ", part)[2:]  # [0]: the preamble, [1]: the header
        for row in rows:
            cells = [c.strip() for c in re.split(r"\n     - ", row)]
            out[name, cells[0]] = " ".join(cells[-1].split("*Produced by*")[0].split())
    return out, text


def test_the_table_is_one_run_of_every_configuration_with_its_command_and_date():
    verdicts, text = _verdicts()
    labels = {c.label for c in VALIDATION_CONFIGS}
    for name in ("test", "objective"):
        rows = {label for kind, label in verdicts if kind == name}
        assert {r.split(" ⚠")[0] for r in rows} == labels
    assert re.search(r"\*Produced by\* ``python -m skattn\.validation [^`]*`` \*on\* 20\d\d-", text)


def test_every_undecided_verdict_states_a_reason_the_rule_accepts():
    verdicts, _ = _verdicts()
    undecided = {k: v for k, v in verdicts.items() if v.startswith("undecided")}
    for key, verdict in undecided.items():
        wide = re.match(r"undecided: the extrapolation's interval \[([-+\d.]+)%, ([-+\d.]+)%\] "
                        r"is wider than the finite-size effect it should decide "
                        r"\(([-+\d.]+)% at the largest d\) \(fits: consistent", verdict)
        if wide:
            lo, hi, excess = (float(g) / 100 for g in wide.groups())
            # the interval is wider than both the finite-size excess and the deciding width
            # (0.1 % slack: the verdict prints one decimal)
            assert (hi - lo) / 2 > max(abs(excess), DECIDING_WIDTH) - 1e-3, (key, verdict)
            continue
        few = re.match(r"undecided: (\d+) (seeds at some d|values of d)", verdict)
        assert few, (key, verdict)
        bound = MIN_DECIDING_SEEDS if few.group(2).startswith("seeds") else MIN_DECIDING_D
        assert int(few.group(1)) < bound, (key, verdict)


def _number(cell):
    return float(cell.split()[0])


def test_no_consistent_verdict_rests_on_an_interval_the_rule_calls_undecided():
    # a table written before the undecided rule fails here: its "consistent" rows include
    # extrapolations whose interval is wider than the effect they should decide
    text = TABLE.read_text(encoding="utf-8")
    test, objective = text.split("Training objective")
    checked = 0
    for part in (test, objective):
        for row in re.split(r"\n   \* - ", part)[2:]:
            cells = [c.strip() for c in re.split(r"\n     - ", row)]
            verdict = cells[-1]
            if not verdict.startswith("consistent") or "continuum SE" not in verdict \
                    or " only " in verdict:
                continue
            ref, sim = _number(cells[1]), _number(cells[-4])
            lo, hi = map(float, re.search(r"\[([-\d.e]+), ([-\d.e]+)\]", cells[-3]).groups())
            slack = 1e-4 / ref + 5e-3  # the table prints four decimals
            half = (hi - lo) / 2 / ref
            assert half <= max(abs(sim / ref - 1), DECIDING_WIDTH) + slack, (cells[0], verdict)
            checked += 1
    assert checked >= 20
