"""Asymptotic theory of single-head tied attention (numpy/scipy only, never torch)."""

from .laws import DiscreteLaw, SpectralLaw, WishartLaw

__all__ = ["SpectralLaw", "WishartLaw", "DiscreteLaw"]
