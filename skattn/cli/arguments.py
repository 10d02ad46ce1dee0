"""Argument types, shared option groups, error and output helpers of the command line."""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from pathlib import Path

import numpy as np

from ..experiments import parameter_grid
from ..reporting import FORMATS, to_jsonable
from ..theory import CORRECTION_NAMES

PROG = "skattn"
EXIT_USAGE = 2
EXIT_ERROR = 1

#: The most points one option's range (START:STOP:NUM) or one run's grid may have: a
#: state-evolution point takes 0.1-10 s, so 1e5 points is already days of work.
MAX_GRID_POINTS = 100_000


class CLIError(Exception):
    """A user mistake, reported as one line on stderr."""


class Parser(argparse.ArgumentParser):
    """ArgumentParser whose errors are one line (no usage block) and exit with status 2.

    Abbreviated long options are refused (``allow_abbrev=False``): argparse would otherwise
    read ``--d 80`` as ``--device 80`` (the only option starting with ``--d``) without a
    word, and a new option could silently change what an old abbreviation means.
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        # remembered so that error() can name the full options an abbreviation matches
        self._argv = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def _abbreviation_hint(self, message):
        """' (did you mean ...)' for unrecognized tokens that abbreviate a known option."""
        if not message.startswith("unrecognized arguments:"):
            return ""
        parsers, argv = [self], getattr(self, "_argv", [])
        for action in self._actions:  # and the subcommand's options, when one was given
            if isinstance(action, argparse._SubParsersAction):
                chosen = [action.choices[a] for a in argv if a in action.choices]
                parsers += chosen[:1]
        options = sorted({o for p in parsers for a in p._actions for o in a.option_strings
                          if o.startswith("--")})
        hints = []
        for token in message.split(":", 1)[1].split():
            name = token.split("=", 1)[0]
            if name.startswith("--") and len(name) > 2:
                full = [o for o in options if o.startswith(name)]
                if full:
                    hints.append(f"{name} is not an option (abbreviations are not accepted; "
                                 f"did you mean {' or '.join(full)}?)")
        return ("; " + "; ".join(hints)) if hints else ""

    def error(self, message):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}"
                              f"{self._abbreviation_hint(message)} "
                              f"(see '{self.prog} --help')\n")


# ----------------------------------------------------------------------------------------
# Value parsing: comma lists and ranges
# ----------------------------------------------------------------------------------------

def split(text):
    items = [t.strip() for t in str(text).split(",")]
    if not items or any(t == "" for t in items):
        raise argparse.ArgumentTypeError(f"empty item in list {text!r}")
    return items


def range(item, conv):
    parts = item.split(":")
    if len(parts) not in (3, 4) or (len(parts) == 4 and parts[3] not in ("log", "lin")):
        raise argparse.ArgumentTypeError(
            f"bad range {item!r}: expected START:STOP:NUM or START:STOP:NUM:log")
    try:
        start, stop, num = float(parts[0]), float(parts[1]), int(parts[2])
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad range {item!r}: START and STOP must be "
                                         f"numbers and NUM an integer") from None
    if num < 1:
        raise argparse.ArgumentTypeError(f"bad range {item!r}: NUM must be >= 1")
    if num > MAX_GRID_POINTS:
        raise argparse.ArgumentTypeError(f"bad range {item!r}: NUM must be <= "
                                         f"{MAX_GRID_POINTS}")
    if len(parts) == 4 and parts[3] == "log":
        if start <= 0 or stop <= 0:
            raise argparse.ArgumentTypeError(f"bad range {item!r}: a log range needs "
                                             f"START, STOP > 0")
        vals = np.geomspace(start, stop, num)
    else:
        vals = np.linspace(start, stop, num)
    return [conv(float(f"{v:.12g}")) for v in vals]


def float_list(text):
    out = []
    for item in split(text):
        if ":" in item:
            out.extend(range(item, float))
            continue
        try:
            v = float(item)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{item!r} is not a number") from None
        if not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"{item!r} is not a finite number")
        out.append(v)
    return out


def int_list(text):
    out = []
    for item in split(text):
        try:
            out.append(int(item))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{item!r} is not an integer") from None
    return out


def opt_int_list(text):
    """Integers, or ``inf``/``none`` for the d → ∞ continuum (None)."""
    out = []
    for item in split(text):
        if item.lower() in ("inf", "none", "continuum"):
            out.append(None)
            continue
        try:
            out.append(int(item))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{item!r} is not an integer (or 'inf' for the continuum)") from None
    return out


def choice_list(choices):
    def parse(text):
        items = split(text)
        for item in items:
            if item not in choices:
                raise argparse.ArgumentTypeError(
                    f"invalid choice {item!r} (choose from {', '.join(choices)})")
        return items
    parse.__name__ = "choice list"
    parse.choices = tuple(choices)  # listed in the help by add_model_params
    return parse


def positive_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {v}")
    return v


def replicate_count(text):
    """A number of solves of one point (``--spread``): at least 2."""
    v = positive_int(text)
    if v < 2:
        raise argparse.ArgumentTypeError(f"must be >= 2 (the point and at least one other "
                                         f"scrambling), got {v}")
    return v


def positive_float(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return v


def dimension(text):
    v = positive_int(text)
    if v < 2:
        raise argparse.ArgumentTypeError(f"must be >= 2, got {v}")
    return v


def nonzero_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v == 0:
        raise argparse.ArgumentTypeError("must be a non-zero integer (-1: all CPUs)")
    return v


# ----------------------------------------------------------------------------------------
# Shared parameters
# ----------------------------------------------------------------------------------------

# (name, parser, default, help). Every one of these may be a list (cartesian sweep).
MODEL_PARAMS = [
    ("n_tokens", int_list, "2", "sequence length T (>= 2 for softmax, >= 1 for linear)"),
    ("reg_lambda", float_list, "0.01",
     "weight decay λ >= 0 in Σ_μ ℓ_μ + λ‖W‖²_F (λ‖V‖²_F for the direct model)"),
    ("target", choice_list(("wishart", "powerlaw")), "wishart",
     "target family: wishart (rank ratio --kappa0) or powerlaw (exponent --gamma; needs a "
     "finite dimension d)"),
    ("kappa0", float_list, "0.5", "rank ratio κ0 = p0/d of a Wishart target"),
    ("gamma", float_list, "1.0", "decay exponent γ of a power-law target"),
    ("width_ratio", float_list, "1.0", "width ratio κ = p/d of the factored student"),
    ("beta", float_list, "1.0", "inverse temperature β of the student's softmax"),
    ("target_beta", float_list, "1.0", "inverse temperature β0 of the teacher's softmax"),
    ("noise", float_list, "0.0", "label noise Δ >= 0 inside the teacher's softmax"),
    ("attention", choice_list(("softmax", "linear")), "softmax", "attention function"),
    ("task", choice_list(("seq2lab", "seq2seq")), "seq2lab",
     "seq2lab: y is the T×T attention matrix; seq2seq: y = attention × x"),
]
PARAM_NAMES = ["alpha", "n_features"] + [p[0] for p in MODEL_PARAMS] + ["parametrization"]


def desc(text):
    """Wrap a description paragraph for the raw help formatters."""
    import textwrap
    return textwrap.fill(" ".join(text.split()), width=88)


def option_flag(name):
    return "--" + name.replace("_", "-")


def add_model_params(p, *, alpha_required, n_features_default, n_features_help,
                      parametrization=True, n_features=True):
    g = p.add_argument_group("parameters (each may be a comma list or START:STOP:NUM[:log]; "
                             "the cartesian product is run)")
    g.add_argument("--alpha", type=float_list, required=alpha_required,
                   default=None if alpha_required else [0.3],
                   help="sample ratio α = n/d² > 0" + ("" if alpha_required else
                                                        " (default: 0.3)"))
    if n_features:  # the token dimension d (the theory's n_features), not a column count
        g.add_argument("--n-features", dest="n_features", type=opt_int_list,
                       default=n_features_default, help=n_features_help)
    for name, conv, default, help_ in MODEL_PARAMS:
        choices = getattr(conv, "choices", None)
        metavar = "{" + ",".join(choices) + "}" if choices else name.upper()
        listed = f"; one or more of {', '.join(choices)}" if choices else ""
        g.add_argument(option_flag(name), dest=name, type=conv, default=conv(default),
                       metavar=metavar, help=f"{help_} (default: {default}{listed})")
    if parametrization:
        g.add_argument("--parametrization", type=choice_list(("factored", "direct")),
                       default=["factored"],
                       help="factored S = WWᵀ/√(pd) or direct S = V/√d (default: factored)")
    return g


def add_output_options(p, formats=FORMATS):
    g = p.add_argument_group("output")
    g.add_argument("--format", choices=formats, default="table",
                   help="output format (default: table)")
    g.add_argument("--output", "-o", default=None, metavar="FILE",
                   help="write to FILE instead of stdout")
    g.add_argument("--columns", type=split, default=None, metavar="COLS",
                   help="comma list of columns to output (default: all for csv/json, the "
                        "varying parameters and main results for table)")
    return g


def theory_param_names():
    return ["n_features"] + [p[0] for p in MODEL_PARAMS] + ["parametrization"]


def param_grid(args, names):
    sizes = [len(getattr(args, n)) for n in names]
    for extra in ("alpha", "reg_lambda"):  # combined with the grid by the commands
        if extra not in names and isinstance(getattr(args, extra, None), list):
            sizes.append(len(getattr(args, extra)))
    if math.prod(sizes) > MAX_GRID_POINTS:
        raise CLIError(f"the parameter grid has {math.prod(sizes)} points (the product of "
                       f"the list lengths), above {MAX_GRID_POINTS}; give shorter lists")
    return parameter_grid({n: getattr(args, n) for n in names})


def check_output_file(path, option, *, create=False):
    """Fail before the work when ``path`` cannot be written (a missing or read-only folder).

    With ``create=True`` (``--output``, whose folders :func:`write` creates) the nearest
    existing folder above ``path`` must be writable instead.
    """
    if path is None:
        return
    folder = Path(path).parent
    if create:
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
    if not folder.is_dir():
        raise CLIError(f"{option}: the folder {str(folder)!r} of {str(path)!r} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise CLIError(f"{option}: the folder {str(folder)!r} of {str(path)!r} is not "
                       "writable")


# Python parameter names that a library message may mention anywhere (not only first):
# the CLI shows their flags instead (only names that cannot be ordinary words)
_SPELLED_NAMES = ("n_features", "n_tokens", "reg_lambda", "width_ratio", "target_beta")


def user_error(exc, aliases=None):
    """A library ValueError/TypeError as a one-line CLIError naming the option if we can.

    Python parameter names in the message become the command's flags (``n_features`` →
    ``--n-features``, or the flag of ``aliases``, e.g. ``{"n_features": "d"}``).
    """
    aliases = {"rank_ratio": "kappa0", "n_samples": "alpha", "width": "width_ratio",
               **(aliases or {})}
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    prefix = ""
    for name in sorted(PARAM_NAMES + ["n_samples", "rank_ratio", "width", "n_nodes"],
                       key=len, reverse=True):
        if msg.startswith((name + " ", name + "=")) or msg.startswith(f"The '{name}' "
                                                                       "parameter"):
            prefix = f"{option_flag(aliases.get(name, name))}: "
            break
    for name in _SPELLED_NAMES:
        msg = re.sub(rf"(?<![\w'-]){name}\b", option_flag(aliases.get(name, name)), msg)
    return CLIError(prefix + msg)


# ----------------------------------------------------------------------------------------
# Output
# ----------------------------------------------------------------------------------------

def check_columns(args, all_columns):
    if args.columns:
        unknown = [c for c in args.columns if c not in all_columns]
        if unknown:
            raise CLIError(f"--columns: unknown column(s) {', '.join(unknown)}; available: "
                           f"{', '.join(all_columns)}")


def choose_columns(rows, all_columns, args, main_results, sweep_names):
    if args.columns:
        check_columns(args, all_columns)
        return list(args.columns)
    if args.format != "table":
        return all_columns
    varying = [n for n in sweep_names
               if len({json.dumps(to_jsonable(r.get(n))) for r in rows}) > 1]
    return varying + [c for c in main_results if c not in varying]


def write(text, output):
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    path = Path(output)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"wrote {path}", file=sys.stderr)


def add_solver_options(p):
    g = p.add_argument_group("state-evolution solver")
    g.add_argument("--n-nodes", type=positive_int, default=8192,
                   help="quasi-Monte Carlo nodes for the Gaussian expectations")
    g.add_argument("--tol", type=positive_float, default=None,
                   help="tolerance on the fixed-point residual (default: the solver's, "
                        "1e-7)")
    g.add_argument("--max-iter", type=positive_int, default=None,
                   help="maximum evaluations of the fixed-point map per point (default: "
                        "the solver's)")
    g.add_argument("--correction", choices=CORRECTION_NAMES, default="auto",
                   help="finite-size correction at finite --n-features: 'auto' applies the "
                        "correction table, 'none' the Gaussian core, a name forces that "
                        "correction (choices: %(choices)s; default: %(default)s)")
