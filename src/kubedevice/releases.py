"""The Kubernetes releases kubedevice mirrors, newest last, and how a rule keyed by one compares.

A rule a release's code changed without a feature gate (a message's wording, a check added) is
keyed by the release: overriding gates on a 1.34 API server does not make it run 1.37's code.
apimachinery's v0.X ships with Kubernetes 1.X, so its rules are keyed the same way.
"""

from __future__ import annotations

RELEASES = ("1.31", "1.32", "1.33", "1.34", "1.35", "1.36", "1.37")
NEWEST = RELEASES[-1]


def minor(release: str) -> int:
    """``"1.35"`` -> 35."""
    return int(release.split(".")[1])


def at_least(release: str, minimum: str) -> bool:
    """Whether ``release`` is ``minimum`` or newer: for rules a release's code changed without a gate."""
    return minor(release) >= minor(minimum)
