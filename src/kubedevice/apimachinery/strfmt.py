"""The declarative formats of ``k8s.io/apimachinery/pkg/api/validate/strfmt.go`` that Kubernetes'
APIs use: from 1.37 their errors replace the handwritten ones where a format is Beta, with their own
wording (apimachinery v0.37.2), which is why they are kept apart from :mod:`.validation`.
"""

from __future__ import annotations

from ..gostrings import go_len
from ..releases import NEWEST
from . import content, validation
from .field import ErrorList, Path, each_invalid, invalid, too_long, too_long_max_length

EXTENDED_RESOURCE_DOMAIN = "kubernetes.io/"
QUOTA_PREFIX = "requests."
"""A quota's resource name is the extended resource's behind this prefix (``requests.example.com/gpu``)."""


def extended_resource_name_messages(name: str) -> list[str]:
    """``ExtendedResourceName``'s messages: a domain-prefixed path outside ``kubernetes.io/``, no
    ``requests.`` prefix, and ``requests.<name>`` a label key (``IsLabelKey``), as in quota.

    Empty exactly when ``v1helper.IsExtendedResourceName`` holds (:func:`.core.is_extended_resource_name`).
    """
    messages = []
    if "/" not in name:
        messages.append("a name must be a domain-prefixed path, such as 'example.com/my-prop'")
    elif EXTENDED_RESOURCE_DOMAIN in name:
        messages.append(f'must not have "{EXTENDED_RESOURCE_DOMAIN}" domain')
    if name.startswith(QUOTA_PREFIX):
        messages.append(f'must not have "{QUOTA_PREFIX}" prefix')
    return messages + content.is_label_key(QUOTA_PREFIX + name)


def extended_resource_name(name: str, path: Path) -> ErrorList:
    """``ExtendedResourceName``."""
    return each_invalid(path, name, extended_resource_name_messages(name))


def long_name_caseless(name: str, path: Path) -> ErrorList:
    """``LongNameCaseless``: a DNS subdomain in either case, length in bytes."""
    return each_invalid(path, name, content.is_dns1123_subdomain_caseless(name))


def validate_c_identifier(identifier: str, limit: int, path: Path, release: str = NEWEST) -> ErrorList:
    """``validateCIdentifier``: at most ``limit`` bytes, then the format (``content.IsCIdentifier``
    and the handwritten DRA validation's ``IsCIdentifier`` say the same; so does the handwritten
    function, whose limit 1.31 worded with ``TooLongMaxLength``)."""
    errors = [too_long_max_length(path, limit, release)] if go_len(identifier) > limit else []
    return errors + each_invalid(path, identifier, validation.is_c_identifier(identifier))


RESOURCE_DOMAIN_MAX = 63
RESOURCE_ID_MAX = 32


def resource_fully_qualified_name(name: str, path: Path) -> ErrorList:
    """``ResourceFullyQualifiedName``: the prefix a case-sensitive DNS subdomain (``LongName``, detail
    prefixed ``prefix: ``), its own wording for empty parts, and a name with two slashes or more
    left unchecked (a TODO upstream)."""
    parts = name.split("/")
    errors: ErrorList = []
    if len(parts) == 1:
        errors += validate_c_identifier(name, RESOURCE_ID_MAX, path)
    elif len(parts) == 2:
        prefix, identifier = parts
        if not prefix:
            errors.append(invalid(path, "", "prefix must not be empty"))
        else:
            if go_len(prefix) > RESOURCE_DOMAIN_MAX:
                errors.append(too_long(path, RESOURCE_DOMAIN_MAX))
            errors += [invalid(path, prefix, f"prefix: {m}") for m in content.is_dns1123_subdomain(prefix)]
        if identifier:
            errors += validate_c_identifier(identifier, RESOURCE_ID_MAX, path)
        else:
            errors.append(invalid(path, "", "name must not be empty"))
    if "/" not in name:
        errors.append(invalid(path, name, "a fully qualified name must be a domain and a name separated by a slash"))
    return errors
