"""The session's Helm; see :mod:`helmkit` for how it is found or built."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .helmkit import Helm, find_or_build_helm


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Helm]:
    yield Helm(find_or_build_helm(), tmp_path_factory.mktemp("helm-home"))
