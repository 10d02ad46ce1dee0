"""The spiked state evolution beyond its first validation: trained models against both
predictions.

The route of :func:`skattn.theory.solve_state_evolution` to the spiked state evolution
(:class:`skattn.theory.corrections.spiked.SpikedCorrection`) covers what was measured here and in
``spiked_learning_curve.py`` (T = 2, λ = 0.05, Δ = 0.2):

- ``tokens``: T = 3 and 4 at d = 60 and 100, power law γ = 1.25, α = 0.3, λ = 0.05,
  Δ = 0.2, three teachers a point;
- ``noiseless``: T = 2 without label noise, the validation grid's *sm T2 power-law γ = 1.5*
  (α = 0.3, λ = 0.1) at d = 100, 160 and 250, four teachers a point;
- ``beta``: T = 2 with a student temperature other than the teacher's (β = 2, β0 = 1 and
  β = 1, β0 = 2), γ = 1.25, α = 0.3, λ = 0.05, Δ = 0.2, d = 100, three teachers;
- ``gamma``: T = 2 on milder power laws (γ = 0.75 and 1), α = 0.3, λ = 0.05, Δ = 0.2,
  d = 60 and 100, three teachers.

For each point and seed a teacher ``AttentionIndexedModel(d, n_tokens=T,
target=PowerLawTarget(γ), noise=Δ, random_state=seed)`` draws ``round(α d²)`` training
samples (``random_state=1000 + seed``) and 20 000 test samples (``2000 + seed``);
:class:`~skattn.TiedAttentionRegressor` is fitted with L-BFGS in float64 on one thread.
Predictions: the routed ``solve_state_evolution`` (the spiked state evolution, default
``n_spikes``) and the Gaussian ``solve_state_evolution(..., correction="none")``.

Usage::

    python benchmarks/research/spiked_tokens.py tokens      # ~4 min on one core
    python benchmarks/research/spiked_tokens.py noiseless   # ~8 min
    python benchmarks/research/spiked_tokens.py beta        # ~2 min
    python benchmarks/research/spiked_tokens.py gamma       # ~3 min

Each writes ``benchmarks/results/spiked_<case>.json``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from _common import add_common_arguments, write_result

ALPHA, N_TEST = 0.3, 20_000
# (T, d, γ, λ, Δ, seeds[, β, β0])
CASES = {
    "tokens": [(T, d, 1.25, 0.05, 0.2, 3) for T, d in ((3, 60), (3, 100), (4, 60), (4, 100))],
    "noiseless": [(2, d, 1.5, 0.1, 0.0, 4) for d in (100, 160, 250)],
    "beta": [(2, 100, 1.25, 0.05, 0.2, 3, beta, beta0) for beta, beta0 in ((2.0, 1.0),
                                                                          (1.0, 2.0))],
    # milder spikes: the top mode carries 40 % (γ = 0.75) and 61 % (γ = 1) of Σλ²
    "gamma": [(2, d, gamma, 0.05, 0.2, 3) for gamma in (0.75, 1.0) for d in (60, 100)],
}


def point(n_tokens, d, gamma, reg_lambda, noise, n_seeds, beta=1.0, target_beta=1.0):
    import torch

    from skattn import TiedAttentionRegressor
    from skattn.data import AttentionIndexedModel, PowerLawTarget
    from skattn.metrics import attention_error
    from skattn.theory import solve_state_evolution

    torch.set_num_threads(1)
    kw = dict(n_tokens=n_tokens, reg_lambda=reg_lambda, noise=noise, beta=beta,
              target_beta=target_beta, target=PowerLawTarget(gamma), n_features=d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # the Gaussian SE's "spiky target" warning
        spiked = solve_state_evolution(ALPHA, **kw)
        gauss = solve_state_evolution(ALPHA, correction="none", **kw)
    trained = []
    for seed in range(n_seeds):
        teacher = AttentionIndexedModel(d, n_tokens=n_tokens, target=PowerLawTarget(gamma),
                                        noise=noise, beta=target_beta, random_state=seed)
        X, y = teacher.sample(int(round(ALPHA * d * d)), random_state=1000 + seed, layout="tokens")
        X_test, y_test = teacher.sample(N_TEST, random_state=2000 + seed, layout="tokens")
        student = TiedAttentionRegressor(reg_lambda=reg_lambda, beta=beta, solver="lbfgs",
                                         dtype="float64", device="cpu",
                                         random_state=seed).fit(X, y)
        trained.append(float(attention_error(y_test, student.predict(X_test))))
    mean = float(np.mean(trained))
    return {"n_tokens": n_tokens, "d": d, "gamma": gamma, "reg_lambda": reg_lambda,
            "noise": noise, "beta": beta, "target_beta": target_beta, "trained": trained, "trained_mean": mean,
            "trained_sem": float(np.std(trained, ddof=1) / np.sqrt(len(trained))),
            "spiked": float(spiked.test_error), "n_spikes": int(spiked.params["n_spikes"]),
            "noise_to_spike": float(spiked.params["noise_to_spike"]),
            "gaussian": float(gauss.test_error),
            "spiked_gap": float(spiked.test_error) / mean - 1,
            "gaussian_gap": float(gauss.test_error) / mean - 1}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", choices=sorted(CASES), nargs="?", default="tokens")
    add_common_arguments(parser)
    opts = parser.parse_args(argv)
    case = opts.case
    global N_TEST
    cases = CASES[case]
    if opts.quick:  # one T = 2 point at d = 12, two seeds
        cases, N_TEST = [(2, 12, 1.25, 0.05, 0.2, 2)], 500
    start, rows = time.time(), []
    for args in cases:
        rows.append(point(*args))
        r = rows[-1]
        print(f"T = {r['n_tokens']}, γ = {r['gamma']}, d = {r['d']}, Δ = {r['noise']}, "
              f"β = {r['beta']}, "
              f"β0 = {r['target_beta']}: trained "
              f"{r['trained_mean']:.5f} ± {r['trained_sem']:.5f}, spiked {r['spiked']:.5f} "
              f"({100 * r['spiked_gap']:+.1f} %), Gaussian {r['gaussian']:.5f} "
              f"({100 * r['gaussian_gap']:+.1f} %)", flush=True)
    write_result(opts, f"spiked_{case}.json",
                 {"measured": time.strftime("%Y-%m-%d"), "wall_s": round(time.time() - start),
                  "alpha": ALPHA, "n_test": N_TEST, "points": rows},
                 script=__file__, argv=argv)


if __name__ == "__main__":
    main()
