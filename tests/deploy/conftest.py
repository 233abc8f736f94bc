"""The session's Helm (see :mod:`helmkit`) and image (see :mod:`imagekit`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from . import imagekit
from .helmkit import Helm, find_or_build_helm
from .imagekit import Image


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Helm]:
    yield Helm(find_or_build_helm(), tmp_path_factory.mktemp("helm-home"))


@pytest.fixture(scope="session")
def image_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The OCI archive scripts/image.sh builds, once per session."""
    return imagekit.build(tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="session")
def image(image_archive: Path, tmp_path_factory: pytest.TempPathFactory) -> Image:
    """That image, unpacked."""
    return imagekit.unpack(image_archive, tmp_path_factory.mktemp("image"))
