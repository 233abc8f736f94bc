"""The session's Helm (see :mod:`helmkit`) and image (see :mod:`imagekit`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from . import imagekit
from .helmkit import Helm, find_or_build_helm
from .imagekit import Image


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Helm]:
    yield Helm(find_or_build_helm(), tmp_path_factory.mktemp("helm-home"))


@pytest.fixture(scope="session")
def image(tmp_path_factory: pytest.TempPathFactory) -> Image:
    """The image built by scripts/image.sh (once per session), unpacked."""
    archive = imagekit.build(tmp_path_factory.mktemp("dist"))
    return imagekit.unpack(archive, tmp_path_factory.mktemp("image"))
