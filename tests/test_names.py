"""Resource-name errors in Kubernetes' own words, with the kubelet's verdict."""

from __future__ import annotations

import pytest

from kubedevice.apimachinery import content, validation
from kubedevice.names import extended_resource_name_error


def kubelet_verdict(name: str) -> bool:
    """Upstream ``IsExtendedResourceName`` for a domain-qualified name: ``IsQualifiedName("requests." + name)``."""
    return not content.is_label_key("requests." + name)


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("Example.com/x", "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric"),
        ("exa_mple.com/x", "prefix part a lowercase RFC 1123 subdomain"),
        ("/x", "prefix part a lowercase RFC 1123 subdomain"),
        ("a" * 245 + "/x", "prefix part must be no more than 253 bytes"),
        ("example.com/-x", "name part must consist of alphanumeric characters"),
        ("x", "a name must be a domain-prefixed path, such as 'example.com/my-prop'"),
        ("kubernetes.io/x", 'must not have "kubernetes.io/" domain'),
    ],
)
def test_errors_are_the_api_servers_words_for_an_extended_resource_name(name: str, fragment: str) -> None:
    """The messages 1.37's API server gives a DeviceClass's ``extendedResourceName`` (``validate.
    ExtendedResourceName``); they judge ``requests.<name>`` but never show the prefix the user did not write."""
    error = extended_resource_name_error(name)
    assert error is not None and fragment in error, error
    assert error.startswith(f"resource name {name!r} is not a valid extended resource name: ")
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
    assert content.is_label_key(name)
    assert extended_resource_name_error(name) is not None


def test_a_subdomain_with_a_trailing_newline_is_not_one() -> None:
    assert validation.is_dns1123_subdomain("example.com\n")
    assert content.is_label_value("value\n")
