"""The device facts (``driver``, ``driver_version``, ``vendor_name``, ``model``) in env templates,
as ``{drivers}``, ``{driver_versions}``, ``{vendor_names}`` and ``{models}``: one entry per device ID,
empty where a fact cannot be read. Allocate goes over real gRPC on a unix socket."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from kubedevice.sources.configured import ConfiguredPlugin
from kubedevice.sources.facts import ENV_FACTS, FALLBACK_ENV, FactUnavailable, pci_names
from kubedevice.sources.hostroot import HostRoot
from kubedevice.sources.schema import ENV_FIELDS
from kubedevice.testing import FakeHost

from .conftest import resource
from .test_container_path import allocate

PCI_IDS = """\
# the format of pciutils' pci.ids
1002  Advanced Micro Devices, Inc. [AMD/ATI]
\t74a1  Aqua Vanjaram [Instinct MI300X]
\t\t1002 74a1  Instinct MI300X
C 03  Display controller
"""
ENV = {"MODELS": "{models}", "VENDORS": "{vendor_names}", "DRIVERS": "{drivers}", "VERSIONS": "{driver_versions}"}


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    fake = FakeHost(tmp_path / "root")
    fake.pci_device("0000:03:00.0", "1002", "74a1", "038000", numa_node=0, driver="amdgpu")
    fake.pci_device("0000:83:00.0", "1002", "7fff", "038000", numa_node=1)  # not in pci.ids, no driver
    fake.write("/usr/share/misc/pci.ids", PCI_IDS)
    fake.write("/sys/module/amdgpu/version", "6.8.5\n")
    link = "/sys/bus/pci/drivers/amdgpu/module"
    fake.symlink(link, os.path.relpath("/sys/module/amdgpu", os.path.dirname(link)))
    return fake


def test_env_templates_see_the_facts(host: FakeHost, tmp_path: Path) -> None:
    assert set(ENV_FACTS) <= ENV_FIELDS
    config = resource('name: amd.com/gpu\npci: {vendor: "1002"}', replicas=2, env=ENV)
    plugin = ConfiguredPlugin(config, host.root)
    response = asyncio.run(allocate(plugin, tmp_path, "0000:83:00.0::0", "0000:03:00.0::1", "0000:03:00.0::0"))
    assert dict(response.envs) == {
        "MODELS": ",Aqua Vanjaram [Instinct MI300X],Aqua Vanjaram [Instinct MI300X]",
        "VENDORS": "Advanced Micro Devices, Inc. [AMD/ATI],Advanced Micro Devices, Inc. [AMD/ATI],"
        "Advanced Micro Devices, Inc. [AMD/ATI]",
        "DRIVERS": ",amdgpu,amdgpu",
        "VERSIONS": ",6.8.5,6.8.5",
    }


def test_without_a_pci_ids_on_the_host_the_names_are_empty(host: FakeHost, tmp_path: Path) -> None:
    host.remove("/usr/share/misc/pci.ids")
    plugin = ConfiguredPlugin(resource('name: amd.com/gpu\npci: {vendor: "1002"}', env=ENV), host.root)
    response = asyncio.run(allocate(plugin, tmp_path, "0000:03:00.0"))
    assert dict(response.envs) == {"MODELS": "", "VENDORS": "", "DRIVERS": "amdgpu", "VERSIONS": "6.8.5"}


def test_a_host_without_one_reads_the_copy_kubedevice_pci_ids_names(
    host: FakeHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The image sets ``$KUBEDEVICE_PCI_IDS`` to its own copy for minimal host OSes; the host's
    file, where there is one, comes first."""
    host.remove("/usr/share/misc/pci.ids")
    copy = tmp_path / "image-pci.ids"
    copy.write_text(PCI_IDS.replace("Aqua Vanjaram", "Image Copy"))
    monkeypatch.setenv(FALLBACK_ENV, str(copy))
    root = HostRoot(host.root)
    assert pci_names(root, "1002", "74a1") == ("Advanced Micro Devices, Inc. [AMD/ATI]", "Image Copy [Instinct MI300X]")
    plugin = ConfiguredPlugin(resource('name: amd.com/gpu\npci: {vendor: "1002"}', env=ENV), host.root)
    response = asyncio.run(allocate(plugin, tmp_path, "0000:03:00.0"))
    assert response.envs["MODELS"] == "Image Copy [Instinct MI300X]"
    host.write("/usr/share/misc/pci.ids", PCI_IDS)
    assert pci_names(root, "1002", "74a1")[1] == "Aqua Vanjaram [Instinct MI300X]"
    host.remove("/usr/share/misc/pci.ids")
    copy.unlink()
    with pytest.raises(FactUnavailable, match=rf"looked in .*/usr/share/pci.ids; nor \$KUBEDEVICE_PCI_IDS's {copy}"):
        pci_names(root, "1002", "74a1")
