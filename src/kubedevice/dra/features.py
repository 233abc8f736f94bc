"""Kubernetes releases, their DRA feature gates and the API versions they serve: what
``--kubernetes-version``, ``--feature-gates`` and ``--runtime-config`` mean for ``kubedevice dra``.

The table is the versioned specs of ``pkg/features/kube_features.go`` (kubernetes v1.31.14 to
v1.37.2; 1.31's gates were not versioned yet, and 1.32's are in ``versioned_kube_features.go``)
for every gate of DRA: what the API server accepts, what the scheduler allocates or what CEL
declares. A release knows a gate from its first spec on until the release that removed it:
``DRAListTypeAttributes`` does not exist in 1.35, ``DRAControlPlaneController`` (classic DRA)
only in 1.31, and naming one where it does not exist is refused as that API server refuses it.
Parsing and its messages follow ``featuregate.SetWithLogger`` / ``unsafeSetFromMap``
(k8s.io/component-base/featuregate); gates depend on others from 1.35 (``featureDependencies``).

No feature gate decides whether the API server serves a kind: ``storage_resource.go`` registers
each ``resource.k8s.io`` resource wherever its API version is enabled (``--runtime-config``), and
every gate only changes what is done with the objects (kubernetes v1.34.4 to v1.37.2, found by
the live differential too). :func:`not_served` says so per release.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..errors import KubedeviceError

# Re-exported (PEP 484's ``X as X``): every DRA module finds the releases here.
from ..releases import NEWEST as NEWEST  # noqa: PLC0414
from ..releases import RELEASES as RELEASES  # noqa: PLC0414
from ..releases import at_least as at_least  # noqa: PLC0414
from ..releases import minor


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
    "DRAControlPlaneController": (_s("1.31", False),),
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
    "DRAPartitionableDevicesType": (_s("1.37", False),),
    "DRAPrioritizedList": (_s("1.33", False), _s("1.34", True), _s("1.36", True), _s("1.37", True, locked=True)),
    "DRAResourceClaimDeviceStatus": (_s("1.32", False), _s("1.33", True), _s("1.37", True, locked=True)),
    "DRAResourceClaimGranularStatusAuthorization": (_s("1.36", True),),
    "DRAResourcePoolStatus": (_s("1.36", False),),
    "DRASchedulerFilterTimeout": (_s("1.34", True),),
    "DRAWorkloadResourceClaims": (_s("1.36", False), _s("1.37", False)),
    "DynamicResourceAllocation": (
        _s("1.26", False),
        _s("1.32", False),
        _s("1.34", True),
        _s("1.35", True, locked=True),
    ),
    "GenericWorkload": (_s("1.35", False), _s("1.37", False)),
}

REMOVED = {"DRAControlPlaneController": "1.32"}
"""Gate -> the first release without it (classic DRA, its control-plane controller, went in 1.32)."""

# featureDependencies of kube_features.go (1.35 on): a gate on needs these on too.
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
    "DRAPartitionableDevicesType": ("DynamicResourceAllocation", "DRAPartitionableDevices", "DRAResourcePoolStatus"),
    "DRAPrioritizedList": ("DynamicResourceAllocation",),
    "DRAResourceClaimGranularStatusAuthorization": ("DynamicResourceAllocation", "DRAResourceClaimDeviceStatus"),
    "DRAResourcePoolStatus": ("DynamicResourceAllocation",),
    "DRASchedulerFilterTimeout": ("DynamicResourceAllocation",),
    "DRAWorkloadResourceClaims": ("DynamicResourceAllocation", "GenericWorkload"),
}


class FeatureGateError(KubedeviceError, ValueError):
    """A ``--feature-gates`` value Kubernetes would refuse; the message is Kubernetes' own."""


def spec_at(gate: str, release: str) -> Spec | None:
    """``featureSpecAtEmulationVersion``: the last spec not newer than the release, if any (none
    where the release has no such gate any more)."""
    removed = REMOVED.get(gate)
    if removed is not None and at_least(release, removed):
        return None
    current = None
    for spec in SPECS[gate]:
        if minor(spec.version) <= minor(release):
            current = spec
    return current


def check_release(release: str) -> str:
    if release not in RELEASES:
        raise FeatureGateError(f"unsupported Kubernetes version {release!r}: expected one of {', '.join(RELEASES)}")
    return release


def defaults(release: str = NEWEST) -> dict[str, bool]:
    """Every gate the release knows, at its default."""
    check_release(release)
    return {gate: spec.default for gate in SPECS if (spec := spec_at(gate, release)) is not None}


def all_on(release: str = NEWEST) -> dict[str, bool]:
    """Every gate the release knows, on (none is locked off): the strictest reading of an object,
    which a driver's own check of what it writes takes; whether a cluster's gates keep a field is
    that API server's to say."""
    return dict.fromkeys(defaults(release), True)


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
    for name in sorted(DEPENDENCIES) if at_least(release, "1.35") else ():
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


# --- the API versions a release serves (kube-apiserver's --runtime-config) ---------------------

API_GROUP = "resource.k8s.io"
RESOURCES = {
    "DeviceClass": "deviceclasses",
    "ResourceSlice": "resourceslices",
    "ResourceClaim": "resourceclaims",
    "ResourceClaimTemplate": "resourceclaimtemplates",
    "DeviceTaintRule": "devicetaintrules",
    "PodSchedulingContext": "podschedulingcontexts",
}
_CORE_KINDS = ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice")
_BEFORE_136 = {"v1alpha3": ("DeviceTaintRule",), "v1beta1": _CORE_KINDS, "v1beta2": _CORE_KINDS, "v1": _CORE_KINDS}
_IN_136 = {**_BEFORE_136, "v1beta2": (*_CORE_KINDS, "DeviceTaintRule")}
API_KINDS: dict[str, dict[str, tuple[str, ...]]] = {
    "1.31": {"v1alpha3": (*_CORE_KINDS, "PodSchedulingContext")},
    "1.32": {"v1alpha3": _CORE_KINDS, "v1beta1": _CORE_KINDS},
    "1.33": {"v1alpha3": (*_CORE_KINDS, "DeviceTaintRule"), "v1beta1": _CORE_KINDS, "v1beta2": _CORE_KINDS},
    "1.34": _BEFORE_136,
    "1.35": _BEFORE_136,
    "1.36": _IN_136,
    "1.37": {**_IN_136, "v1": (*_CORE_KINDS, "DeviceTaintRule")},
}
"""Release -> API version -> the kinds its REST storage registers (pkg/registry/resource/rest/
storage_resource.go): 1.31 has v1alpha3 only, with classic DRA's PodSchedulingContext; v1beta1
comes with 1.32, v1beta2 with 1.33 (and DeviceTaintRules in v1alpha3), v1 with 1.34, when
v1alpha3 keeps DeviceTaintRules alone."""


def default_api_versions(release: str) -> tuple[str, ...]:
    """Enabled unless ``--runtime-config`` says otherwise: alphas and betas are off by default
    (``DefaultAPIResourceConfigSource``, pkg/controlplane/instance.go), so before 1.34, which
    brought v1, the API server serves no DRA kind without ``--runtime-config``."""
    return ("v1",) if at_least(release, "1.34") else ()


class RuntimeConfigError(KubedeviceError, ValueError):
    """A ``--runtime-config`` value kube-apiserver would refuse; the message is its own."""


@dataclass(frozen=True)
class APIConfig:
    """The ``resource.k8s.io`` part of kube-apiserver's resource config (``serverstorage.ResourceConfig``)."""

    versions: Mapping[str, bool]
    resources: Mapping[tuple[str, str], bool] = field(default_factory=dict)

    def enabled(self, version: str, resource: str) -> bool:
        """``ResourceEnabled``: a resource's own setting, else its version's."""
        explicit = self.resources.get((version, resource))
        return self.versions.get(version, False) if explicit is None else explicit


_VERSION_MATCHERS = (  # groupVersionMatchersOrder of apiserver's resourceconfig/helpers.go
    ("api/all", re.compile(r".*")),
    ("api/ga", re.compile(r"v\d+\Z")),
    ("api/beta", re.compile(r"v\d+beta\d+\Z")),
    ("api/alpha", re.compile(r"v\d+alpha\d+\Z")),
)


def _configuration_map(value: str) -> dict[str, str]:
    """``cliflag.ConfigurationMap.Set``: ``key[=value]`` items split at commas, trimmed."""
    parsed: dict[str, str] = {}
    for item in value.split(","):
        if item:
            key, _, raw = item.partition("=")
            parsed[key.strip()] = raw.strip()
    return parsed


def runtime_config(release: str, value: str | None) -> APIConfig:
    """The release's default API versions with ``--runtime-config`` on top, as
    ``MergeAPIResourceConfigs`` applies it: ``api/all|ga|beta|alpha`` first, then group versions,
    then single resources. Keys of other groups are not ours to judge and are skipped."""
    check_release(release)
    versions = {version: version in default_api_versions(release) for version in API_KINDS[release]}
    resources: dict[tuple[str, str], bool] = {}
    overrides = _configuration_map(value or "")
    for key, pattern in _VERSION_MATCHERS:
        if key in overrides:
            if overrides[key] not in ("true", "false"):
                raise RuntimeConfigError(f"invalid value {key}={overrides[key]}")
            versions |= {v: overrides[key] == "true" for v in versions if pattern.match(v)}
    for key, raw in overrides.items():
        tokens = key.split("/")
        if key in dict(_VERSION_MATCHERS) or not 2 <= len(tokens) <= 3 or tokens[0] != API_GROUP:
            continue
        if tokens[1] not in versions:
            raise RuntimeConfigError(f"group version {API_GROUP}/{tokens[1]} that has not been registered")
        enabled = _runtime_bool(key, raw)
        if len(tokens) == 2:
            versions[tokens[1]] = enabled
        elif tokens[2] != tokens[2].lower():
            raise RuntimeConfigError(
                f'invalid key {key}: group/version/resource and resource is always lowercase plural, not "{tokens[2]}"'
            )
        else:
            resources[(tokens[1], tokens[2])] = enabled
    return APIConfig(versions, resources)


def _runtime_bool(key: str, raw: str) -> bool:
    """``getRuntimeConfigValue``: empty is true, else ``strconv.ParseBool``."""
    if raw in ("", *_TRUE):
        return True
    if raw in _FALSE:
        return False
    raise RuntimeConfigError(f'invalid value of {key}: {raw}, err: strconv.ParseBool: parsing "{raw}": invalid syntax')


def not_served(
    kind: str, api_version: str, release: str, gates: Mapping[str, bool], api: APIConfig | None = None
) -> str | None:
    """Why the API server of ``release`` has no ``kind`` at ``api_version`` (kubectl's "no matches
    for kind"), or None when it serves it.

    A kind the release has in no such version is never served. With ``api`` (``--runtime-config``
    given) the answer is exact: served where its version or resource is enabled, whatever the
    gates. Without it the object's version is taken as enabled, but for a DeviceTaintRule, which
    is taken as served only where the gate of its feature is on (``DRADeviceTaints`` in 1.34,
    ``DRADeviceTaintRules`` from 1.35): a guess at a cluster that turns the feature on and
    enables its API with it, since the kind's versions are all off by default before 1.37.
    """
    version = api_version.rpartition("/")[2]
    head = f'no matches for kind "{kind}" in version "{api_version}"'
    if kind not in API_KINDS[release].get(version, ()):
        return f"{head} (Kubernetes {release} has no {kind} in {version})"
    if api is not None:
        if api.enabled(version, RESOURCES[kind]):
            return None
        return f"{head} (off in --runtime-config; {API_GROUP}/{version}=true enables it)"
    gate = "DRADeviceTaintRules" if at_least(release, "1.35") else "DRADeviceTaints"
    if kind != "DeviceTaintRule" or gates.get(gate):
        return None
    return (
        f"{head} ({gate} is off in Kubernetes {release}; --feature-gates {gate}=true, or --runtime-config "
        f"{API_GROUP}/{version}=true to say the API server serves it)"
    )
