"""``kubedevice dra``: validate, explain, allocate and generate DRA objects offline.

Exit codes: 0 all good; 1 something is invalid, does not match or cannot be allocated;
2 a file cannot be read or parsed or holds no object, an object of a command's input is one the
API server would not store (judged as ``validate`` judges it, :mod:`.inputs`), or the command line
is wrong (one ``kubedevice:`` line on stderr, no traceback; see :mod:`kubedevice.errors`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from ..errors import fail
from . import features, inputs, models
from .convert import convert_command
from .explain import explain, render, requests_using, verdicts_json
from .models import DeviceClass, ResourceClaim, ResourceSlice, of_kind
from .slices import DEFAULT_TAINT_EFFECT, Sharing, SliceError, slices_for
from .strategy import drop_disabled_fields
from .structured import AllocationError, Node, Unallocatable, allocate, allocated_devices
from .validation import Path as FieldPath
from .validation import validate, validate_dns_subdomain, validate_driver_name

app = typer.Typer(
    help="Dynamic Resource Allocation: validate, explain and allocate like the API server and scheduler.",
    no_args_is_help=True,
    add_completion=False,  # loaded as a subcommand of kubedevice, which has no completion either
    rich_markup_mode=None,  # plain help like kubedevice's own: rich's adds type noise ("-h <bool>")
)

Output = Literal["yaml", "json"]

KubernetesVersion = Annotated[
    str,
    typer.Option(
        "--kubernetes-version",
        metavar="|".join(features.RELEASES),
        help="The release whose feature-gate defaults apply.",
    ),
]
FeatureGates = Annotated[
    str | None,
    typer.Option("--feature-gates", metavar="NAME=BOOL,...", help="Feature gates on top of the release's defaults."),
]


def gates_from_flags(release: str, feature_gates: str | None) -> dict[str, bool]:
    """The effective gates, or exit 2 with Kubernetes' own message naming the bad gate."""
    try:
        return features.from_flags(release, feature_gates)
    except features.FeatureGateError as error:
        option = "--kubernetes-version" if release not in features.RELEASES else "--feature-gates"
        fail(f"{option}: {error}")


@app.command("validate")
def validate_command(
    files: Annotated[
        list[Path],
        # described in the docstring: typer >= 0.2x would list it with its Python type (<list[Path]>)
        typer.Argument(metavar="FILE", hidden=True, show_default=False),
    ],
    kubernetes_version: KubernetesVersion = features.NEWEST,
    feature_gates: FeatureGates = None,
    runtime_config: Annotated[
        str | None,
        typer.Option(
            "--runtime-config",
            metavar="resource.k8s.io/VERSION=BOOL,...",
            help="The API versions the API server enables, as its own flag: which objects it serves.",
        ),
    ] = None,
) -> None:
    """Validate DeviceClasses, ResourceSlices, ResourceClaims, ResourceClaimTemplates and
    DeviceTaintRules as the API server of --kubernetes-version would (fields of disabled
    features are dropped, not refused).

    Each FILE is YAML or JSON; kinds may be mixed, and objects of other API groups (a Pod) are
    listed as not checked. Prints one line per problem, placed at the field as
    file:line:column, and a summary, all on stdout. Exits 1 if any object is invalid,
    2 if a FILE cannot be read or parsed or holds no object. An object the API server would not
    serve is a problem too: a kind the release lacks in that version, or a version off in
    --runtime-config (without it the version is taken as enabled, and a DeviceTaintRule as served
    where its feature's gate is on).
    """
    gates = gates_from_flags(kubernetes_version, feature_gates)
    api = _api_config(kubernetes_version, runtime_config)
    problems = checked = others = 0
    documents = [inputs.documents(path) for path in files]  # a bad or empty file: exit 2 before any report
    for document in (d for docs in documents for d in docs):
        if inputs.category(document.data) != "dra":
            others += 1
            typer.echo(inputs.not_judged(document))
            continue
        checked += 1
        verdict = inputs.judge(document, kubernetes_version, gates, api)
        problems += bool(verdict.problems)
        for line in verdict.problems:
            typer.echo(line)
    noun = "object" if checked == 1 else "objects"
    rest = f", {others} other {'object' if others == 1 else 'objects'} not checked" if others else ""
    if problems:
        typer.echo(f"{problems} of {checked} {noun} invalid{rest}")
        raise typer.Exit(1)
    typer.echo(f"{checked} {noun} valid{rest}")


def _api_config(release: str, runtime_config: str | None) -> features.APIConfig | None:
    """The API versions ``--runtime-config`` enables (None: not given), or exit 2 with kube-apiserver's words."""
    if runtime_config is None:
        return None
    try:
        return features.runtime_config(release, runtime_config)  # the release was checked with the gates
    except features.RuntimeConfigError as error:
        fail(f"--runtime-config: {error}")


def _one_claim(path: Path | None, release: str, gates: dict[str, bool]) -> ResourceClaim | None:
    if path is None:
        return None
    claims = of_kind(inputs.read_one(path, release, gates), ResourceClaim)
    if len(claims) != 1:
        fail(f"{path}: expected exactly one ResourceClaim, found {len(claims)}")
    return claims[0]


def _classes_to_explain(
    path: Path, claim: ResourceClaim | None, release: str, gates: dict[str, bool]
) -> list[DeviceClass]:
    classes = of_kind(inputs.read_one(path, release, gates), DeviceClass)
    if not classes:
        fail(f"{path}: no DeviceClass found")
    if claim is not None:
        classes = [c for c in classes if requests_using(c, claim)]
        if not classes:
            fail(f"{path}: no DeviceClass used by the claim's requests")
    return classes


@app.command("explain")
def explain_command(
    class_file: Annotated[Path, typer.Option("--class", metavar="FILE", help="File with the DeviceClass(es).")],
    slices_file: Annotated[Path, typer.Option("--slices", metavar="FILE", help="File with the ResourceSlices.")],
    claim_file: Annotated[
        Path | None, typer.Option("--claim", metavar="FILE", help="A ResourceClaim whose request selectors count too.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", metavar="", help="Machine-readable output.")] = False,
    *,
    kubernetes_version: KubernetesVersion = features.NEWEST,
    feature_gates: FeatureGates = None,
    pod_files: Annotated[
        list[Path] | None,
        typer.Option(
            "--pod",
            metavar="FILE",
            help="Pods, their claims, templates, Node: why each is scheduled or not (repeatable).",
        ),
    ] = None,
    node: Annotated[str | None, typer.Option("--node", metavar="NODE", help="With --pod: the node.")] = None,
    labels: Annotated[
        list[str] | None, typer.Option("--label", metavar="KEY=VALUE", help="With --pod: a node label (repeatable).")
    ] = None,
) -> None:
    """For each device, whether each selector matches; for a miss, the failing clause or the error.

    Every object is judged as validate judges it: one the API server would not store (a selector
    that does not compile, say) exits 2 with validate's line. Exits 1 when some class matches no
    device at all. With --pod and --node: per pod, its claims' classes, then whether
    it can be scheduled on the node and, if not, the first request or constraint that fails and
    what rules devices out; exits 1 when some pod cannot be scheduled.
    """
    _pod_flags(pod_files, claim_file, node, labels)
    gates = gates_from_flags(kubernetes_version, feature_gates)
    if pod_files:
        _explain_pods(
            pod_files, (class_file, slices_file), node, labels or [], (kubernetes_version, gates), as_json=as_json
        )
        return
    claim = _one_claim(claim_file, kubernetes_version, gates)
    classes = _classes_to_explain(class_file, claim, kubernetes_version, gates)
    slices = of_kind(inputs.read_one(slices_file, kubernetes_version, gates), ResourceSlice)
    report: list[dict[str, Any]] = []
    unmatched = 0
    for device_class in classes:
        verdicts = explain(device_class, slices, claim, gates)
        unmatched += not any(v.matched for v in verdicts)
        if as_json:
            report.append(verdicts_json(device_class, verdicts))
        else:
            typer.echo(f"DeviceClass {device_class.metadata.name}:")
            typer.echo(render(verdicts), nl=False)
    if as_json:
        typer.echo(json.dumps(report, indent=2))
    if unmatched:
        raise typer.Exit(1)


def _pod_flags(pod_files: list[Path] | None, claim: Path | None, node: str | None, labels: list[str] | None) -> None:
    """``explain``'s two modes take different flags: one given to the other mode is an error, not ignored."""
    if pod_files:
        if claim is not None:
            fail("--claim does not go with --pod: the pods' files hold their claims")
        if node is None:
            fail("--pod needs --node")
        _check_names(node, None)
    elif node is not None or labels:
        fail("--node and --label go with --pod: the node is where the pods would be scheduled")


def _explain_pods(
    pod_files: list[Path],
    files: tuple[Path, Path],
    node: str | None,
    labels: list[str],
    release_gates: tuple[str, dict[str, bool]],
    *,
    as_json: bool,
) -> None:
    from .pod_cli import explain_pods  # noqa: PLC0415 - only with --pod

    assert node is not None  # _pod_flags
    release, gates = release_gates
    given = inputs.read(pod_files, release, gates, core=True)
    if not given.pods:
        fail("--pod: no Pod found")
    classes = of_kind(inputs.read_one(files[0], release, gates), DeviceClass)
    slices = of_kind(inputs.read_one(files[1], release, gates), ResourceSlice)
    if not explain_pods(given, classes, slices, (node, _parse_labels(labels)), gates, as_json=as_json):
        raise typer.Exit(1)


def _parse_labels(labels: Sequence[str]) -> dict[str, str]:
    parsed = {}
    for label in labels:
        key, eq, value = label.partition("=")
        if not eq or not key:
            fail(f"--label {label!r}: expected KEY=VALUE")
        parsed[key] = value
    return parsed


@app.command("allocate")
def allocate_command(
    files: Annotated[
        list[Path],
        typer.Argument(metavar="FILE", hidden=True, show_default=False),  # described in the docstring
    ],
    node: Annotated[str, typer.Option("--node", metavar="NODE", help="The node to allocate on.")],
    labels: Annotated[
        list[str] | None, typer.Option("--label", metavar="KEY=VALUE", help="A node label (repeatable).")
    ] = None,
    output: Annotated[str, typer.Option("--output", "-o", metavar="yaml|json", help="Output format.")] = "yaml",
    *,
    kubernetes_version: KubernetesVersion = features.NEWEST,
    feature_gates: FeatureGates = None,
) -> None:
    """Allocate all claims together on one node like the scheduler; print them with status.allocation.

    The FILEs hold the DeviceClasses, ResourceSlices and ResourceClaims (YAML or JSON). Claims
    that already have a status.allocation keep it, and their devices count as in use. Objects
    are read as the API server of --kubernetes-version stores them. Exits 1 with the reason
    when the claims cannot be allocated. With Pods in the FILEs (and their ResourceClaimTemplates,
    and the Node for its labels and allocatable), each pod is scheduled in turn with the claims
    it names, makes from templates or needs for extended resources; the output is those
    claims, reserved for their pods.
    """
    from .pod_cli import allocate_pods  # noqa: PLC0415 - reads Pods as well

    fmt = _output(output)
    _check_names(node, None)
    gates = gates_from_flags(kubernetes_version, feature_gates)
    given = inputs.read(files, kubernetes_version, gates, core=True)
    if given.pods:
        allocate_pods(given, node, _parse_labels(labels or []), fmt, gates)
        return
    objects = given.objects
    claims = of_kind(objects, ResourceClaim)
    if not claims:
        fail("no ResourceClaim given")
    pending = [c for c in claims if not (c.status or {}).get("allocation")]
    in_use = allocated_devices([c for c in claims if c not in pending])
    target = Node(node, _parse_labels(labels or []))
    try:
        results = allocate(
            pending,
            of_kind(objects, DeviceClass),
            of_kind(objects, ResourceSlice),
            target,
            in_use,
            features=gates,
            release=kubernetes_version,
        )
    except (AllocationError, Unallocatable) as error:
        fail(f"cannot allocate on node {node}: {error}", 1)
    allocated = []
    for result in results:
        claim = result.claim.model_copy(deep=True)
        claim.status = {**(claim.status or {}), "allocation": result.as_status(node)}
        allocated.append(claim)
    typer.echo(models.dump(list(allocated), fmt), nl=False)


@app.command("available")
def available_command(
    files: Annotated[
        list[Path],
        typer.Argument(metavar="FILE", hidden=True, show_default=False),  # described in the docstring
    ],
    node: Annotated[
        str | None, typer.Option("--node", metavar="NODE", help="Only the devices this node can use.")
    ] = None,
    labels: Annotated[
        list[str] | None,
        typer.Option("--label", metavar="KEY=VALUE", help="A label of --node, for nodeSelector slices (repeatable)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", metavar="", help="Machine-readable output.")] = False,
    *,
    kubernetes_version: KubernetesVersion = features.NEWEST,
    feature_gates: FeatureGates = None,
) -> None:
    """What is free, per pool and the nodes it serves: devices, shared counters and capacity left.

    The FILEs hold ResourceSlices and ResourceClaims (YAML or JSON, kinds mixed; other
    resource.k8s.io objects are checked as validate checks them and not used, and objects of
    other API groups, such as Pods, are ignored). Devices in a claim's status.allocation are in
    use, except adminAccess results, as the scheduler counts them. A device is free, shared (a
    share of a device that allows multiple allocations), allocated, or blocked (free but its
    shared counters are used up). The objects are read as the API server of --kubernetes-version
    stores them: without DRAPartitionableDevices no counters are shared, without
    DRAConsumableCapacity no device is shared between claims.
    """
    from .available import InputError, as_json_report, available, render  # noqa: PLC0415 - this command only

    gates = gates_from_flags(kubernetes_version, feature_gates)
    loaded = inputs.read(files, kubernetes_version, gates).placed
    slices = [(source.rpartition(":")[0], obj) for source, obj in loaded if isinstance(obj, ResourceSlice)]
    claims = [(source.rpartition(":")[0], obj) for source, obj in loaded if isinstance(obj, ResourceClaim)]
    if node is not None:
        _check_names(node, None)
    elif labels:
        fail("--label needs --node")
    target = Node(node, _parse_labels(labels or [])) if node is not None else None
    try:
        pools = available(slices, claims, target)
    except InputError as error:
        fail(str(error))
    typer.echo(json.dumps(as_json_report(pools), indent=2) if as_json else render(pools), nl=as_json)


def _output(value: str) -> Output:
    if value not in ("yaml", "json"):
        fail(f"--output {value!r}: expected yaml or json")
    return "yaml" if value == "yaml" else "json"


@app.command("slices")
def slices_command(
    config: Annotated[Path, typer.Option("--config", metavar="FILE", help="The kubedevice config file.")],
    node: Annotated[
        str, typer.Option("--node", metavar="NODE", help="Node name: the pool and nodeName of the slices.")
    ],
    host_root: Annotated[
        Path | None,
        typer.Option("--host-root", metavar="DIR", help="Where the host's / is (default: the config's host_root)."),
    ] = None,
    driver: Annotated[
        str | None,
        typer.Option("--driver", metavar="NAME", help="DRA driver name [default: dra.driver, else kubedevice.io]."),
    ] = None,
    output: Annotated[str, typer.Option("--output", "-o", metavar="yaml|json", help="Output format.")] = "yaml",
    *,
    kubernetes_version: KubernetesVersion = features.NEWEST,
    feature_gates: FeatureGates = None,
) -> None:
    """Print ResourceSlices for the devices a kubedevice config discovers, ready to apply.

    With the config's dra.driver these are the slices 'kubedevice serve' publishes (unhealthy
    devices tainted as dra.unhealthy_taint says), but for the pool generation and the Node
    owner reference, which only the running driver knows, and a taint's timeAdded, which the
    API server sets. They are printed as the API server of --kubernetes-version stores them:
    the fields of its disabled features (device taints, shared counters, consumable capacity)
    dropped.
    """
    fmt = _output(output)
    _check_names(node, driver)
    gates = gates_from_flags(kubernetes_version, feature_gates)
    discover = _discovery()
    try:
        resources, dra = discover(config, host_root)
        configured_driver, effect = (dra.driver, dra.taint_effect) if dra is not None else (None, DEFAULT_TAINT_EFFECT)
        sharing: Sharing = dra.sharing if dra is not None else "replicas"
        slices = slices_for(driver or configured_driver or "kubedevice.io", node, resources, effect, sharing)
    except SliceError as error:
        fail(str(error))
    except (OSError, ValueError) as error:
        fail(f"{config}: {error}")
    stored = [drop_disabled_fields(s, gates, kubernetes_version) for s in slices]
    problems = [f"{s.metadata.name}: {e}" for s in stored for e in validate(s, gates, kubernetes_version)]
    if problems:
        fail(f"generated slice is invalid: {problems[0]}", 1)
    typer.echo(models.dump(list(stored), fmt), nl=False)


def _check_names(node: str, driver: str | None) -> None:
    """A bad ``--node`` or ``--driver`` is a usage error, found before any discovery runs."""
    problems = validate_dns_subdomain(node, FieldPath("--node"))
    if driver is not None:
        problems += validate_driver_name(driver, FieldPath("--driver"))
    if problems:
        fail(str(problems[0]))


def _discovery() -> Callable[[Path, Path | None], Any]:
    """Config loading and discovery are imported only for this command: the rest needs neither."""
    from kubedevice.config import ConfigError, load_config  # noqa: PLC0415 - lazy on purpose
    from kubedevice.sources import HostRoot, HostRootError, discover_resources  # noqa: PLC0415 - lazy on purpose

    from .deviceattribute import with_standard_attributes  # noqa: PLC0415 - lazy on purpose

    def run(config: Path, host_root: Path | None) -> Any:
        try:
            loaded = load_config(config)
            root = host_root or loaded.host_root
            resources = [
                (name, devices, with_standard_attributes(HostRoot(root), attrs))  # as the driver publishes them
                for name, devices, attrs in discover_resources(loaded, root)
            ]
            return resources, loaded.dra
        except (ConfigError, HostRootError) as error:
            fail(str(error))

    return run


def _register_cel() -> None:
    """``dra cel`` comes from the CEL engine's package when it is installed alongside."""
    try:
        from .cel.cli import cel_command  # type: ignore[import-not-found, unused-ignore]  # noqa: PLC0415
    except ImportError:
        return
    app.command("cel")(cel_command)


_register_cel()
app.command("convert")(convert_command)
