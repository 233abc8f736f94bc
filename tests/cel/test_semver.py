"""kubedevice.cel.semver: blang/semver parsing and Kubernetes' normalisation."""

from __future__ import annotations

import pytest

from kubedevice.cel.semver import SemverError, normalize_and_parse, parse


def test_semver_parse_and_normalize() -> None:
    assert parse("1.2.3-rc.1+b").pre == ("rc", 1)
    assert normalize_and_parse("v1.02") == parse("1.2.0")
    for bad in ("1.2", "01.2.3", "1.2.3-", "1.2.3+", "1.2.3-a..b"):
        with pytest.raises(SemverError):
            parse(bad)
