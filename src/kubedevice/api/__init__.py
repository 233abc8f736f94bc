"""The kubelet device plugin API ``v1beta1``: the proto and its generated modules.

Protobuf objects appear only at the edge of kubedevice (the gRPC servers and clients);
everything else works on the plain data in :mod:`kubedevice.device`.
"""

from . import api_pb2 as pb
from . import api_pb2_grpc as pb_grpc

VERSION = "v1beta1"
HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"
KUBELET_SOCKET = "kubelet.sock"
DEFAULT_PLUGIN_DIR = "/var/lib/kubelet/device-plugins"
CHECKPOINT_FILE = "kubelet_internal_checkpoint"
PRE_START_TIMEOUT_SECONDS = 30

__all__ = [
    "CHECKPOINT_FILE",
    "DEFAULT_PLUGIN_DIR",
    "HEALTHY",
    "KUBELET_SOCKET",
    "PRE_START_TIMEOUT_SECONDS",
    "UNHEALTHY",
    "VERSION",
    "pb",
    "pb_grpc",
]
