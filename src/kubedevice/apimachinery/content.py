"""Name formats as ``k8s.io/apimachinery/pkg/api/validate/content`` words them (apimachinery
v0.35 on): the checks of :mod:`.validation`, with length messages in "bytes", and label keys
called "a valid label key". ``validation.IsQualifiedName`` and ``IsValidLabelValue`` are these
from v0.35, and the CEL format library and the declarative validation use them.
"""

from __future__ import annotations

from ..gostrings import go_len
from .validation import (
    DNS1123_SUBDOMAIN,
    DNS1123_SUBDOMAIN_FMT,
    DNS1123_SUBDOMAIN_MAX,
    label_value_messages,
    max_len_error,
    qualified_name_messages,
    regex_error,
)
from .validation import is_dns1123_subdomain as _subdomain

DNS1123_SUBDOMAIN_CASELESS_MSG = (
    "an RFC 1123 subdomain must consist of alphanumeric characters, '-' or '.', and must start and end with an "
    "alphanumeric character"
)


def is_dns1123_subdomain(value: str) -> list[str]:
    """``content.IsDNS1123Subdomain``."""
    return _subdomain(value, "bytes")


def is_dns1123_subdomain_caseless(value: str) -> list[str]:
    """``content.IsDNS1123SubdomainCaseless``: upper case allowed, its own wording and example."""
    messages = [max_len_error(DNS1123_SUBDOMAIN_MAX, "bytes")] if go_len(value) > DNS1123_SUBDOMAIN_MAX else []
    if not DNS1123_SUBDOMAIN.match(value.lower()):
        messages.append(regex_error(DNS1123_SUBDOMAIN_CASELESS_MSG, DNS1123_SUBDOMAIN_FMT, "Example.com"))
    return messages


def is_label_key(value: str) -> list[str]:
    """``content.IsLabelKey`` (``IsQualifiedName`` from v0.35)."""
    return qualified_name_messages(value, "a valid label key", "bytes")


def is_label_value(value: str) -> list[str]:
    """``content.IsLabelValue`` (``IsValidLabelValue`` from v0.35)."""
    return label_value_messages(value, "bytes")
