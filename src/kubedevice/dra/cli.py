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

from ..errors import UsageError, fail
from . import features, inputs, models
from .convert import convert_command
from .explain import explain, render, requests_using, verdicts_json
from .live.options import Context, Kubeconfig, Namespace, ServerRelease, pod_name
from .models import DeviceClass, DRAObject, ResourceClaim, ResourceSlice, of_kind
from .slices import DEFAULT_TAINT_EFFECT, Sharing, SliceError, slices_for
from .strategy import drop_disabled_fields
from .structured import AllocationError, Node, Unallocatable, allocate, allocated_devices, claim_ref
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


def _live(kubeconfig: Path | None, context: str | None, namespace: str | None = None) -> Any:
    """The cluster as input (no FILE given): the access and the commands, imported only then."""
    from .live import cli as live  # noqa: PLC0415 - the API client only when the cluster is read
    from .live.cluster import Access  # noqa: PLC0415

    return live, Access(kubeconfig, context, namespace)


def _cluster_flags_with_files(kubeconfig: Path | None, context: str | None) -> None:
    """With FILEs the cluster is not read; a ``--kubeconfig`` or ``--context`` given anyway is still
    resolved, so that a bad one is one line (exit 2) rather than silently ignored."""
    if kubeconfig is not None or context is not None:
        _, access = _live(kubeconfig, context)
        access.config()


def _gates_for(release: str | None, feature_gates: str | None) -> Callable[[str], dict[str, bool]]:
    """The flags checked now (before the cluster is asked), the gates computed for the release found."""
    gates_from_flags(_release(release), feature_gates)
    return lambda found: gates_from_flags(found if release is None else release, feature_gates)


def _release(given: str | None) -> str:
    """``--kubernetes-version``, or the newest release when it is not given (with FILEs)."""
    return features.NEWEST if given is None else given


def _as_stored(objects: Sequence[DRAObject], gates: dict[str, bool], release: str) -> list[DRAObject]:
    """The objects as that release's API server stores them: fields of disabled features dropped."""
    return [drop_disabled_fields(obj, gates, release) for obj in objects]


@app.command("validate")
def validate_command(
    files: Annotated[
        list[Path] | None,
        # described in the docstring: typer >= 0.2x would list it with its Python type (<list[Path]>)
        typer.Argument(metavar="FILE", hidden=True, show_default=False),
    ] = None,
    *,
    kubernetes_version: ServerRelease = None,
    feature_gates: FeatureGates = None,
    runtime_config: Annotated[
        str | None,
        typer.Option(
            "--runtime-config",
            metavar="resource.k8s.io/VERSION=BOOL,...",
            help="The API versions the API server enables, as its own flag: which objects it serves.",
        ),
    ] = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
) -> None:
    """Validate DeviceClasses, ResourceSlices, ResourceClaims, ResourceClaimTemplates and
    DeviceTaintRules as the API server of --kubernetes-version would (fields of disabled
    features are dropped, not refused).

    Each FILE is YAML or JSON (- for standard input); kinds may be mixed, and objects of other
    API groups (a Pod) are listed as not checked. Prints one line per problem, placed at the field as
    file:line:column, and a summary, all on stdout. Exits 1 if any object is invalid,
    2 if a FILE cannot be read or parsed or holds no object. An object the API server would not
    serve is a problem too: a kind the release lacks in that version, or a version off in
    --runtime-config (without it the version is taken as enabled, and a DeviceTaintRule as served
    where its feature's gate is on).

    Without FILEs, every DeviceClass, ResourceSlice, ResourceClaim and ResourceClaimTemplate
    stored in the cluster (--kubeconfig, --context) is judged, as the API server's release (or
    --kubernetes-version) would judge it.
    """
    if not files:
        if runtime_config is not None:
            fail("--runtime-config goes with FILEs: the cluster's API server says what it serves")
        live, access = _live(kubeconfig, context)
        live.validate_command(access, kubernetes_version, _gates_for(kubernetes_version, feature_gates))
        return
    _cluster_flags_with_files(kubeconfig, context)
    release = _release(kubernetes_version)
    gates = gates_from_flags(release, feature_gates)
    api = _api_config(release, runtime_config)
    problems = checked = others = 0
    documents = [inputs.documents(path) for path in files]  # a bad or empty file: exit 2 before any report
    for document in (d for docs in documents for d in docs):
        if inputs.category(document.data) != "dra":
            others += 1
            typer.echo(inputs.not_judged(document))
            continue
        checked += 1
        verdict = inputs.judge(document, release, gates, api)
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


def _classes_to_explain(classes: list[DeviceClass], where: str, claim: ResourceClaim | None) -> list[DeviceClass]:
    if not classes:
        fail(f"{where}: no DeviceClass found")
    if claim is not None:
        classes = [c for c in classes if requests_using(c, claim)]
        if not classes:
            fail(f"{where}: no DeviceClass used by the claim's requests")
    return classes


@app.command("explain")
def explain_command(
    target: Annotated[str | None, typer.Argument(metavar="pod/NAME", hidden=True, show_default=False)] = None,
    class_file: Annotated[
        Path | None,
        typer.Option("--class", metavar="FILE", help="File with the DeviceClass(es) [default: the cluster's]."),
    ] = None,
    slices_file: Annotated[
        Path | None,
        typer.Option("--slices", metavar="FILE", help="File with the ResourceSlices [default: the cluster's]."),
    ] = None,
    claim_file: Annotated[
        Path | None, typer.Option("--claim", metavar="FILE", help="A ResourceClaim whose request selectors count too.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", metavar="", help="Machine-readable output.")] = False,
    *,
    kubernetes_version: ServerRelease = None,
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
    namespace: Namespace = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
) -> None:
    """For each device, whether each selector matches; for a miss, the failing clause or the error.

    Every object is judged as validate judges it: one the API server would not store (a selector
    that does not compile, say) exits 2 with validate's line. Exits 1 when some class matches no
    device at all. With --pod and --node: per pod, its claims' classes, then whether
    it can be scheduled on the node and, if not, the first request or constraint that fails and
    what rules devices out; exits 1 when some pod cannot be scheduled. Without --class or
    --slices, the cluster's DeviceClasses or ResourceSlices are read (--kubeconfig, --context).

    With pod/NAME, the pod is read from the cluster (-n) with every DeviceClass, ResourceSlice,
    ResourceClaim and Node, one LIST each: on every node, whether the scheduler's filters pass
    and, where not, the first reason, nodes grouped by reason; then the nodes where it fits and
    the devices it would get. Exits 1 when it fits nowhere.
    """
    if target is not None:
        pod_name(target)
        _pod_target_flags(
            {"--class": class_file, "--slices": slices_file, "--claim": claim_file, "--pod": pod_files}
            | {"--node": node, "--label": labels}
        )
        live, access = _live(kubeconfig, context, namespace)
        gates_for = _gates_for(kubernetes_version, feature_gates)
        live.explain_pod_command(target, access, kubernetes_version, gates_for, as_json_output=as_json)
        return
    _pod_flags(pod_files, claim_file, node, labels)
    if namespace is not None:
        fail("--namespace goes with pod/NAME: the pod's namespace")
    release_gates = (kubernetes_version, _gates_for(kubernetes_version, feature_gates))
    classes, slices, release, gates = _classes_and_slices(
        (class_file, slices_file), (kubeconfig, context), release_gates
    )
    if pod_files:
        _explain_pods(pod_files, (classes, slices), node, labels or [], (release, gates), as_json=as_json)
        return
    claim = _one_claim(claim_file, release, gates)
    classes = _classes_to_explain(classes, str(class_file or "the cluster"), claim)
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


def _classes_and_slices(
    files: tuple[Path | None, Path | None],
    cluster: tuple[Path | None, str | None],
    release_gates: tuple[str | None, Callable[[str], dict[str, bool]]],
) -> tuple[list[DeviceClass], list[ResourceSlice], str, dict[str, bool]]:
    """The classes and slices of the files given, the cluster's for a file not given; the release
    (the cluster's when it is read) and its gates. The files are judged as that release's API server
    would judge them, so they are parsed first: a bad file is exit 2 before the cluster is asked."""
    class_file, slices_file = files
    release, gates_for = release_gates
    given = [path for path in files if path is not None]
    for path in given:
        inputs.documents(path)
    snap = None
    if len(given) == len(files):
        _cluster_flags_with_files(*cluster)
        found = _release(release)
    else:
        live, access = _live(*cluster)
        kinds = [kind for kind, path in (("DeviceClass", class_file), ("ResourceSlice", slices_file)) if path is None]
        snap, _ = live.snapshot_of(access, kinds, release)
        found = snap.release
    gates = gates_for(found)

    def read(path: Path | None, kind: type[Any]) -> list[Any]:
        if path is not None:
            return of_kind(inputs.read_one(path, found, gates), kind)
        assert snap is not None  # a kind without a file is the cluster's
        return of_kind(_as_stored(snap.of(kind), gates, found), kind)

    return read(class_file, DeviceClass), read(slices_file, ResourceSlice), found, gates


def _pod_target_flags(flags: dict[str, object]) -> None:
    """pod/NAME reads everything from the cluster: a file or node given with it is an error, not ignored."""
    given = [flag for flag, value in flags.items() if value not in (None, [])]
    if given:
        fail(f"{given[0]} does not go with pod/NAME: the pod is explained on every node of the cluster")


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
    objects: tuple[list[DeviceClass], list[ResourceSlice]],
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
    classes, slices = objects
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
        list[Path] | None,
        typer.Argument(metavar="FILE", hidden=True, show_default=False),  # described in the docstring
    ] = None,
    node: Annotated[str | None, typer.Option("--node", metavar="NODE", help="The node to allocate on.")] = None,
    labels: Annotated[
        list[str] | None, typer.Option("--label", metavar="KEY=VALUE", help="A node label (repeatable).")
    ] = None,
    output: Annotated[str, typer.Option("--output", "-o", metavar="yaml|json", help="Output format.")] = "yaml",
    *,
    kubernetes_version: ServerRelease = None,
    feature_gates: FeatureGates = None,
    namespace: Namespace = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
) -> None:
    """Allocate all claims together on one node like the scheduler; print them with status.allocation.

    The FILEs hold the DeviceClasses, ResourceSlices and ResourceClaims (YAML or JSON). Claims
    that already have a status.allocation keep it, and their devices count as in use. Objects
    are read as the API server of --kubernetes-version stores them. Exits 1 with the reason
    when the claims cannot be allocated. With Pods in the FILEs (and their ResourceClaimTemplates,
    and the Node for its labels and allocatable), each pod is scheduled in turn with the claims
    it names, makes from templates or needs for extended resources; the output is those
    claims, reserved for their pods.

    Without FILEs, the cluster's objects (--kubeconfig, --context): the pending claims of the
    namespace (-n) are allocated on --node (its labels from its Node), every allocated claim's
    devices in use. Nothing is written to the cluster.
    """
    from .pod_cli import allocate_pods  # noqa: PLC0415 - reads Pods as well

    fmt = _output(output)
    if node is None:
        fail("missing option '--node' (the node to allocate on)")
    _check_names(node, None)
    if not files:
        live, access = _live(kubeconfig, context, namespace)
        gates_for = _gates_for(kubernetes_version, feature_gates)
        live.allocate_command(
            access,
            node=node,
            labels=_parse_labels(labels or []),
            fmt=fmt,
            release=kubernetes_version,
            gates_for=gates_for,
        )
        return
    if namespace is not None:
        fail("--namespace goes without FILEs: the cluster's namespace whose claims are allocated")
    _cluster_flags_with_files(kubeconfig, context)
    release = _release(kubernetes_version)
    gates = gates_from_flags(release, feature_gates)
    given = inputs.read(files, release, gates, core=True)
    if given.pods:
        allocate_pods(given, node, _parse_labels(labels or []), fmt, gates)
        return
    objects = given.objects
    claims = of_kind(objects, ResourceClaim)
    if not claims:
        fail("no ResourceClaim given")
    pending = [c for c in claims if not (c.status or {}).get("allocation")]
    target = Node(node, _parse_labels(labels or []))
    allocated = [c for c in claims if c not in pending]
    world = (of_kind(objects, DeviceClass), of_kind(objects, ResourceSlice), allocated)
    print_allocation(pending, world, target, (release, gates), fmt)


def print_allocation(
    pending: Sequence[ResourceClaim],
    world: tuple[Sequence[DeviceClass], Sequence[ResourceSlice], Sequence[ResourceClaim]],
    target: Node,
    release_gates: tuple[str, dict[str, bool]],
    fmt: Output,
) -> None:
    """The pending claims allocated together on ``target`` (the allocated ones' devices in use), printed."""
    classes, slices, allocated = world
    release, gates = release_gates
    try:
        results = allocate(
            pending, classes, slices, target, allocated_devices(allocated), features=gates, release=release
        )
    except (AllocationError, Unallocatable) as error:
        fail(f"cannot allocate on node {target.name}: {error}", 1)
    done = []
    for result in results:
        claim = result.claim.model_copy(deep=True)
        claim.status = {**(claim.status or {}), "allocation": result.as_status(target.name)}
        done.append(claim)
    typer.echo(models.dump(list(done), fmt), nl=False)


@app.command("available")
def available_command(
    files: Annotated[
        list[Path] | None,
        typer.Argument(metavar="FILE", hidden=True, show_default=False),  # described in the docstring
    ] = None,
    node: Annotated[
        str | None, typer.Option("--node", metavar="NODE", help="Only the devices this node can use.")
    ] = None,
    labels: Annotated[
        list[str] | None,
        typer.Option("--label", metavar="KEY=VALUE", help="A label of --node, for nodeSelector slices (repeatable)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", metavar="", help="Machine-readable output.")] = False,
    *,
    kubernetes_version: ServerRelease = None,
    feature_gates: FeatureGates = None,
    driver: Annotated[str | None, typer.Option("--driver", metavar="NAME", help="Only this driver's pools.")] = None,
    device_class: Annotated[
        str | None, typer.Option("--class", metavar="NAME", help="Only the devices this DeviceClass selects.")
    ] = None,
    watch: Annotated[
        bool, typer.Option("--watch", "-w", metavar="", help="Without FILEs: draw again on every change.")
    ] = False,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
) -> None:
    """What is free, per pool and the nodes it serves: devices, shared counters and capacity left.

    The FILEs hold ResourceSlices and ResourceClaims (YAML or JSON, kinds mixed; DeviceClasses
    are read for --class, other resource.k8s.io objects are checked as validate checks them and
    not used, and objects of other API groups, such as Pods, are ignored). Devices in a claim's
    status.allocation are in use, except adminAccess results, as the scheduler counts them. A
    device is free, shared (a share of a device that allows multiple allocations), allocated, or
    blocked (free but its shared counters are used up). The objects are read as the API server
    of --kubernetes-version stores them: without DRAPartitionableDevices no counters are shared,
    without DRAConsumableCapacity no device is shared between claims. The devices taken are
    listed with the claims holding them and the pods those are reserved for.

    Without FILEs, the cluster's slices and claims (--kubeconfig, --context), one LIST each;
    --watch keeps one watch per kind and draws again on every change.
    """
    from .live.cli import Filters  # noqa: PLC0415 - this command only

    if node is not None:
        _check_names(node, None)
    elif labels:
        fail("--label needs --node")
    for flag, name in (("--driver", driver), ("--class", device_class)):
        problems = validate_driver_name(name, FieldPath(flag)) if flag == "--driver" and name is not None else []
        problems += validate_dns_subdomain(name, FieldPath(flag)) if flag == "--class" and name is not None else []
        if problems:
            fail(str(problems[0]))
    filters = Filters(node, _parse_labels(labels or []), driver, device_class)
    if not files:
        live, access = _live(kubeconfig, context)
        gates_for = _gates_for(kubernetes_version, feature_gates)
        live.available_command(access, filters, kubernetes_version, gates_for, as_json_output=as_json, watch=watch)
        return
    if watch:
        fail("--watch goes without FILEs: it follows the cluster's slices and claims")
    _cluster_flags_with_files(kubeconfig, context)
    _available_files(files, filters, (_release(kubernetes_version), feature_gates), as_json=as_json)


def _available_files(files: list[Path], filters: Any, release_gates: tuple[str, str | None], *, as_json: bool) -> None:
    from .available import InputError  # noqa: PLC0415 - this command only
    from .live.cli import narrowed, report_json, report_text  # noqa: PLC0415
    from .live.podexplain import claim_label  # noqa: PLC0415

    release, feature_gates = release_gates
    gates = gates_from_flags(release, feature_gates)
    loaded = [(source.rpartition(":")[0], obj) for source, obj in inputs.read(files, release, gates).placed]
    slices = [(source, obj) for source, obj in loaded if isinstance(obj, ResourceSlice)]
    claims = [(source, obj) for source, obj in loaded if isinstance(obj, ResourceClaim)]
    classes = [obj for _, obj in loaded if isinstance(obj, DeviceClass)]
    try:
        pools = narrowed(slices, claims, classes, filters, gates)
    except (UsageError, InputError) as error:
        fail(str(error))
    labels = {claim_ref(c): claim_label(c) for _, c in claims}
    typer.echo(json.dumps(report_json(pools, labels), indent=2) if as_json else report_text(pools, labels), nl=as_json)


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
    from kubedevice.sources import HostRoot, HostRootError, survey  # noqa: PLC0415 - lazy on purpose

    from .configuredattributes import ConfiguredAttributes  # noqa: PLC0415 - lazy on purpose

    def run(config: Path, host_root: Path | None) -> Any:
        try:
            loaded = load_config(config)
            root = host_root or loaded.host_root
            dra = loaded.dra
            resources = []
            for resource, found, devices in survey(loaded, root):  # as the driver publishes them
                spec = dra.resources.get(resource.name) if dra is not None else None
                form = dra.numa_node_attribute if dra is not None else "scalar"
                built = ConfiguredAttributes(HostRoot(root), resource, spec, form)
                resources.append((resource.name, *built.published(devices, found)))
            return resources, dra
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
