"""A device plugin's resource name as the kubelet judges it, a DRA driver's name, and the socket
kubedevice serves a resource on.

The rule is Kubernetes' (``v1helper.IsExtendedResourceName``, which the kubelet applies at Register
time) and so is the wording (the declarative ``ExtendedResourceName`` format's messages, the ones a
DeviceClass's ``extendedResourceName`` gets): :mod:`kubedevice.apimachinery`, where the DRA tools
find them too. A bad name fails locally, with the same verdict the kubelet would give.
"""

from __future__ import annotations

from .apimachinery import validation
from .apimachinery.core import CSI_DRIVER_NAME_MAX, is_extended_resource_name
from .apimachinery.strfmt import extended_resource_name_messages
from .gostrings import go_len


def extended_resource_name_error(name: str) -> str | None:
    """Why the kubelet would refuse ``name`` as a device plugin resource, or ``None``.

    The messages judge ``requests.<name>`` as a label key, as Kubernetes does (a quota's name), so
    a domain's length limit reads 253 for the ``requests.`` prefix and the domain together.
    """
    if is_extended_resource_name(name):
        return None
    why = "; ".join(extended_resource_name_messages(name))
    return f"resource name {name!r} is not a valid extended resource name: {why}"


def dra_driver_name_error(name: str) -> str | None:
    """Why kubedevice refuses ``name`` as its DRA driver's, or ``None``: the API server's limit for
    ``spec.driver`` (63 bytes, ``ValidateCSIDriverName``), and a DNS subdomain as written, in lower
    case, which is the form that check lower-cases a name to."""
    messages = validation.is_dns1123_subdomain(name)
    if go_len(name) > CSI_DRIVER_NAME_MAX:
        messages.insert(0, validation.max_len_error(CSI_DRIVER_NAME_MAX))
    return f"{name!r} is not a valid DRA driver name: {'; '.join(messages)}" if messages else None


def endpoint_for(resource_name: str) -> str:
    """The socket file name kubedevice serves a resource on (a bare name, as Register needs)."""
    return "kubedevice-" + resource_name.replace("/", "_") + ".sock"
