"""Write ``tests/data/upgrade/<commit>/``: the files an older kubedevice left on a node.

    python tests/data/upgrade/generate.py <commit>

The commit's ``src/`` is taken with ``git archive`` (no change to this checkout's git state) and
``write_node.py`` runs on it, in a temp node: the old DRA driver prepares claims over its real
sockets and the old device plugin writes its CDI specs. What the node then holds is copied here:
``dra/checkpoint.json`` (the driver's plugin directory), ``cdi/*.json`` and
``features.d/kubedevice`` (``serve --features-file``). Run once per commit;
the files are test data, read by ``tests/dra/driver/test_checkpoint_upgrade.py``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
DRIVER = "null.example.com"


def old_tree(commit: str, into: Path) -> Path:
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, "src"], capture_output=True, check=True)
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def main(commit: str) -> None:
    out = HERE / commit
    with tempfile.TemporaryDirectory(prefix="kd-up-", dir="/tmp") as scratch:
        src = old_tree(commit, Path(scratch) / "tree")
        node = Path(scratch) / "node"
        node.mkdir()
        env = {**os.environ, "PYTHONPATH": str(src)}
        subprocess.run([sys.executable, str(HERE / "write_node.py"), str(node)], env=env, check=True, cwd=scratch)
        shutil.rmtree(out, ignore_errors=True)
        (out / "dra").mkdir(parents=True)
        shutil.copy(node / "kubelet" / "plugins" / DRIVER / "checkpoint.json", out / "dra" / "checkpoint.json")
        shutil.copytree(node / "cdi", out / "cdi")
        if (node / "features.d").exists():  # releases before 70e3aef wrote none
            shutil.copytree(node / "features.d", out / "features.d")
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1])
