"""Name formats as ``k8s.io/apimachinery/pkg/util/validation`` checks and words them.

Each ``is_*`` returns the messages Kubernetes gives (empty when the value is valid); a caller
turns each into a ``field.Invalid`` (:func:`kubedevice.apimachinery.field.each_invalid`). Lengths
are Go's ``len``, in bytes, though this package's messages say "characters" (the
``api/validate/content`` package, :mod:`.content`, says "bytes"). Patterns match the whole value:
Go's ``$`` does not match before a final newline, as Python's does.

From apimachinery v0.35 ``IsQualifiedName`` and ``IsValidLabelValue`` are ``content``'s
``IsLabelKey`` and ``IsLabelValue``; :func:`is_qualified_name` and :func:`is_valid_label_value`
take the release and give the older wording before 1.35.
"""

from __future__ import annotations

import re

from ..gostrings import go_len
from ..releases import at_least

DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + "(\\." + DNS1123_LABEL_FMT + ")*"
DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
LABEL_VALUE_FMT = "(" + QUALIFIED_NAME_FMT + ")?"
C_IDENTIFIER_FMT = "[A-Za-z_][A-Za-z0-9_]*"


def _whole(fmt: str) -> re.Pattern[str]:
    return re.compile(rf"\A(?:{fmt})\Z")


DNS1123_LABEL = _whole(DNS1123_LABEL_FMT)
DNS1123_SUBDOMAIN = _whole(DNS1123_SUBDOMAIN_FMT)
DNS1035_LABEL = _whole(DNS1035_LABEL_FMT)
QUALIFIED_NAME = _whole(QUALIFIED_NAME_FMT)
"""A label key's name part, and (with the empty string) a label value."""
LABEL_VALUE = _whole(LABEL_VALUE_FMT)
C_IDENTIFIER = _whole(C_IDENTIFIER_FMT)
"""Also what kubedevice takes as an environment variable's name."""

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
QUALIFIED_NAME_MAX = 63
LABEL_VALUE_MAX = 63

DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character"
)
DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character"
)
DNS1035_LABEL_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
    "character, and end with an alphanumeric character"
)
QUALIFIED_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character"
)
C_IDENTIFIER_MSG = (
    "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric "
    "characters or '_'"
)
EMPTY_ERROR = "must be non-empty"


def regex_error(message: str, fmt: str, *examples: str) -> str:
    """``RegexError``, spacing included (``(e.g. 'a',  or 'b', regex …)``)."""
    if not examples:
        return f"{message} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


def max_len_error(length: int, unit: str = "characters") -> str:
    """``MaxLenError``: "characters" here, "bytes" in the content package (both count bytes)."""
    return f"must be no more than {length} {unit}"


def is_dns1123_label(value: str) -> list[str]:
    """``IsDNS1123Label``: a valid subdomain that is no label must hold dots, and says so."""
    messages = [max_len_error(DNS1123_LABEL_MAX)] if go_len(value) > DNS1123_LABEL_MAX else []
    if not DNS1123_LABEL.match(value):
        if DNS1123_SUBDOMAIN.match(value):
            messages.append("must not contain dots")
        else:
            messages.append(regex_error(DNS1123_LABEL_MSG, DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return messages


def is_dns1123_subdomain(value: str, unit: str = "characters") -> list[str]:
    """``IsDNS1123Subdomain``; ``content.IsDNS1123Subdomain`` (``unit="bytes"``) differs in the word only."""
    messages = [max_len_error(DNS1123_SUBDOMAIN_MAX, unit)] if go_len(value) > DNS1123_SUBDOMAIN_MAX else []
    if not DNS1123_SUBDOMAIN.match(value):
        messages.append(regex_error(DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, "example.com"))
    return messages


def is_dns1035_label(value: str) -> list[str]:
    """``IsDNS1035Label``."""
    messages = [max_len_error(DNS1123_LABEL_MAX)] if go_len(value) > DNS1123_LABEL_MAX else []
    if not DNS1035_LABEL.match(value):
        messages.append(regex_error(DNS1035_LABEL_MSG, DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return messages


def is_c_identifier(value: str) -> list[str]:
    """``IsCIdentifier``: the format, not the length."""
    if C_IDENTIFIER.match(value):
        return []
    return [regex_error(C_IDENTIFIER_MSG, C_IDENTIFIER_FMT, "my_name", "MY_NAME", "MyName")]


def is_qualified_name(value: str, release: str) -> list[str]:
    """``IsQualifiedName``: ``[prefix/]name``, a DNS-subdomain prefix and a 63-byte name.

    From 1.35 it is ``content.IsLabelKey`` ("a valid label key", lengths in bytes); before, "a
    qualified name" and "characters" (apimachinery v0.34.4).
    """
    if at_least(release, "1.35"):
        return qualified_name_messages(value, "a valid label key", "bytes")
    return qualified_name_messages(value, "a qualified name", "characters")


def qualified_name_messages(value: str, what: str, unit: str) -> list[str]:
    """The one body of ``IsQualifiedName`` and ``content.IsLabelKey``: ``what`` the whole is called
    when it has two slashes or more, and the ``unit`` of the package's length messages.

    The name part is matched even when empty, so an empty name gets two messages.
    """
    parts = value.split("/")
    example = regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
    if len(parts) > 2:
        return [f"{what} {example} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    messages = []
    if len(parts) == 2:
        if not parts[0]:
            messages.append("prefix part " + EMPTY_ERROR)
        else:
            messages += ["prefix part " + message for message in is_dns1123_subdomain(parts[0], unit)]
    name = parts[-1]
    if not name:
        messages.append("name part " + EMPTY_ERROR)
    elif go_len(name) > QUALIFIED_NAME_MAX:
        messages.append("name part " + max_len_error(QUALIFIED_NAME_MAX, unit))
    if not QUALIFIED_NAME.match(name):
        messages.append("name part " + example)
    return messages


def label_value_messages(value: str, unit: str) -> list[str]:
    """The one body of ``IsValidLabelValue`` and ``content.IsLabelValue``."""
    messages = [max_len_error(LABEL_VALUE_MAX, unit)] if go_len(value) > LABEL_VALUE_MAX else []
    if not LABEL_VALUE.match(value):
        messages.append(regex_error(LABEL_VALUE_MSG, LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return messages


def is_valid_label_value(value: str, release: str) -> list[str]:
    """``IsValidLabelValue``: empty, or up to 63 bytes of the qualified-name alphabet; its length
    message says bytes from 1.35 (``content.IsLabelValue``) and characters before (v0.34.4)."""
    return label_value_messages(value, "bytes" if at_least(release, "1.35") else "characters")
