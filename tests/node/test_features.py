"""``serve --features-file``: the NFD feature file follows the served devices and parses as NFD's.

The reader below is a transcription of Node Feature Discovery's ``local`` source and label
checks, read at kubernetes-sigs/node-feature-discovery commit
76e6cc8cc0d54b8bce037098b72611ffdf66ef5a:

- ``source/local/local.go``: ``getFeaturesFromFiles`` (dot files skipped, regular files only,
  64 KiB limit), ``parseFeatureFile`` (lines trimmed, ``#`` comments, ``# +`` directives,
  ``expiry-time`` (RFC 3339) applying to the lines after it, ``no-feature``/``no-label`` to the
  next line only, ``key`` alone meaning ``true``, the value after the first ``=``);
- ``pkg/apis/nfd/validate/validate.go``: ``Label`` (a qualified name, a namespace, no
  ``kubernetes.io`` namespace other than NFD's own, a valid label value), over
  ``k8s.io/apimachinery``'s ``IsQualifiedName`` and ``IsValidLabelValue``;
- ``docs/usage/customization-guide.md``, "Local feature source": the documented examples, used
  as test cases below together with the files of ``source/local/testdata/features.d``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kubedevice.kubelet import KubeletSimulator
from kubedevice.node.features import NAMESPACE, FeaturesFile, check_path, feature_base, render
from kubedevice.testing import FakeHost
from kubedevice.testing.waiting import eventually

TIMEOUT = 60.0  # a bound on a hang: a `kubedevice serve` took 12 s to import at a load of 20 on 2 cores
NFD_MAX_BYTES = 65536  # MaxFeatureFileSize
SERIAL = "example.com/serial"
FLAGGED = "example.com/flagged"

# -- NFD's reader, transcribed -----------------------------------------------------------------


def nfd_parse(text: str, now: datetime) -> tuple[dict[str, str], dict[str, str]]:
    """``parseFeatureFile``: (features, labels) of one file's content."""
    features: dict[str, str] = {}
    labels: dict[str, str] = {}
    expiry, skip_feature, skip_label = now, False, False
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            if line.startswith("# +"):
                key, eq, value = line[3:].partition("=")
                if key == "expiry-time" and eq:
                    with contextlib.suppress(ValueError):  # NFD logs it and keeps the previous expiry
                        expiry = _rfc3339(value.strip())
                skip_feature |= key == "no-feature"
                skip_label |= key == "no-label"
            continue
        if expiry < now:
            continue
        key, eq, value = line.partition("=")
        for skip, target in ((skip_feature, features), (skip_label, labels)):
            if skip:
                target.pop(key, None)
            else:
                target[key] = value if eq else "true"
        skip_feature = skip_label = False
    return features, labels


def _rfc3339(value: str) -> datetime:
    """Go's ``time.Parse(time.RFC3339, ...)`` for the forms NFD's files use (``Z`` or an offset)."""
    if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)", value):
        raise ValueError(value)
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def nfd_read_dir(directory: Path, now: datetime) -> tuple[dict[str, str], dict[str, str]]:
    """``getFeaturesFromFiles``: (features, labels) of every feature file NFD reads in ``directory``."""
    features: dict[str, str] = {}
    labels: dict[str, str] = {}
    for entry in sorted(os.listdir(directory)):
        path = directory / entry
        if entry.startswith(".") or not path.is_file() or path.stat().st_size > NFD_MAX_BYTES:
            continue
        file_features, file_labels = nfd_parse(path.read_text(), now)
        features.update(file_features)
        labels.update(file_labels)
    return features, labels


_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def nfd_label_error(key: str, value: str) -> str | None:
    """``validate.Label``: why NFD would drop the label ``key=value`` (``None``: it keeps it)."""
    prefix, slash, name = key.rpartition("/")
    if not slash:
        return "unprefixed keys are not allowed"
    if not (_NAME.match(name) and len(name) <= 63):
        return f"invalid name part {name!r}"
    if not (_DNS1123_SUBDOMAIN.match(prefix) and len(prefix) <= 253):
        return f"invalid prefix {prefix!r}"
    if (prefix == "kubernetes.io" or prefix.endswith(".kubernetes.io")) and not (
        prefix in (NAMESPACE, "profile.node.kubernetes.io")
        or prefix.endswith((".feature.node.kubernetes.io", ".profile.node.kubernetes.io"))
    ):
        return "namespace is not allowed"
    if value and not (len(value) <= 63 and _NAME.match(value)):
        return f"invalid value {value!r}"
    return None


NOW = datetime(2025, 1, 1, tzinfo=UTC)


def test_the_transcribed_reader_gives_nfds_documented_answers() -> None:
    """The examples of NFD's customization guide, with the labels the guide says they yield."""
    assert nfd_parse(
        "feature.node.kubernetes.io/my-feature.1\n"
        "feature.node.kubernetes.io/my-feature.2=myvalue\n"
        "vendor.io/my-feature.3=456\n",
        NOW,
    )[1] == {
        "feature.node.kubernetes.io/my-feature.1": "true",
        "feature.node.kubernetes.io/my-feature.2": "myvalue",
        "vendor.io/my-feature.3": "456",
    }
    expiring = (
        "# +expiry-time=2012-07-28T11:22:33Z\nvendor.io/feature1=featureValue\n\n"
        "# +expiry-time=2080-07-28T11:22:33Z\nvendor.io/feature2=featureValue2\n\n"
        "# +expiry-time=2070-07-28T11:22:33Z\nvendor.io/feature3=featureValue3\n\n"
        "# +expiry-time=2002-07-28T11:22:33Z\nvendor.io/feature4=featureValue4\n"
    )
    assert sorted(nfd_parse(expiring, NOW)[0]) == ["vendor.io/feature2", "vendor.io/feature3"]
    directives = (
        "# +no-feature\nvendor.io/label-only=value\n\nvendor.io/my-feature=value\n\n"
        "vendor.io/foo=bar\n\n# +no-label\nfoo=baz\n"
    )
    features, labels = nfd_parse(directives, NOW)
    assert features == {"foo": "baz", "vendor.io/my-feature": "value", "vendor.io/foo": "bar"}
    assert labels == {"vendor.io/label-only": "value", "vendor.io/my-feature": "value", "vendor.io/foo": "bar"}
    assert nfd_parse("# This is a comment\nkey\n", NOW)[1] == {"key": "true"}


def test_the_transcribed_reader_reads_nfds_own_test_files(tmp_path: Path) -> None:
    """``source/local/testdata/features.d``: NFD's ``TestGetExpirationDate`` expects 7 features
    and 8 labels (``big_file``, 70,262 bytes of which only the first lines are copied here, is
    padded over the 64 KiB limit the same way, so it is skipped)."""
    big = "# +expiry-time=2080-07-28T11:22:33Z\nfeatureKeyValid2=featureValue\n\n"
    files = {
        ".my.feature": "hiddenFeatureKey=hiddenFeatureValue\n",
        "big_file": big + "zadievpeiacqyzsriojtdohwpbrghxyfjadmrkefagehfihylpggoinxdcozhbijwaubltuijfh\n" * 900,
        "expired_feature": "# +expiry-time=2012-07-28T11:22:33Z\nfeatureKeyExpired=featureValue\n",
        "feature_with_comments": "# Notes: foo bar\nfeatureKeyRandomComment=featureValue\n",
        "features_with_labels": "# +no-feature\nlabel-only=value\n\n# +no-feature\nlabel-only-2=value\n\n"
        "my-feature=value\n\nfoo=bar\n# +no-label\nfoo=baz\n",
        "multiple_expiration_dates": "# +expiry-time=2012-07-28T11:22:33Z\nfeatureKey=featureValue\n\n"
        "# +expiry-time=2080-07-28T11:22:33Z\nfeatureKey2=featureValue2\n\n"
        "# +expiry-time=2070-07-28T11:22:33Z\nfeatureKey3=featureValue3\n\n"
        "# +expiry-time=2002-07-28T11:22:33Z\nfeatureKey4=featureValue4\n",
        "unparsable_expiry_comment": "# +expiry-time=2080-07-28T11:22:33X\nfeatureKeyUnparsable=featureValue\n",
        "valid_feature": "# +expiry-time=2080-07-28T11:22:33Z\nfeatureKeyValid=featureValue\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert (tmp_path / "big_file").stat().st_size > NFD_MAX_BYTES
    features, labels = nfd_read_dir(tmp_path, datetime.now(UTC))
    assert (len(features), len(labels)) == (7, 8)
    assert "hiddenFeatureKey" not in labels and "featureKeyValid2" not in labels
    assert labels["featureKeyUnparsable"] == "featureValue"  # a bad expiry expires nothing


def test_label_checks_follow_nfd() -> None:
    assert nfd_label_error("vendor.io/my-feature.3", "456") is None
    assert nfd_label_error(f"{NAMESPACE}/my-feature.1", "true") is None
    assert nfd_label_error("kubernetes.io/arch", "amd64") == "namespace is not allowed"
    assert nfd_label_error("foo", "bar") == "unprefixed keys are not allowed"
    assert nfd_label_error("vendor.io/" + "a" * 64, "x") is not None
    assert nfd_label_error("vendor.io/a", "not valid") is not None


# -- the file kubedevice writes ------------------------------------------------------------------


LONG = "a-very-long-vendor-domain.example.com/an-accelerator-whose-name-is-rather-long"


def test_every_resource_gives_two_valid_labels_that_nfd_keeps() -> None:
    counts = {"example.com/gpu": 2, "vendor.io/fpga_x": 0, LONG: 5, LONG + "2": 1, "a.b/c": 1}
    text = render(counts)
    features, labels = nfd_parse(text, NOW)
    assert labels == features
    assert labels[f"{NAMESPACE}/example.com-gpu.present"] == "true"
    assert labels[f"{NAMESPACE}/example.com-gpu.count"] == "2"
    assert labels[f"{NAMESPACE}/vendor.io-fpga_x.count"] == "0"
    assert f"{NAMESPACE}/vendor.io-fpga_x.present" not in labels  # no usable device: no present label
    assert len({feature_base(r) for r in counts}) == len(counts)  # the long names stay apart
    assert len(labels) == 2 * len(counts) - 1
    for key, value in labels.items():
        assert nfd_label_error(key, value) is None, (key, value)
    assert len(feature_base(LONG)) + len(".present") == 63


def test_a_path_nfd_would_never_read_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"NFD ignores files whose name starts with '\.'"):
        check_path(tmp_path / ".hidden")
    with pytest.raises(ValueError, match="does not exist"):
        check_path(tmp_path / "missing" / "kubedevice")
    with pytest.raises(ValueError, match="is a directory"):
        check_path(tmp_path)


def test_remove_takes_only_our_own_regular_file(tmp_path: Path) -> None:
    path = tmp_path / "kubedevice"
    features = FeaturesFile(path)
    features.follow([])
    inode = path.stat().st_ino
    features.write()
    assert path.stat().st_ino == inode  # unchanged content: not rewritten
    assert features.remove() and not path.exists()
    path.write_text("vendor.io/theirs=1\n")
    assert not features.remove() and path.exists()
    path.unlink()
    (tmp_path / "target").write_text(render({}))
    path.symlink_to("target")
    assert not features.remove() and path.is_symlink()


def test_the_daemon_refuses_a_features_file_in_a_missing_directory(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(f"resources:\n  - name: {SERIAL}\n    glob: {{paths: [/dev/ttyUSB*]}}\n")
    missing = tmp_path / "features.d" / "kubedevice"
    result = subprocess.run(
        [
            *(sys.executable, "-m", "kubedevice", "serve", "-c", str(config), "--plugin-dir", str(tmp_path)),
            *("--host-root", str(tmp_path), "--features-file", str(missing)),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "--features-file" in result.stderr and "does not exist" in result.stderr


# -- a real `kubedevice serve` ------------------------------------------------------------------


def config(*names: str) -> str:
    blocks = {
        SERIAL: f'  - name: {SERIAL}\n    glob: {{paths: ["/dev/ttyUSB*"]}}\n',
        FLAGGED: f"  - name: {FLAGGED}\n    static: {{count: 2, paths: [/dev/flag]}}\n"
        "    health: {interval_seconds: 0.1, failure_threshold: 1}\n",
    }
    return "resources:\n" + "".join(blocks[n] for n in names)


class Reader(threading.Thread):
    """Reads the file over and over, as NFD may at any moment, and keeps what it saw.

    Every read must be a whole file: the header first and a ``.count`` label for each resource
    of one of the configs served (a half-written file would lack the later lines).
    """

    def __init__(self, path: Path, wholes: list[set[str]]) -> None:
        super().__init__(daemon=True)
        self.path, self.wholes = path, wholes
        self.seen: list[dict[str, str]] = []
        self.broken: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                text = self.path.read_text()
            except FileNotFoundError:
                continue
            labels = nfd_parse(text, datetime.now(UTC))[1]
            counts = {k.removesuffix(".count") for k in labels if k.endswith(".count")}
            if not text.startswith("# Written by kubedevice") or counts not in self.wholes:
                self.broken.append(text)
            if not self.seen or self.seen[-1] != labels:
                self.seen.append(labels)
            time.sleep(0.001)  # leave the GIL to the simulator in this process


def label(resource: str, feature: str) -> str:
    return f"{NAMESPACE}/{feature_base(resource)}.{feature}"


async def until(check: Callable[[], bool], what: str) -> None:
    await eventually(what, check, TIMEOUT)


def test_the_file_follows_hotplug_health_and_reload_and_is_always_whole(tmp_path: Path) -> None:
    host = FakeHost(tmp_path / "host")
    host.device_node("/dev/ttyUSB0")
    host.device_node("/dev/flag")
    plugin_dir = tmp_path / "plugins"
    plugin_dir.mkdir()
    features_dir = tmp_path / "features.d"
    features_dir.mkdir()
    path = features_dir / "kubedevice"
    config_file = tmp_path / "config.yaml"
    config_file.write_text(config(SERIAL, FLAGGED))
    both = {f"{NAMESPACE}/{feature_base(r)}" for r in (SERIAL, FLAGGED)}
    reader = Reader(path, [both, {f"{NAMESPACE}/{feature_base(SERIAL)}"}])
    log = tmp_path / "daemon.log"

    def labels() -> dict[str, str]:
        return nfd_read_dir(features_dir, datetime.now(UTC))[1]

    async def main() -> None:
        sim = KubeletSimulator(plugin_dir, grace_period=1.0)
        await sim.start()
        args = [sys.executable, "-m", "kubedevice", "serve", "--config", str(config_file)]
        args += ["--plugin-dir", str(plugin_dir), "--host-root", str(host.root), "--features-file", str(path)]
        with log.open("wb") as out:
            proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        reader.start()
        try:
            await until(lambda: labels().get(label(SERIAL, "count")) == "1", "first file")
            assert labels() == {
                label(SERIAL, "present"): "true",
                label(SERIAL, "count"): "1",
                label(FLAGGED, "present"): "true",
                label(FLAGGED, "count"): "2",
            }
            await sim.wait_until(lambda: sim.allocatable().get(SERIAL) == 1, TIMEOUT)

            host.device_node("/dev/ttyUSB1")  # hotplug
            await until(lambda: labels().get(label(SERIAL, "count")) == "2", "hotplug counted")
            host.remove("/dev/ttyUSB0")
            host.remove("/dev/ttyUSB1")  # the last one gone: no longer present
            await until(lambda: labels().get(label(SERIAL, "count")) == "0", "unplug counted")
            assert label(SERIAL, "present") not in labels()

            host.remove("/dev/flag")  # the health check fails: the devices stay, unhealthy
            await until(lambda: labels().get(label(FLAGGED, "count")) == "0", "unhealthy not counted")
            await sim.wait_until(lambda: sim.allocatable().get(FLAGGED) == 0, TIMEOUT)
            host.device_node("/dev/flag")
            await until(lambda: labels().get(label(FLAGGED, "count")) == "2", "healthy again")

            config_file.write_text(config(SERIAL))  # a reload stops a resource: its labels go
            await until(lambda: label(FLAGGED, "count") not in labels(), "reload")
            assert labels() == {label(SERIAL, "count"): "0"}
        finally:
            proc.send_signal(signal.SIGTERM)
            code = await asyncio.to_thread(proc.wait, TIMEOUT)
            reader.stop.set()
            reader.join(TIMEOUT)
            await sim.stop()
        assert code == 0, log.read_text()

    asyncio.run(main())
    assert reader.broken == [], reader.broken[:1]
    assert len(reader.seen) >= 5  # it did watch the changes happen
    # A clean stop (a restart, an update) keeps the labels: no flapping while the pod is replaced.
    assert nfd_read_dir(features_dir, datetime.now(UTC))[1] == {label(SERIAL, "count"): "0"}
    assert sorted(os.listdir(features_dir)) == ["kubedevice"]  # no temp file left behind
