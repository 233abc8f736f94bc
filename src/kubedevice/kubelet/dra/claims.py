"""ResourceClaims given as files, for the kubelet's DRA side without an API server.

The same files, read by the same rule, as the driver's ``--claims-dir``
(:class:`kubedevice.dra.driver.claims.FileClaims`): every ``*.yaml``, ``*.yml`` and ``*.json``
in one directory, each document a ``resource.k8s.io/v1`` ResourceClaim as the API server returns
it (``kubectl get resourceclaim NAME -o yaml`` gives one). So the simulated kubelet, the checker
and the driver under test all see the same claims with the same UIDs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ...dra.nodeclaims import Claim
from ...errors import KubedeviceError

SUFFIXES = (".yaml", ".yml", ".json")


class ClaimFileError(KubedeviceError, ValueError):
    """A claims directory or file that cannot be read; ``str()`` names the file."""


def load_claims(directory: Path) -> list[Claim]:
    """Every ResourceClaim in ``directory``, in file order; a claim named twice is an error."""
    if not directory.is_dir():
        raise ClaimFileError(f"{directory}: not a directory of ResourceClaim files")
    claims: dict[tuple[str, str], Claim] = {}
    for path in sorted(directory.iterdir()):
        if path.suffix not in SUFFIXES:
            continue
        for obj in _documents(path):
            if obj.get("kind") != "ResourceClaim":
                continue
            claim = Claim.from_object(obj)
            if not claim.namespace or not claim.name or not claim.uid:
                raise ClaimFileError(f"{path}: a ResourceClaim needs metadata.namespace, name and uid")
            key = (claim.namespace, claim.name)
            if key in claims:
                raise ClaimFileError(f"{path}: ResourceClaim {claim.namespace}/{claim.name} is given twice")
            claims[key] = claim
    return list(claims.values())


def _documents(path: Path) -> list[dict[str, Any]]:
    try:
        documents = list(yaml.safe_load_all(path.read_text()))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise ClaimFileError(f"{path}: cannot read claims: {err}") from None
    return [d for d in documents if isinstance(d, dict)]


def find_claim(claims: list[Claim], ref: str) -> Claim:
    """``NAMESPACE/NAME`` (or ``NAME`` in ``default``) among ``claims``; ``KeyError`` says what is missing."""
    namespace, _, name = ref.rpartition("/")
    namespace = namespace or "default"
    for claim in claims:
        if claim.namespace == namespace and claim.name == name:
            return claim
    raise KeyError(f"no ResourceClaim {namespace}/{name} in the claims directory")


def drivers_of(claim: Claim) -> list[str]:
    """The drivers named in the claim's allocation, in order: the kubelet calls each of them."""
    return list(dict.fromkeys(r.driver for r in claim.results))
