"""Kubernetes releases and their DRA feature gates: what ``--kubernetes-version`` and
``--feature-gates`` mean for ``kubedevice dra``.

The table is the versioned specs of ``pkg/features/kube_features.go`` (kubernetes v1.36.3 and
v1.35.4; the 1.37 rows from v1.37's scheduler feature gates, the same specs) for the gates that
change what the API server accepts, what the scheduler allocates or what CEL declares. A
release knows a gate from its first spec on: ``DRAListTypeAttributes`` does not exist in 1.35,
so naming it there is refused as the 1.35 API server refuses it. Parsing and its messages follow
``featuregate.SetWithLogger`` / ``unsafeSetFromMap`` (k8s.io/component-base/featuregate).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

RELEASES = ("1.34", "1.35", "1.36", "1.37")
NEWEST = RELEASES[-1]


@dataclass(frozen=True)
class Spec:
    """One ``featuregate.FeatureSpec``: from ``version`` on, this default (and maybe locked)."""

    version: str
    default: bool
    locked: bool = False


def _s(version: str, default: bool, locked: bool = False) -> Spec:
    return Spec(version, default, locked)


# Gate -> its specs in version order (kube_features.go, defaultVersionedKubernetesFeatureGates).
SPECS: dict[str, tuple[Spec, ...]] = {
    "DRAAdminAccess": (_s("1.32", False), _s("1.34", True), _s("1.36", True, locked=True)),
    "DRAConsumableCapacity": (_s("1.34", False), _s("1.36", True)),
    "DRADerivedAttributes": (_s("1.37", False),),
    "DRADeviceBindingConditions": (_s("1.34", False), _s("1.36", True)),
    "DRADeviceCompatibilityGroups": (_s("1.37", False),),
    "DRADeviceTaintRules": (_s("1.35", False), _s("1.36", False), _s("1.37", True)),
    "DRADeviceTaints": (_s("1.33", False), _s("1.36", True), _s("1.37", True)),
    "DRAExtendedResource": (_s("1.34", False), _s("1.36", True), _s("1.37", True, locked=True)),
    # Default on in 1.37 only with a minimum compatibility version of 1.37, which a 1.37 server
    # (compatible with 1.36 by default) does not have.
    "DRAFractionalCapacityRange": (_s("1.37", False),),
    "DRAListTypeAttributes": (_s("1.36", False),),
    "DRANodeAllocatableResources": (_s("1.36", False),),
    "DRAOptionalNodeOperations": (_s("1.37", False),),
    "DRAPartitionableDevices": (_s("1.33", False), _s("1.36", True)),
    "DRAPrioritizedList": (_s("1.33", False), _s("1.34", True), _s("1.36", True), _s("1.37", True, locked=True)),
    "DRAResourceClaimDeviceStatus": (_s("1.32", False), _s("1.33", True), _s("1.37", True, locked=True)),
    "DRAResourceClaimGranularStatusAuthorization": (_s("1.36", True),),
    "DRAResourcePoolStatus": (_s("1.36", False),),
    "DRASchedulerFilterTimeout": (_s("1.34", True),),
    "DRAWorkloadResourceClaims": (_s("1.36", False), _s("1.37", False)),
    "DynamicResourceAllocation": (
        _s("1.26", False), _s("1.32", False), _s("1.34", True), _s("1.35", True, locked=True),
    ),
    "GenericWorkload": (_s("1.35", False), _s("1.37", False)),
}

# featureDependencies of kube_features.go: a gate on needs these on too.
DEPENDENCIES: dict[str, tuple[str, ...]] = {
    "DRAAdminAccess": ("DynamicResourceAllocation",),
    "DRAConsumableCapacity": ("DynamicResourceAllocation",),
    "DRADeviceBindingConditions": ("DynamicResourceAllocation", "DRAResourceClaimDeviceStatus"),
    "DRADeviceTaintRules": ("DRADeviceTaints",),
    "DRADeviceTaints": ("DynamicResourceAllocation",),
    "DRAExtendedResource": ("DynamicResourceAllocation",),
    "DRAListTypeAttributes": ("DynamicResourceAllocation",),
    "DRANodeAllocatableResources": ("DynamicResourceAllocation",),
    "DRAPartitionableDevices": ("DynamicResourceAllocation",),
    "DRAPrioritizedList": ("DynamicResourceAllocation",),
    "DRAResourceClaimGranularStatusAuthorization": ("DynamicResourceAllocation", "DRAResourceClaimDeviceStatus"),
    "DRAResourcePoolStatus": ("DynamicResourceAllocation",),
    "DRASchedulerFilterTimeout": ("DynamicResourceAllocation",),
    "DRAWorkloadResourceClaims": ("DynamicResourceAllocation", "GenericWorkload"),
}


class FeatureGateError(ValueError):
    """A ``--feature-gates`` value Kubernetes would refuse; the message is Kubernetes' own."""


def _minor(version: str) -> int:
    return int(version.split(".")[1])


def spec_at(gate: str, release: str) -> Spec | None:
    """``featureSpecAtEmulationVersion``: the last spec not newer than the release, if any."""
    current = None
    for spec in SPECS[gate]:
        if _minor(spec.version) <= _minor(release):
            current = spec
    return current


def at_least(release: str, minimum: str) -> bool:
    """Whether ``release`` is ``minimum`` or newer: for rules a release's code changed without a gate."""
    return _minor(release) >= _minor(minimum)


def check_release(release: str) -> str:
    if release not in RELEASES:
        raise FeatureGateError(f"unsupported Kubernetes version {release!r}: expected one of {', '.join(RELEASES)}")
    return release


def defaults(release: str = NEWEST) -> dict[str, bool]:
    """Every gate the release knows, at its default."""
    check_release(release)
    return {gate: spec.default for gate in SPECS if (spec := spec_at(gate, release)) is not None}


def parse(value: str) -> dict[str, bool]:
    """``Name=bool,…`` as ``SetWithLogger`` splits it; empty items are skipped."""
    parsed: dict[str, bool] = {}
    for item in value.split(","):
        if not item:
            continue
        key, eq, raw = item.partition("=")
        key = key.strip()
        if not eq:
            raise FeatureGateError(f"missing bool value for {key}")
        parsed[key] = _parse_bool(key, raw.strip())
    return parsed


_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")


def _parse_bool(key: str, raw: str) -> bool:
    """``strconv.ParseBool`` and the message Kubernetes wraps around its error."""
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise FeatureGateError(f'invalid value of {key}={raw}, err: strconv.ParseBool: parsing "{raw}": invalid syntax')


def effective(release: str = NEWEST, overrides: Mapping[str, bool] | None = None) -> dict[str, bool]:
    """The release's defaults with ``overrides`` on top, refused as ``unsafeSetFromMap`` refuses.

    An unknown name stops at once; a locked gate set against its default is refused; then the
    dependencies of every enabled gate are checked (reported in name order: Go walks a map).
    """
    gates = defaults(release)
    for name, value in (overrides or {}).items():
        if name not in gates:
            raise FeatureGateError(f"unrecognized feature gate: {name}")
        spec = spec_at(name, release)
        if spec is not None and spec.locked and spec.default != value:
            raise FeatureGateError(
                f"cannot set feature gate {name} to {_go_bool(value)}, feature is locked to {_go_bool(spec.default)}"
            )
        gates[name] = value
    for name in sorted(DEPENDENCIES):
        if not gates.get(name):
            continue
        off = [dep for dep in DEPENDENCIES[name] if dep in gates and not gates[dep]]
        if off:
            raise FeatureGateError(f"{name} is enabled, but depends on features that are disabled: [{' '.join(off)}]")
    return gates


def _go_bool(value: bool) -> str:
    return "true" if value else "false"


def from_flags(release: str, feature_gates: str | None) -> dict[str, bool]:
    """What ``--kubernetes-version`` and ``--feature-gates`` together select."""
    check_release(release)
    return effective(release, parse(feature_gates) if feature_gates else None)
