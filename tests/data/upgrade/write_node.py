"""Run under an OLD tree's ``src`` (``PYTHONPATH``): what that version writes on a node, into ``root``.

Called by ``generate.py`` only; everything here is the old version's own code (its DRA driver
serving over real sockets with the kubelet's side of DRA from the same tree, its device
plugin's CDI writer and its NFD features file), so the files are what that version left on a
node it was upgraded from.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from pathlib import Path

from kubedevice.config import parse_config
from kubedevice.dra.driver.driver import DraDriver
from kubedevice.sources.configured import ConfiguredPlugin
from kubedevice.testing.dradriver import DRIVER, Node, claim_object, kubelet, null_plugin, running

CLAIMS = [("claim-a", "11111111-1111-4111-8111-111111111111", ["null0"]),
          ("claim-b", "22222222-2222-4222-8222-222222222222", ["null1"]),
          ("claim-c", "33333333-3333-4333-8333-333333333333", ["null2", "null3"])]  # fmt: skip
DEVICE_PLUGIN = """
resources:
  - name: example.com/null
    static: {count: 2, paths: [/dev/null]}
    cdi: {}
"""


async def dra(node: Node) -> None:
    """Claims a and b prepared in one call, c in another, b unprepared: a and c stay prepared."""
    refs = [node.add_claim(claim_object(name, devices, uid=uid)) for name, uid, devices in CLAIMS]
    async with running(node, DraDriver(DRIVER, [null_plugin()])) as service, kubelet(service) as client:
        for batch in (refs[:2], refs[2:]):
            answer = await client.prepare(batch)
            assert all(c.error == "" for c in answer.claims.values()), answer
        answer = await client.unprepare(refs[1:2])
        assert all(c.error == "" for c in answer.claims.values()), answer


def device_plugin(cdi_dir: Path) -> None:
    (resource,) = parse_config(DEVICE_PLUGIN).resources
    ConfiguredPlugin(resource, Path("/"), cdi_dir)


def features(directory: Path) -> None:
    """``serve --features-file``'s file for the null plugin's four devices, where the version has
    one (``kubedevice.node.features``, from 70e3aef on)."""
    try:
        features_file = importlib.import_module("kubedevice.node.features").FeaturesFile
    except ImportError:
        return
    directory.mkdir()
    features_file(directory / "kubedevice").follow([null_plugin()])


if __name__ == "__main__":
    node = Node(Path(sys.argv[1]))
    asyncio.run(dra(node))
    device_plugin(node.cdi_dir)
    features(node.root / "features.d")
