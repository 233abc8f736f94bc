#!/usr/bin/env bash
# The machine's tools that the tests use beside Python and Go: util-linux and iproute2 for the
# real cluster's namespaces, openssl for its certificates, gcc and pkg-config for cgo builds,
# debootstrap and umoci for the image. As root they are installed from Debian's packages when
# missing; otherwise one line names them (the tests that need root then skip, or fail under CI).
set -euo pipefail
missing=()
for pair in unshare:util-linux nsenter:util-linux flock:util-linux ip:iproute2 openssl:openssl \
            pkg-config:pkg-config gcc:gcc dpkg-deb:dpkg debootstrap:debootstrap umoci:umoci; do
    command -v "${pair%%:*}" >/dev/null || missing+=("${pair##*:}")
done
[ "${#missing[@]}" -eq 0 ] && exit 0
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "system-deps.sh: installing ${missing[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
    echo "system-deps.sh: missing ${missing[*]} (sudo apt-get install ${missing[*]}); the tests that need them will skip" >&2
fi
if ! command -v go >/dev/null; then
    echo "system-deps.sh: no go on PATH: tests/interop and the real-cluster tests build Kubernetes code with Go (docs/real-cluster.md)" >&2
fi
