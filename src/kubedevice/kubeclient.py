"""The Kubernetes API client: lightkube, and how the driver finds its credentials.

lightkube is asyncio-native (the driver is one event loop), ships typed models of
``resource.k8s.io/v1`` for the Kubernetes version it tracks, and pulls in only an HTTP client;
the official ``kubernetes`` client is synchronous and large, ``kubernetes_asyncio`` is async
but just as large. Every call goes through lightkube except one: the claim GETs of
NodePrepareResources, which ``apiget`` sends over kept connections with the credentials this
client resolved (``AsyncClient.config``), falling back to lightkube for anything but a 200.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec
import yaml
from lightkube import AsyncClient, KubeConfig
from lightkube.config.kubeconfig import SingleConfig
from lightkube.core.exceptions import ConfigError

from .boundedyaml import load, read_text
from .errors import UsageError, at, cannot_read, os_reason

FIELD_MANAGER = "kubedevice"
DEFAULT_KUBECONFIG = "~/.kube/config"


class KubeAccessError(UsageError):
    """No usable API server credentials: one line naming the file and what is wrong with it (exit 2)."""


def client(kubeconfig: Path | None = None) -> AsyncClient:
    """``--kubeconfig``, else the in-cluster service account, else ``$KUBECONFIG`` or ``~/.kube/config``."""
    config = load_kubeconfig(kubeconfig)
    try:  # the TLS context is built here: a CA or client certificate file that cannot be read
        return AsyncClient(config, field_manager=FIELD_MANAGER)
    except OSError as err:
        where = config.fname or "in-cluster config"
        raise KubeAccessError(f"kubeconfig {where}: cannot load its certificates: {os_reason(err)}") from None
    except (ConfigError, ValueError) as err:  # an auth-provider lightkube does not support, ...
        raise KubeAccessError(f"kubeconfig {config.fname or 'in-cluster config'}: {err}") from None


def load_kubeconfig(path: Path | None = None) -> SingleConfig:
    """The credentials every API client of ours uses, chosen as lightkube's ``KubeConfig.from_env``
    chooses them (``path``, else in-cluster, else ``$KUBECONFIG`` or ``~/.kube/config``).

    The one place a kubeconfig is read: whatever is wrong with it (unreadable, not YAML, not a
    kubeconfig, no current context, a context naming a cluster or user it lacks) is one
    :class:`KubeAccessError` line, never lightkube's, PyYAML's or msgspec's traceback.
    """
    if path is not None:
        return _from_file(path)
    try:
        return KubeConfig.from_service_account().get()  # type: ignore[return-value]  # a context it just made
    except ConfigError:  # no service account: not in a pod
        pass
    except KeyError as err:  # the service account is mounted, the API server's address is not
        raise KubeAccessError(f"in-cluster config: ${err.args[0]} is not set") from None
    return _from_file(Path(os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG).expanduser())


def _from_file(path: Path) -> SingleConfig:
    try:
        text = read_text(path)
    except (OSError, UnicodeDecodeError) as err:
        raise KubeAccessError(f"kubeconfig {cannot_read(path, err)}") from None
    try:
        document = load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = at(path, mark.line + 1, mark.column + 1) if mark is not None else str(path)
        raise KubeAccessError(f"kubeconfig {where}: not YAML: {getattr(err, 'problem', None) or err}") from None
    if not isinstance(document, dict):
        what = _a(document)
        raise KubeAccessError(f"kubeconfig {path}: a kubeconfig is a mapping (clusters, contexts, users), not {what}")
    try:
        config = KubeConfig.from_dict(document, fname=path)
    except KeyError as err:
        raise KubeAccessError(f"kubeconfig {path}: {err.args[0]!r} is missing") from None
    except (msgspec.ValidationError, TypeError, ValueError) as err:
        raise KubeAccessError(f"kubeconfig {path}: {err}") from None
    return _context(config, path)


def _context(config: KubeConfig, path: Path) -> SingleConfig:
    """The current context with its cluster and user, as lightkube's client would pick it."""
    name = config.current_context
    if not name:
        raise KubeAccessError(f"kubeconfig {path}: no current-context (kubectl config use-context NAME sets one)")
    context = config.contexts.get(name)
    if context is None:
        raise KubeAccessError(f"kubeconfig {path}: current-context {name!r} is not among its contexts")
    if context.cluster not in config.clusters:
        raise KubeAccessError(f"kubeconfig {path}: context {name!r} names cluster {context.cluster!r}, which it lacks")
    if context.user and context.user not in config.users:
        raise KubeAccessError(f"kubeconfig {path}: context {name!r} names user {context.user!r}, which it lacks")
    single = config.get(name)
    assert single is not None
    return single


def _a(value: Any) -> str:
    return "a list" if isinstance(value, list) else "empty" if value is None else "a single value"
