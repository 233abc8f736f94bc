"""Build, once per version, the programs a real single-node cluster runs; cached under ~/.cache/kubedevice.

Everything comes from the Go module proxy through the small wrapper modules in ``cluster/go/``
of a source checkout (each pins its versions in go.mod/go.sum): Kubernetes v1.36.3 with its
staging modules, etcd v3.6.16, containerd 2.x with runc (containerd 2 injects CDI devices, which
the DRA driver needs), and the one static program that every container image of the cluster holds;
kubectl of the same version only when asked for (``cluster.sh up``), from a module of its own.
A set of binaries is built in a private directory and renamed into place, so an interrupted build
never passes for a finished one. Cold: Kubernetes about 10 minutes of CPU on two cores (31 minutes
wall measured while other builds ran), etcd 2 minutes, containerd and runc under a minute each
after it (shared build cache)."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .gobuild import BUILD_TIMEOUT, BuildError, build, cache_dir, run_go

RELEASES = {"1.34": "v1.34.4", "1.35": "v1.35.4", "1.36": "v1.36.3", "1.37": "v1.37.2"}
"""Each supported minor release and the patch release built for it (the ones the module proxy serves)."""
APISERVER_RELEASES = {"1.31": "v1.31.14", "1.32": "v1.32.13", "1.33": "v1.33.13"}
"""Older releases users still meet, of which only kube-apiserver is built (:func:`apiserver`): the
validation and conversion differentials of ``kubedevice dra`` need nothing else of them."""
DEFAULT_RELEASE = "1.36"
"""The release a cluster runs unless asked: the newest one that every managed offering has on the day
(managed clusters lag upstream by one or two minors), and the one the e2e suite proves in full."""
KUBERNETES_VERSION = RELEASES[DEFAULT_RELEASE]
ALL_RELEASES = {**APISERVER_RELEASES, **RELEASES}
"""Every release of which kube-apiserver can be built, oldest first."""
ETCD_VERSION = "v3.6.16"
CONTAINERD_VERSION = "v2.2.9"
RUNC_VERSION = "v1.3.6"

GO_MODULES = Path(__file__).resolve().parents[3] / "cluster" / "go"
"""The wrapper modules; present in a source checkout (the cluster is a development tool)."""

_KUBE_PACKAGES = (
    "cmd/kube-apiserver",
    "cmd/kubelet",
    "cmd/kube-scheduler",
    "cmd/kube-controller-manager",
    "test/images/sample-device-plugin",
)
_CONTAINERD_PACKAGES = (
    "github.com/containerd/containerd/v2/cmd/containerd",
    "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2",
    "github.com/containerd/containerd/v2/cmd/ctr",
)


@dataclass(frozen=True)
class Binaries:
    """Absolute paths of every program the cluster runs."""

    kubernetes: Path
    etcd: Path
    containerd: Path
    """The directory of containerd, its runc shim and ctr."""
    runc: Path
    image_program: Path

    def kube(self, name: str) -> Path:
        return self.kubernetes / name


def version_of(release: str | None) -> str:
    """The patch version built for a release given as ``1.37`` or ``v1.37.2`` (None: the default)."""
    if release is None:
        return KUBERNETES_VERSION
    minor = ".".join(release.lstrip("v").split(".")[:2])
    if minor not in RELEASES:
        raise BuildError(f"Kubernetes {release} is not supported: choose one of {', '.join(RELEASES)}")
    return RELEASES[minor]


def ensure_all(version: str = KUBERNETES_VERSION) -> Binaries:
    """Every binary, built if not cached yet; BuildError says which one failed and why."""
    if shutil.which("go") is None and not _all_cached(version):
        raise BuildError("the Go toolchain is not installed and the cluster's binaries are not cached")
    image = build(_module("image"), ".", "envsleep")
    assert image is not None  # Go is present: checked above
    return Binaries(
        kubernetes=kubernetes(version), etcd=etcd(), containerd=containerd(), runc=runc(), image_program=image
    )


def kubernetes(version: str = KUBERNETES_VERSION) -> Path:
    """kube-apiserver, kubelet, kube-scheduler, kube-controller-manager and the sample device plugin."""
    packages = [f"k8s.io/kubernetes/{package}" for package in _KUBE_PACKAGES]
    return _build_set(
        "kubernetes", version, _kube_module(version), packages, ["-ldflags", f"-s -w {_version_stamp(version)}"]
    )


def apiserver(release: str) -> Path:
    """kube-apiserver of ``release`` (``1.31`` to ``1.37``): from the release's full set when it is a
    cluster release, else built alone from ``cluster/go/kubernetes-<version>`` into a set of its own.

    Kubernetes 1.31 to 1.33 build with today's Go as their modules pin them (Go's toolchain
    switching off, ``GOTOOLCHAIN=local``); docs/real-cluster.md says what it took.
    """
    if release in RELEASES:
        return kubernetes(RELEASES[release]) / "kube-apiserver"
    version = APISERVER_RELEASES.get(release)
    if version is None:
        raise BuildError(f"no kube-apiserver for Kubernetes {release}: choose one of {', '.join(ALL_RELEASES)}")
    flags = ["-ldflags", f"-s -w {_version_stamp(version)}"]
    packages = ["k8s.io/kubernetes/cmd/kube-apiserver"]
    return _build_set("kube-apiserver", version, _kube_module(version), packages, flags) / "kube-apiserver"


def apiserver_cached(release: str) -> bool:
    """Whether :func:`apiserver` of ``release`` would need no build."""
    if release in RELEASES:
        return (cache_dir() / f"kubernetes-{RELEASES[release]}").is_dir()
    return (cache_dir() / f"kube-apiserver-{ALL_RELEASES[release]}").is_dir()


def kubectl(version: str = KUBERNETES_VERSION) -> Path:
    """kubectl of the cluster's own version (a machine's older kubectl warns about version skew).

    Only ``cluster.sh up`` needs it, so it is a cache entry of its own, built on demand. The default
    release has a wrapper module of its own (adding it never invalidated, nor changed the build of,
    the other components); every other release's module pins kubectl beside the rest.
    """
    module = _module("kubectl") if version == KUBERNETES_VERSION else _kube_module(version)
    return (
        _build_set(
            "kubectl",
            version,
            module,
            ["k8s.io/kubernetes/cmd/kubectl"],
            ["-ldflags", f"-s -w {_version_stamp(version)}"],
        )
        / "kubectl"
    )


def _kube_module(version: str) -> Path:
    """``cluster/go/kubernetes`` for the default release, ``cluster/go/kubernetes-<version>`` for the others:
    each requires its ``k8s.io/kubernetes`` and replaces the staging modules with the same ``v0.X.Y``."""
    return _module("kubernetes" if version == KUBERNETES_VERSION else f"kubernetes-{version}")


def _version_stamp(version: str) -> str:
    """``-X`` flags that stamp the Kubernetes version: without them every component, kubectl
    included, reports v0.0.0, and the kubelet's and kubectl's version skew checks complain."""
    major, minor = version.lstrip("v").split(".")[:2]
    return " ".join(
        f"-X {pkg}.{key}={value}"
        for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
        for key, value in (("gitVersion", version), ("gitMajor", major), ("gitMinor", minor))
    )


def etcd() -> Path:
    """etcd's server (``go install`` refuses it: etcd's go.mod has replace directives)."""
    directory = _build_set("etcd", ETCD_VERSION, _module("etcd"), ["go.etcd.io/etcd/server/v3"], ["-ldflags", "-s -w"])
    return directory / "server"  # go names a .../server/v3 binary after "server"


def containerd() -> Path:
    """containerd, its runc shim and ctr (no btrfs/devmapper/zfs snapshotters: they need C headers)."""
    return _build_set(
        "containerd",
        CONTAINERD_VERSION,
        _module("containerd"),
        list(_CONTAINERD_PACKAGES),
        ["-tags", "no_btrfs no_devmapper no_zfs", "-ldflags", "-s -w"],
        cgo=True,
    )


def runc() -> Path:
    """runc with seccomp (containerd gives every pod sandbox the runtime/default profile), in a module
    of its own: with containerd's newer runtime-spec it does not compile.

    libseccomp is linked statically from Debian's libseccomp-dev, unpacked into a private directory
    (``apt-get download`` + ``dpkg -x``) unless its headers are installed.
    """
    final = cache_dir() / f"runc-{RUNC_VERSION}"
    if final.is_dir():
        return final / "runc"
    with tempfile.TemporaryDirectory(prefix="kd-seccomp-") as scratch:
        env = {"PKG_CONFIG_PATH": str(_libseccomp(Path(scratch)))}
        return (
            _build_set(
                "runc",
                RUNC_VERSION,
                _module("runc"),
                ["github.com/opencontainers/runc"],
                ["-tags", "seccomp", "-ldflags", "-s -w"],
                cgo=True,
                env=env,
            )
            / "runc"
        )


def _libseccomp(scratch: Path) -> Path:
    """A pkg-config directory whose libseccomp.pc links libseccomp.a statically."""
    root = scratch / "root"
    if Path("/usr/lib/x86_64-linux-gnu/libseccomp.a").exists() and Path("/usr/include/seccomp.h").exists():
        root = Path("/")
    else:
        _run_tool(["apt-get", "download", "libseccomp-dev"], scratch)
        debs = list(scratch.glob("libseccomp-dev_*.deb"))
        if not debs:
            raise BuildError("runc needs libseccomp's headers: apt-get download libseccomp-dev left no .deb")
        _run_tool(["dpkg-deb", "-x", str(debs[0]), str(root)], scratch)
    libdir = root / "usr" / "lib" / "x86_64-linux-gnu"
    pkgconfig = scratch / "pkgconfig"
    pkgconfig.mkdir()
    (pkgconfig / "libseccomp.pc").write_text(
        f"Name: libseccomp\nDescription: static, for runc\nVersion: 2.5.4\n"
        f"Cflags: -I{root / 'usr' / 'include'}\nLibs: {libdir / 'libseccomp.a'}\n"
    )
    return pkgconfig


def _module(name: str) -> Path:
    module = GO_MODULES / name
    if not (module / "go.mod").exists():
        raise BuildError(f"{module}/go.mod not found: the cluster needs a source checkout of kubedevice")
    return module


def _all_cached(kubernetes_version: str) -> bool:
    root = cache_dir()
    return all(
        (root / f"{name}-{version}").is_dir()
        for name, version in (
            ("kubernetes", kubernetes_version),
            ("etcd", ETCD_VERSION),
            ("containerd", CONTAINERD_VERSION),
            ("runc", RUNC_VERSION),
        )
    )


def _run_tool(argv: list[str], cwd: Path) -> None:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BuildError(f"runc needs libseccomp's headers: {' '.join(argv)} failed: {done.stderr.strip()}")


def _build_set(
    name: str,
    version: str,
    module: Path,
    packages: list[str],
    flags: list[str],
    *,
    cgo: bool = False,
    env: dict[str, str] | None = None,
) -> Path:
    """``go build -o DIR/ packages...`` into ``<cache>/<name>-<version>/``, atomically.

    Under a lock per set: a second process (``cluster.sh up`` while the tests build) waits for the
    first one's build instead of running its own beside it, which would also fail at the rename.
    """
    final = cache_dir() / f"{name}-{version}"
    if final.is_dir():
        return final
    go = shutil.which("go")
    if go is None:
        raise BuildError(f"cannot build {name} {version}: the Go toolchain is not installed")
    final.parent.mkdir(parents=True, exist_ok=True)
    with (final.parent / f".{final.name}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not final.is_dir():
            _build_locked(final, go, module, packages, flags, cgo=cgo, env=env)
    return final


def _build_locked(
    final: Path, go: str, module: Path, packages: list[str], flags: list[str], *, cgo: bool, env: dict[str, str] | None
) -> None:
    """The build itself, under the set's lock."""
    env = {**os.environ, **(env or {}), "CGO_ENABLED": "1" if cgo else "0"}
    with tempfile.TemporaryDirectory(dir=final.parent, prefix=f".{final.name}-") as staging:
        out = Path(staging) / "bin"
        out.mkdir()
        done = run_go([go, "build", *flags, "-o", f"{out}/", *packages], module, env, 2 * BUILD_TIMEOUT)
        if done.returncode != 0:
            raise BuildError(f"building {final.name} failed:\n{done.stderr[-4000:]}")
        try:
            out.replace(final)
        except OSError:
            if not final.is_dir():
                raise
            # a process that does not take the lock (an older checkout) finished the same build first
