#!/usr/bin/env bash
# Build the kubedevice image with no Docker engine and no registry:
#   scripts/image.sh [--arch amd64|arm64]
#   dist/kubedevice-<version>.oci.tar (amd64, the default) or dist/kubedevice-<version>-arm64.oci.tar,
#   an OCI archive that `ctr -n k8s.io images import` accepts, named docker.io/kubedevice/kubedevice:<version>.
#
# Another architecture than the host's is built by the same steps, its binaries run by the kernel
# through qemu-user-static and binfmt_misc (registered with the F flag, so inside a chroot too):
# Debian's own arm64 packages and pip's own choice of wheels for the interpreter that runs, so
# nothing is cross-assembled by hand. Without that registration the build stops before starting.
#
# The same steps as the Dockerfile, with Debian's own tools (apt-get install debootstrap umoci):
#   base    debootstrap --variant=minbase (what debian:bookworm-slim is made from) + python3 and
#           pci.ids (the PCI ID database for hosts without one: $KUBEDEVICE_PCI_IDS)
#   build   base + python3-venv; a virtualenv in /opt/kubedevice with requirements/run.txt
#           (hash-checked) and the kubedevice wheel built from this checkout, pip and
#           setuptools removed, byte code compiled
#   runtime base + /opt/kubedevice only (a second layer), uid 65532, ENTRYPOINT kubedevice
# so the image holds no pip, no compiler and no cache. Needs root (chroot, mount namespace).
#
# The debootstrapped rootfs is cached under ${KUBEDEVICE_CACHE:-~/.cache/kubedevice} keyed by
# its inputs (suite, architecture, packages, this recipe's version); pip's download cache is
# kept there too, outside the image. Environment:
#   KUBEDEVICE_DIST           output directory (default: dist/ in the repository)
#   KUBEDEVICE_CACHE          cache directory (default: ~/.cache/kubedevice)
#   KUBEDEVICE_DEBIAN_MIRROR  Debian mirror for debootstrap (default: debootstrap's own)
#   SOURCE_DATE_EPOCH         timestamps of the image config (default: the last commit's)
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
SUITE=bookworm
RECIPE=1  # bump when the base steps below change, so caches built by older steps are not reused
BASE_PACKAGES='python3 pci.ids'
BUILD_PACKAGES=python3-venv
NAME=kubedevice/kubedevice
UID_GID=65532:65532

die() { echo "image.sh: $*" >&2; exit 2; }
ARCH=amd64
while [ $# -gt 0 ]; do
    case $1 in
        --arch) [ $# -ge 2 ] || die "--arch needs a value: amd64 or arm64"; ARCH=$2; shift 2 ;;
        --arch=*) ARCH=${1#--arch=}; shift ;;
        *) die "unknown argument '$1' (usage: image.sh [--arch amd64|arm64])" ;;
    esac
done
case $ARCH in  # Debian's name, and the name binfmt_misc knows qemu's interpreter by
    amd64) QEMU_ARCH=x86_64 ;;
    arm64) QEMU_ARCH=aarch64 ;;
    *) die "--arch: '$ARCH' is not one of amd64, arm64" ;;
esac
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot and a mount namespace)"
for tool in debootstrap umoci unshare chroot tar python3; do
    command -v "$tool" >/dev/null || die "$tool not found (apt-get install debootstrap umoci)"
done

VERSION=$(python3 -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' \
          "$REPO/pyproject.toml")
DIST=${KUBEDEVICE_DIST:-$REPO/dist}
CACHE=${KUBEDEVICE_CACHE:-$HOME/.cache/kubedevice}
EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$REPO" log -1 --format=%ct 2>/dev/null || date +%s)}
if [ "$ARCH" != "$(dpkg --print-architecture)" ]; then
    # F (fix binary): the kernel holds the interpreter open, so it runs in the chroot without a copy.
    binfmt=/proc/sys/fs/binfmt_misc/qemu-$QEMU_ARCH
    { grep -qx enabled "$binfmt" && grep -q '^flags: .*F' "$binfmt"; } 2>/dev/null \
        || die "--arch $ARCH on $(dpkg --print-architecture) needs qemu-user-static registered with binfmt_misc" \
               "(apt-get install qemu-user-static binfmt-support; if $binfmt is still missing:" \
               "mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc && update-binfmts --enable qemu-$QEMU_ARCH)"
fi
KEY=$(printf '%s\n' "$SUITE" "$ARCH" "$BASE_PACKAGES" "$BUILD_PACKAGES" "$RECIPE" | sha256sum | cut -c1-16)
ROOTFS_CACHE=$CACHE/image-rootfs-$SUITE-$ARCH-$KEY
PIP_CACHE=$CACHE/pip
# pip in the build chroot trusts what the host trusts (a TLS-inspecting proxy's CA, say):
# the host's CA bundle is mounted read-only for the build stage only, never copied.
HOST_CA=${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kubedevice-image.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
trap 'exit 130' INT  # so that Ctrl-C and a kill run the EXIT trap's clean-up too
trap 'exit 143' TERM
step() { printf '%(%H:%M:%S)T image.sh: %s\n' -1 "$*" >&2; }

# Run a command chrooted in $1 with /proc, /dev and DNS, in a private mount namespace so
# nothing stays mounted on the host whatever happens.
in_root() {
    local root=$1; shift
    cp /etc/resolv.conf "$root/etc/resolv.conf"
    unshare --mount --propagation private -- sh -ec '
        root=$1; shift
        mount -t proc proc "$root/proc"
        mount --rbind /dev "$root/dev"
        if [ -n "$PIP_CACHE" ]; then
            mkdir -p "$root/var/cache/pip" && mount --bind "$PIP_CACHE" "$root/var/cache/pip"
            : >"$root/run/host-ca.crt" && mount --bind -o ro "$HOST_CA" "$root/run/host-ca.crt"
        fi
        exec chroot "$root" env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
             HOME=/root LANG=C.UTF-8 PIP_CACHE_DIR=/var/cache/pip PIP_CERT=/run/host-ca.crt \
             PIP_DISABLE_PIP_VERSION_CHECK=1 ${PIP_INDEX_URL:+PIP_INDEX_URL=$PIP_INDEX_URL} "$@"
    ' in_root "$root" "$@"
}

# 1. The build rootfs: minbase + python3 + python3-venv, debootstrapped once per key.
if [ ! -d "$ROOTFS_CACHE" ]; then
    step "debootstrap $SUITE ($ARCH, minbase + $BASE_PACKAGES $BUILD_PACKAGES) into the cache"
    mkdir -p "$CACHE"
    fresh=$CACHE/.image-rootfs-$KEY.$$
    rm -rf "$fresh"
    # Interrupted or failed, the half-made rootfs goes. debootstrap mounts /proc and /sys in its
    # target: it runs in a private mount namespace, so those mounts end with it and removing
    # $fresh can never reach through them into the host's /proc, /sys or /dev.
    trap 'rm -rf "$WORK" "$fresh"' EXIT
    # shellcheck disable=SC2086  # the mirror is optional
    unshare --mount --propagation private -- \
        debootstrap --variant=minbase --include="${BASE_PACKAGES// /,},${BUILD_PACKAGES// /,}" --arch="$ARCH" \
        "$SUITE" "$fresh" ${KUBEDEVICE_DEBIAN_MIRROR:-} >"$WORK/debootstrap.log" 2>&1 \
        || { tail -20 "$WORK/debootstrap.log" >&2; die "debootstrap failed"; }
    rm -rf "$fresh"/var/cache/apt/archives/*.deb "$fresh"/var/lib/apt/lists/*
    mv "$fresh" "$ROOTFS_CACHE"  # atomic: a half-made rootfs is never taken for a cached one
    trap 'rm -rf "$WORK"' EXIT
else
    step "cached rootfs $ROOTFS_CACHE"
fi

# 2. Build stage: the virtualenv, as the Dockerfile's build stage makes it.
step "build stage: virtualenv with kubedevice $VERSION"
BUILD=$WORK/build
cp -a "$ROOTFS_CACHE" "$BUILD"
mkdir -p "$BUILD/src/src" "$BUILD/src/requirements" "$PIP_CACHE"
cp "$REPO/pyproject.toml" "$REPO/README.md" "$REPO/MANIFEST.in" "$BUILD/src/"
cp "$REPO"/requirements/*.txt "$REPO"/requirements/*.in "$BUILD/src/requirements/"
# The .dockerignore allow-list: src/ without byte code or egg-info.
tar -C "$REPO/src" --exclude=__pycache__ --exclude='*.pyc' --exclude='*.egg-info' -cf - . | tar -C "$BUILD/src/src" -xf -
export PIP_CACHE HOST_CA
in_root "$BUILD" python3 -m venv /opt/kubedevice
# The locked runtime set (hash-checked; it holds the pinned setuptools too), then the wheel built
# from these sources with that setuptools, installed without dependencies: the image runs exactly
# what requirements/run.txt says, as the README's install does.
in_root "$BUILD" sh -ec 'cd /src
    /opt/kubedevice/bin/pip install --quiet --no-compile --require-hashes -r requirements/run.txt
    /opt/kubedevice/bin/pip wheel --quiet --no-deps --no-build-isolation --wheel-dir /wheel .
    /opt/kubedevice/bin/pip install --quiet --no-compile --no-deps /wheel/kubedevice-*.whl
    /opt/kubedevice/bin/pip uninstall --quiet --yes pip setuptools
    /opt/kubedevice/bin/python -m compileall -q -j 0 /opt/kubedevice'
unset PIP_CACHE

# 3. Runtime base: the same rootfs without the build-only packages, slimmed like debian:*-slim.
step "runtime base"
BASE=$WORK/base
cp -a "$ROOTFS_CACHE" "$BASE"
in_root "$BASE" dpkg --purge python3-venv python3.11-venv python3-pip-whl python3-setuptools-whl >/dev/null
rm -rf "$BASE"/usr/share/doc/* "$BASE"/usr/share/man/* "$BASE"/usr/share/info/* \
       "$BASE"/var/cache/apt/* "$BASE"/var/lib/apt/lists/* "$BASE"/var/cache/debconf/*-old \
       "$BASE"/var/log/* "$BASE"/tmp/* "$BASE"/root/.cache "$BASE"/etc/resolv.conf
find "$BASE/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
find "$BASE/dev" -mindepth 1 -delete  # the container runtime provides /dev
: >"$BASE/etc/resolv.conf"

# 4. The image: layer 1 the base, layer 2 /opt/kubedevice (the Dockerfile's COPY --from=build).
step "OCI layout"
OCI=$WORK/oci
CREATED=$(date -u -d "@$EPOCH" +%Y-%m-%dT%H:%M:%SZ)
umoci init --layout "$OCI"
umoci new --image "$OCI:$VERSION"
# unpack + repack, once per layer: umoci 0.4's `insert` writes layers without tar's end marker
# and with absolute names, which GNU tar rejects.
layer() {  # layer CREATED_BY POPULATE-COMMAND...
    local created_by=$1; shift
    rm -rf "$WORK/bundle"
    umoci unpack --image "$OCI:$VERSION" "$WORK/bundle" >/dev/null
    "$@" "$WORK/bundle/rootfs"
    umoci repack --image "$OCI:$VERSION" --history.created "$CREATED" --history.created_by "$created_by" \
        "$WORK/bundle"
}
base_into() { rmdir "$1" && mv "$BASE" "$1"; }
venv_into() { mkdir -p "$1/opt" && cp -a "$BUILD/opt/kubedevice" "$1/opt/kubedevice"; }
layer "debootstrap --variant=minbase $SUITE + $BASE_PACKAGES" base_into
layer "COPY --from=build /opt/kubedevice /opt/kubedevice" venv_into
umoci config --image "$OCI:$VERSION" --architecture "$ARCH" --os linux --created "$CREATED" \
    --history.created "$CREATED" \
    --history.created_by "kubedevice image config" \
    --clear=config.env --clear=config.cmd --clear=config.entrypoint \
    --config.user "$UID_GID" \
    --config.env PATH=/opt/kubedevice/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --config.env PYTHONDONTWRITEBYTECODE=1 --config.env PYTHONUNBUFFERED=1 \
    --config.env KUBEDEVICE_PCI_IDS=/usr/share/misc/pci.ids \
    --config.entrypoint kubedevice \
    --config.cmd serve --config.cmd --config --config.cmd /etc/kubedevice/config.yaml \
    --config.cmd --host-root --config.cmd /host --config.cmd --metrics-address --config.cmd :9500 \
    --config.cmd --log-format --config.cmd json \
    --config.exposedports 9500/tcp \
    --config.label org.opencontainers.image.title=kubedevice \
    --config.label "org.opencontainers.image.description=Config-driven Kubernetes device plugin daemon" \
    --config.label org.opencontainers.image.licenses=Apache-2.0 \
    --config.label "org.opencontainers.image.version=$VERSION"
umoci gc --layout "$OCI"

# containerd names an imported image after io.containerd.image.name (as `docker save` writes
# it); org.opencontainers.image.ref.name stays the tag for OCI tools.
python3 - "$OCI/index.json" "docker.io/$NAME:$VERSION" "$VERSION" <<'EOF'
import json, sys
path, name, tag = sys.argv[1:]
index = json.load(open(path))
(manifest,) = index["manifests"]
manifest["annotations"] = {"io.containerd.image.name": name, "org.opencontainers.image.ref.name": tag}
json.dump(index, open(path, "w"))
EOF

mkdir -p "$DIST"
OUT=$DIST/kubedevice-$VERSION.oci.tar
[ "$ARCH" = amd64 ] || OUT=$DIST/kubedevice-$VERSION-$ARCH.oci.tar
tar -C "$OCI" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$EPOCH" -cf "$OUT.tmp" .
mv "$OUT.tmp" "$OUT"
step "wrote $OUT ($(du -h "$OUT" | cut -f1)), $NAME:$VERSION for linux/$ARCH"
