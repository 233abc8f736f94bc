"""Helpers shared by the tests, the benchmarks and the docs (a fake host tree builder)."""

from .fakehost import FakeHost

__all__ = ["FakeHost"]
