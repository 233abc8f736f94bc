"""The cluster's certificates and kubeconfigs, made with openssl(1): a CA, the API server's serving
certificate, a service-account key pair and one client certificate per component."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

_DAYS = "3650"


def create(directory: Path, node_name: str) -> None:
    """CA, ``apiserver``, ``sa`` and the client certificates admin, kubelet, scheduler, controller-manager."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_crt = directory / "ca.key", directory / "ca.crt"
    _key(ca_key)
    _openssl(
        "req",
        "-x509",
        "-new",
        "-key",
        str(ca_key),
        "-out",
        str(ca_crt),
        "-days",
        _DAYS,
        "-subj",
        "/CN=kubedevice-cluster-ca",
    )
    _sign(
        directory,
        "apiserver",
        "/CN=kube-apiserver",
        "subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
        "DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth",
    )
    _key(directory / "sa.key")
    _openssl("pkey", "-in", str(directory / "sa.key"), "-pubout", "-out", str(directory / "sa.pub"))
    for name, subject in (
        ("admin", "/O=system:masters/CN=kubedevice-admin"),
        ("kubelet", f"/O=system:nodes/CN=system:node:{node_name}"),
        ("scheduler", "/CN=system:kube-scheduler"),
        ("controller-manager", "/CN=system:kube-controller-manager"),
    ):
        _sign(directory, name, subject, "extendedKeyUsage=clientAuth")


def node_client(directory: Path, name: str, node_name: str) -> None:
    """One more kubelet's client certificate (``<name>.crt``/``.key``): the Node authorizer lets
    each kubelet write only its own Node and pods, so every node of a cluster needs its own identity."""
    _sign(directory, name, f"/O=system:nodes/CN=system:node:{node_name}", "extendedKeyUsage=clientAuth")


def kubeconfig(server: str, directory: Path, user: str) -> str:
    """A kubeconfig for ``user`` with the certificates embedded, so it works from any directory."""

    def data(name: str) -> str:
        return base64.b64encode((directory / name).read_bytes()).decode()

    return f"""apiVersion: v1
kind: Config
clusters:
- name: kubedevice
  cluster:
    server: {server}
    certificate-authority-data: {data("ca.crt")}
users:
- name: {user}
  user:
    client-certificate-data: {data(f"{user}.crt")}
    client-key-data: {data(f"{user}.key")}
contexts:
- name: kubedevice
  context: {{cluster: kubedevice, user: {user}}}
current-context: kubedevice
"""


def _key(path: Path) -> None:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path))


def _sign(directory: Path, name: str, subject: str, extensions: str) -> None:
    key, csr, crt, ext = (directory / f"{name}.{suffix}" for suffix in ("key", "csr", "crt", "ext"))
    _key(key)
    _openssl("req", "-new", "-key", str(key), "-out", str(csr), "-subj", subject)
    ext.write_text(extensions + "\n")
    _openssl(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(directory / "ca.crt"),
        "-CAkey",
        str(directory / "ca.key"),
        "-CAcreateserial",
        "-out",
        str(crt),
        "-days",
        _DAYS,
        "-extfile",
        str(ext),
    )
    csr.unlink()
    ext.unlink()


def _openssl(*args: str) -> None:
    done = subprocess.run(["openssl", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {done.stderr.strip()}")
