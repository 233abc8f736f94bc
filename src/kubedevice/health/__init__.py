"""Per-device health checks and the anti-flapping tracker that turns results into states."""

from .checks import CheckTarget, HealthChecker
from .tracker import HealthTracker

__all__ = ["CheckTarget", "HealthChecker", "HealthTracker"]
