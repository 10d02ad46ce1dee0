"""A fixed numpy workload whose time expresses the machine's load in a benchmark run."""

import time

import numpy as np


def reference_seconds():
    """Time of a fixed numpy workload (20 eigh of 400×400), to express the load."""
    a = np.random.default_rng(0).standard_normal((400, 400))
    a = a + a.T
    start = time.perf_counter()
    for _ in range(20):
        np.linalg.eigh(a)
    return time.perf_counter() - start
