#!/usr/bin/env bash
# The machine's tools that the tests use beside Python and Go: util-linux and iproute2 for the
# real cluster's namespaces, openssl for its certificates, gcc and pkg-config for cgo builds,
# debootstrap and umoci for the image, qemu-user-static and binfmt-support for the arm64 image
# (qemu-aarch64 registered with binfmt_misc, which this does as root when it is not), systemd-nspawn
# (systemd-container) to boot a real systemd for the host service. As root they are installed from Debian's packages when
# missing; otherwise one line names them (the tests that need root then skip, or fail under CI).
set -euo pipefail
missing=()
for pair in unshare:util-linux nsenter:util-linux flock:util-linux ip:iproute2 openssl:openssl \
            pkg-config:pkg-config gcc:gcc dpkg-deb:dpkg debootstrap:debootstrap umoci:umoci \
            qemu-aarch64-static:qemu-user-static update-binfmts:binfmt-support \
            systemd-nspawn:systemd-container; do
    command -v "${pair%%:*}" >/dev/null || missing+=("${pair##*:}")
done
# The arm64 image test runs arm64 code in a chroot: qemu registered with binfmt_misc (flag F).
arm64_binfmt() {
    [ "$(dpkg --print-architecture 2>/dev/null)" = arm64 ] && return 0
    local entry=/proc/sys/fs/binfmt_misc/qemu-aarch64
    grep -qx enabled "$entry" 2>/dev/null && return 0
    [ "$(id -u)" = 0 ] || { echo "system-deps.sh: qemu-aarch64 is not registered with binfmt_misc; the arm64 image test will fail (run this as root once)" >&2; return 0; }
    [ -e /proc/sys/fs/binfmt_misc/register ] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
    update-binfmts --enable qemu-aarch64 >/dev/null 2>&1 || true
    grep -qx enabled "$entry" 2>/dev/null || echo "system-deps.sh: could not register qemu-aarch64 with binfmt_misc" >&2
}
if [ "${#missing[@]}" -eq 0 ]; then arm64_binfmt; exit 0; fi
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "system-deps.sh: installing ${missing[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    arm64_binfmt
else
    echo "system-deps.sh: missing ${missing[*]} (sudo apt-get install ${missing[*]}); the tests that need them will skip" >&2
fi
if ! command -v go >/dev/null; then
    echo "system-deps.sh: no go on PATH: tests/interop and the real-cluster tests build Kubernetes code with Go (docs/real-cluster.md)" >&2
fi
