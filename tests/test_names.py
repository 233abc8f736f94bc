"""Resource-name errors quote what the user wrote, with the kubelet's verdict unchanged."""

from __future__ import annotations

import pytest

from kubedevice.names import (
    extended_resource_name_error,
    is_dns1123_subdomain,
    label_value_error,
    qualified_name_errors,
)


def kubelet_verdict(name: str) -> bool:
    """Upstream ``IsExtendedResourceName`` for a domain-qualified name: ``IsQualifiedName("requests." + name)``."""
    return not qualified_name_errors("requests." + name)


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("Example.com/x", "prefix part 'Example.com' must be a lowercase RFC 1123 subdomain"),
        ("exa_mple.com/x", "prefix part 'exa_mple.com'"),
        ("/x", "prefix part must be non-empty"),
        ("a" * 245 + "/x", "prefix part must be no more than 244 characters"),
        ("example.com/-x", "name part '-x'"),
    ],
)
def test_errors_quote_the_users_own_prefix(name: str, fragment: str) -> None:
    error = extended_resource_name_error(name)
    assert error is not None and fragment in error, error
    assert "requests." not in error


@pytest.mark.parametrize(
    "name",
    ["example.com/x", "Example.com/x", "a" * 244 + "/x", "a" * 245 + "/x", "a.b/c", "a./c", ".a/c", "/c", "a/b/c"],
)
def test_the_verdict_is_the_kubelets(name: str) -> None:
    assert (extended_resource_name_error(name) is None) == kubelet_verdict(name)


@pytest.mark.parametrize("name", ["example.com/x\n", "example.com\n/x", "x\n"])
def test_a_trailing_newline_is_refused_as_go_regexp_refuses_it(name: str) -> None:
    """Go's ``$`` matches only at the end of the text; Python's also before a final newline."""
    assert qualified_name_errors(name)
    assert extended_resource_name_error(name) is not None


def test_a_subdomain_with_a_trailing_newline_is_not_one() -> None:
    assert not is_dns1123_subdomain("example.com\n")
    assert label_value_error("value\n") is not None
