"""Softmax T = 2 at finite d: token data against Gaussian (GOE) pre-activations, same teacher.

The companion of ``gaussian_sensing.py`` for softmax attention. With Gaussian tokens the
pre-activations are ``h_aa = ⟨S, (x_a x_aᵀ − I)/√d⟩`` and ``h_12 = ⟨S, x_1 x_2ᵀ⟩/√d``; the
state evolution treats them as jointly Gaussian with the same covariance, which a design of
independent GOE matrices has exactly: ``h_aa = ⟨S, G_a⟩``, ``h_12 = ⟨S, G_3⟩/√2``. This
script trains the same ERM (factored, full width, ``S = W Wᵀ/d``, L-BFGS) on both designs for
the same teacher and compares each with the default same-instance prediction.

The test error of a learned Ŝ on the Gaussian design is exact from its overlaps
(``m = Tr(Ŝ S0)/d``, ``q = ‖Ŝ‖²_F/d``: :func:`skattn.theory.channels.test_error`); on token
data it is measured on fresh samples, and the overlap formula is reported beside it.

Usage::

    python benchmarks/research/gaussian_sensing_softmax.py --d 100 --seeds 6
    # writes benchmarks/results/gaussian_sensing_softmax.json
"""

from __future__ import annotations

import argparse
import json
import warnings

import numpy as np
import torch

from _common import add_common_arguments, write_result
from skattn.theory import solve_state_evolution
from skattn.theory.channels import GaussianNodes, test_error
from skattn.validation import FSSConfig, make_teacher, simulation_row

#: the validation grid's "sm T2 Δ=0.1 λ=1e-3 α=0.15 (< α_interp)"
CONFIG = dict(alpha=0.15, reg_lambda=1e-3, noise=0.1)


def gaussian_design(n, d, rng):
    """Three independent GOE families, flattened: ``(n, 3, d²)``."""
    g = rng.standard_normal((n, 3, d, d))
    return ((g + g.transpose(0, 1, 3, 2)) / np.sqrt(2 * d)).reshape(n, 3, d * d)


def preactivations(G, S):
    """``(n, 2, 2)`` symmetric pre-activations of ``S`` on the Gaussian design ``G``."""
    u = G @ S.reshape(-1)
    h11, h22, h12 = u[:, 0], u[:, 1], u[:, 2] / np.sqrt(2.0)
    return torch.stack([torch.stack([h11, h12], -1), torch.stack([h12, h22], -1)], -2)


def fit_gaussian_design(G, y, d, reg_lambda, seed, max_iter=20000):
    """Factored ERM ``Σ_μ ‖softmax(h(S)) − y_μ‖²_F + λ‖W‖²_F`` on the Gaussian design."""
    Gt, yt = torch.as_tensor(G), torch.as_tensor(y)
    W = torch.nn.Parameter(torch.as_tensor(
        np.random.default_rng(seed).standard_normal((d, d)) / np.sqrt(d)))
    opt = torch.optim.LBFGS([W], lr=1, max_iter=max_iter, tolerance_grad=1e-10,
                            tolerance_change=1e-14, history_size=50,
                            line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        A = torch.softmax(preactivations(Gt, W @ W.T / d), dim=-1)
        f = ((A - yt) ** 2).sum() + reg_lambda * (W ** 2).sum()
        f.backward()
        return f

    opt.step(closure)
    return (W @ W.T / d).detach().numpy(), float(closure().detach())


def one_seed(d, seed, nodes, n_test=20000, max_iter=20000):
    cfg = FSSConfig(label="gaussian sensing", **CONFIG)
    teacher = make_teacher(cfg, d, seed)
    S0, n = teacher.S0_, int(round(CONFIG["alpha"] * d * d))
    Q0 = float(np.mean(np.linalg.eigvalsh(S0) ** 2))
    channel = solve_state_evolution(CONFIG["alpha"], target=teacher,
                                    reg_lambda=CONFIG["reg_lambda"]).problem.channel()

    def overlap_error(S):
        m, q = float(np.sum(S * S0) / d), float(np.sum(S * S) / d)
        return float(test_error(channel, m=m, q=q, Q0=Q0, noise=CONFIG["noise"], nodes=nodes))

    rng = np.random.default_rng([seed, 7])
    G = gaussian_design(n, d, rng)
    g = rng.standard_normal((n, 3))
    noise = np.empty((n, 2, 2))                       # Var ξ_aa = Δ, Var ξ_12 = Δ/2
    noise[:, 0, 0], noise[:, 1, 1] = g[:, 0] * np.sqrt(CONFIG["noise"]), g[:, 1] * np.sqrt(
        CONFIG["noise"])
    noise[:, 0, 1] = noise[:, 1, 0] = g[:, 2] * np.sqrt(CONFIG["noise"] / 2)
    h0 = preactivations(torch.as_tensor(G), torch.as_tensor(S0)).numpy() + noise
    y = torch.softmax(torch.as_tensor(h0), dim=-1).numpy()
    S_gauss, objective = fit_gaussian_design(G, y, d, CONFIG["reg_lambda"], seed, max_iter)
    del G
    row = simulation_row(cfg, d, seed, n_test=n_test, same_instance_se=True)
    return {"seed": seed, "d": d, "gaussian_design": overlap_error(S_gauss),
            "gaussian_design_objective_per_d2": objective / d ** 2,
            "tokens": row["test_error"], "tokens_objective_per_d2": row["train_objective"],
            "prediction": row["se_same_instance_test_error"],
            "prediction_objective": row["se_same_instance_train_objective"]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--first-seed", type=int, default=0)
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    n_test, max_iter, n_points = 20000, 20000, 2 ** 16
    if args.quick:
        args.d, args.seeds, n_test, max_iter, n_points = 8, 2, 500, 200, 2 ** 12
    nodes = GaussianNodes(6, n_points=n_points, seed=0)
    rows = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        rows.append(one_seed(args.d, seed, nodes, n_test, max_iter))
        print(json.dumps(rows[-1]), flush=True)
    for key in ("gaussian_design", "tokens"):
        g = np.array([r[key] / r["prediction"] - 1 for r in rows])
        sem = g.std(ddof=1) / np.sqrt(g.size) if g.size > 1 else np.nan
        print(f"softmax T=2 d={args.d}: {key:16s} {100 * g.mean():+.2f} ± {100 * sem:.2f} %")
    write_result(args, "gaussian_sensing_softmax.json", {**CONFIG, "rows": rows},
                 script=__file__, argv=argv)


if __name__ == "__main__":
    main()
