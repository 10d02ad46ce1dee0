"""skattn: single-head tied attention in high dimensions (arXiv:2509.24914).

scikit-learn estimators on a PyTorch backend, attention-indexed data generators, the exact
asymptotic theory (state evolution, spectra) and AMP.

Public names are loaded lazily, so ``import skattn.theory`` (numpy/scipy only) never
imports torch.
"""

import importlib

__version__ = "0.1.0"

_LAZY = {
    "WishartTarget": "skattn.data",
    "PowerLawTarget": "skattn.data",
    "SpectrumTarget": "skattn.data",
    "AttentionIndexedModel": "skattn.data",
    "make_attention_indexed": "skattn.data",
    "TiedAttentionRegressor": "skattn.estimators",
    "UntiedAttentionRegressor": "skattn.estimators",
    "DirectAttentionRegressor": "skattn.estimators",
    "AsymptoticPredictor": "skattn.estimators",
    "ScaledLambdaRegressor": "skattn.estimators",
    "solve_state_evolution": "skattn.theory",
    "state_evolution_curve": "skattn.theory",
    "limit_threads": "skattn.threads",
}
_SUBMODULES = ("data", "nn", "estimators", "theory", "metrics", "amp", "parallel", "sweep",
               "scaling", "spectra", "experiments", "progress", "reporting", "demo",
               "validation", "threads", "plotting", "figures", "cli")

__all__ = sorted(_LAZY) + ["metrics", "theory", "__version__"]


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"skattn.{name}")
    raise AttributeError(f"module 'skattn' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
