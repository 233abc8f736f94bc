"""Where the kubelet's device plugin directory is: one resolution order for every command.

``serve``, the library and ``kubedevice kubelet`` resolve it alike (flag, then
``$KUBEDEVICE_PLUGIN_DIR``, then the config file, then the kubelet's default) so that a plugin and
the simulator paired through the environment meet in the same directory. Kept apart from
``config`` so that the simulator's command line does not load the config schema to learn it.
"""

from __future__ import annotations

import os
from pathlib import Path

from .api import DEFAULT_PLUGIN_DIR

PLUGIN_DIR_ENV = "KUBEDEVICE_PLUGIN_DIR"


def plugin_dir_from_env() -> Path | None:
    env = os.environ.get(PLUGIN_DIR_ENV)
    return Path(env) if env else None


def resolve_plugin_dir(flag: Path | None, configured: Path | None = None) -> Path:
    return flag or plugin_dir_from_env() or configured or Path(DEFAULT_PLUGIN_DIR)


def daemon_plugin_dir(flag: Path | None, configured: Path | None, config_path: Path) -> tuple[Path, str]:
    """``serve``'s plugin directory and, for messages about it, where it came from in the words
    its user would change it with: the flag, the variable, the config file's key, or the default."""
    if flag:
        return flag, "--plugin-dir"
    from_env = plugin_dir_from_env()
    if from_env is not None:
        return from_env, f"${PLUGIN_DIR_ENV}"
    if configured:
        return configured, f"plugin_dir in {config_path}"
    return Path(DEFAULT_PLUGIN_DIR), (
        f"default directory (give --plugin-dir or set ${PLUGIN_DIR_ENV} if the kubelet uses another)"
    )
