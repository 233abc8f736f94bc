"""A kubelet device-manager simulator for testing device plugins over real unix sockets."""

from .model import (
    UNEXPECTED_ADMISSION_ERROR,
    AdmissionError,
    Call,
    Container,
    ContainerAdmission,
    ContainerStartError,
    PluginOptions,
    Pod,
    Registration,
    Resource,
)
from .plugin_server import CannotServe, KubeletSocketInUse
from .simulator import KubeletSimulator

__all__ = [
    "UNEXPECTED_ADMISSION_ERROR",
    "AdmissionError",
    "Call",
    "CannotServe",
    "Container",
    "ContainerAdmission",
    "ContainerStartError",
    "KubeletSimulator",
    "KubeletSocketInUse",
    "PluginOptions",
    "Pod",
    "Registration",
    "Resource",
]
