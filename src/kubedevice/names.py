"""Kubernetes name rules that a device plugin must meet before the kubelet sees it.

Ports of ``IsExtendedResourceName`` (pkg/apis/core/v1/helper) and ``IsQualifiedName`` /
``IsDNS1123Subdomain`` (apimachinery/pkg/util/validation), so a bad resource name fails
locally with the same verdict the kubelet would give, instead of at Register time.
"""

from __future__ import annotations

import re

# The apimachinery patterns, shared by every module that checks a Kubernetes name.
QUALIFIED_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")  # also what a container env var name must be
_REQUESTS_PREFIX = "requests."
_NATIVE_DOMAIN = "kubernetes.io/"


def is_dns1123_subdomain(value: str) -> bool:
    return len(value) <= 253 and bool(DNS1123_SUBDOMAIN.match(value))


def is_dns1123_label(value: str) -> bool:
    """``IsDNS1123Label``: a namespace's name (one label of a subdomain, at most 63 characters)."""
    return len(value) <= 63 and "." not in value and bool(DNS1123_SUBDOMAIN.match(value))


def qualified_name_errors(value: str, prefix_limit: int = 253) -> list[str]:
    """Why ``value`` is not a qualified name (``[prefix/]name``); empty when it is.

    ``prefix_limit`` lets a caller that checks a longer name (the kubelet prepends ``requests.``)
    apply that name's limit while quoting only what the user wrote.
    """
    parts = value.split("/")
    if len(parts) > 2:
        return ["a qualified name has at most one '/'"]
    name = parts[-1]
    errors = []
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        elif len(prefix) > prefix_limit:
            errors.append(f"prefix part must be no more than {prefix_limit} characters")
        elif not DNS1123_SUBDOMAIN.match(prefix):
            errors.append(f"prefix part {prefix!r} must be a lowercase RFC 1123 subdomain")
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    elif not QUALIFIED_NAME_PART.match(name):
        errors.append(
            f"name part {name!r} must consist of alphanumeric characters, '-', '_' or '.', "
            "and must start and end with an alphanumeric character"
        )
    return errors


def label_value_error(value: str) -> str | None:
    """Why ``value`` cannot be a label's value (``IsValidLabelValue``: empty, or up to 63
    characters of the qualified-name alphabet), or ``None``."""
    if len(value) > 63:
        return f"value {value!r} must be no more than 63 characters"
    if value and not QUALIFIED_NAME_PART.match(value):
        return (
            f"value {value!r} must be empty or consist of alphanumeric characters, '-', '_' or '.', "
            "and must start and end with an alphanumeric character"
        )
    return None


def extended_resource_name_error(name: str) -> str | None:
    """Why the kubelet would refuse ``name`` as a device plugin resource, or ``None``."""
    if "/" not in name:
        return f"resource name {name!r} must be domain-qualified, like 'vendor.com/device'"
    if _NATIVE_DOMAIN in name:
        return f"resource name {name!r} is in the reserved kubernetes.io domain"
    if name.startswith(_REQUESTS_PREFIX):
        return f"resource name {name!r} must not start with {_REQUESTS_PREFIX!r}"
    # The kubelet checks IsQualifiedName("requests." + name); "requests." is a valid DNS label,
    # so that holds exactly when the user's own prefix is a subdomain short enough to fit.
    errors = qualified_name_errors(name, prefix_limit=253 - len(_REQUESTS_PREFIX))
    if errors:
        return f"resource name {name!r} is not a valid extended resource name: {'; '.join(errors)}"
    return None


def endpoint_for(resource_name: str) -> str:
    """The socket file name kubedevice serves a resource on (a bare name, as Register needs)."""
    return "kubedevice-" + resource_name.replace("/", "_") + ".sock"
