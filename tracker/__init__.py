"""Kernel stability tracker: run a kernel test suite nightly, keep every result, judge stability."""

__version__ = "0.1.0"
