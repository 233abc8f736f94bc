"""Which CDI device IDs the spec files of a directory define, as a container runtime resolves them.

A spec (``*.json`` or ``*.yaml``) names its ``kind`` (``vendor/class``) and devices; each device
is ``kind=name``. A file that cannot be parsed defines nothing (the runtime skips it too).
"""

from __future__ import annotations

from pathlib import Path

import yaml


def spec_files(directory: Path) -> set[Path]:
    if not directory.is_dir():
        return set()
    return {p for p in directory.iterdir() if p.suffix in (".json", ".yaml", ".yml") and p.is_file()}


def defined_ids(directory: Path) -> dict[str, Path]:
    """``vendor/class=name`` -> the spec file defining it."""
    ids: dict[str, Path] = {}
    for path in sorted(spec_files(directory)):
        try:
            spec = yaml.safe_load(path.read_text())
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        if not isinstance(spec, dict) or not isinstance(spec.get("kind"), str):
            continue
        for device in spec.get("devices") or []:
            if isinstance(device, dict) and isinstance(device.get("name"), str):
                ids.setdefault(f"{spec['kind']}={device['name']}", path)
    return ids
