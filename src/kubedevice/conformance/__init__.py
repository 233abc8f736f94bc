"""``kubedevice check``: a conformance suite for any device plugin, run through the kubelet simulator."""

from .model import Check, Phase, Report, Result, Status
from .runner import CheckOptions, run_checks

__all__ = ["Check", "CheckOptions", "Phase", "Report", "Result", "Status", "run_checks"]
