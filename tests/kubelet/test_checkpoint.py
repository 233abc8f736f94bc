"""The checkpoint file against the kubelet's own code.

Every checksum, dump and file below was printed by the real checkpoint package of
k8s.io/kubernetes v1.35.4 (``dpharness checkpoint`` in tests/interop/deviceplugin, fed the same
data); tests/interop re-checks them, and random data, against Go on every run.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kubedevice.kubelet.checkpoint import (
    CheckpointData,
    CheckpointError,
    Entry,
    checksum,
    parse,
    read,
    spew_dump,
    write,
)

WRITTEN = {
    "empty": (CheckpointData(), 3467439661),
    "registered only": (CheckpointData([], {"example.com/gpu": ["gpu1", "gpu0"], "example.com/nic": []}), 1172520998),
    "several entries, NUMA nodes and resources": (
        CheckpointData(
            [
                Entry(
                    "pod-1",
                    "main",
                    "example.com/gpu",
                    {-1: ["gpu3"], 0: ["gpu0", "gpu2"], 1: ["gpu1"]},
                    bytes([10, 3, 8, 1, 2, 0, 255]),
                ),
                Entry("pod-1", "side", "example.com/nic", {12: ["nic0"], 2: ["nic1"]}, b""),
                Entry("pod-2", "main", "example.com/gpu", {0: ["gpu4"]}, b"\x12\x05hello"),
            ],
            {"example.com/nic": ["nic0", "nic1"], "example.com/gpu": ["gpu0", "gpu1", "gpu2", "gpu3", "gpu4"]},
        ),
        570576626,
    ),
    "unicode": (
        CheckpointData(
            [Entry("ü-pod<&>", "κόσμε", "example.com/gpu", {0: ["设备-1", "😀"]}, b"\x00")],
            {"example.com/gpu": ["😀", "设备-1", 'q"b\\c\n\t\x01\x7f\u2028']},
        ),
        492914970,
    ),
}

# Files as another writer may leave them: Go keeps null (nil), [] / {} (empty) and a missing
# field (the device manager's pre-made empty value) apart, and so does the checksum.
DECODED = {
    "missing Data": ("{}", 2932075448),
    "null entries": ('{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{}}}', 3467439661),
    "all null": ('{"Data":{"PodDeviceEntries":null,"RegisteredDevices":null}}', 1944006890),
    "empty entries": ('{"Data":{"PodDeviceEntries":[],"RegisteredDevices":{}}}', 2932075448),
    "zero fields and nil maps": (
        '{"Data":{"PodDeviceEntries":[{"PodUID":"p","ContainerName":"c","ResourceName":"r",'
        '"DeviceIDs":{"1":["b"],"-1":["a","z"],"10":[]},"AllocResp":"AQI="},{"PodUID":"ü<&>"}],'
        '"RegisteredDevices":{"r":["a","b"],"q":null,"é":[]}}}',
        638553809,
    ),
    "escapes and a lone surrogate": (
        '{"Data":{"PodDeviceEntries":[{"PodUID":"\\ud800x\\u2028","ContainerName":"κόσμε",'
        '"ResourceName":"example.com/gpu","DeviceIDs":{"0":["设备-1","😀"]},"AllocResp":""}],'
        '"RegisteredDevices":{"example.com/gpu":["😀","设备-1","a\\"b\\\\c\\n\\t\\u0001\\u007f"]}}}',
        1686113846,
    ),
    "nulls in lists": (
        '{"Data":{"PodDeviceEntries":[null,{"PodUID":null,"DeviceIDs":{"2":null,"-3":["x",null]},"AllocResp":null}],'
        '"RegisteredDevices":{"b":["x"],"a":null,"B":[]}}}',
        3275141078,
    ),
}

GO_DUMP = (
    "(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)[{PodUID:(string)p "
    "ContainerName:(string)c ResourceName:(string)r DeviceIDs:(checkpoint.DevicesPerNUMA)map[-1:[a z] 1:[b] 10:[]] "
    "AllocResp:([]uint8)[1 2]} {PodUID:(string)ü<&> ContainerName:(string) ResourceName:(string) "
    "DeviceIDs:(checkpoint.DevicesPerNUMA)<nil> AllocResp:([]uint8)<nil>}] "
    "RegisteredDevices:(map[string][]string)map[q:<nil> r:[a b] é:[]]}"
)
GO_FILE = (
    '{"Data":{"PodDeviceEntries":[{"PodUID":"ü-pod\\u003c\\u0026\\u003e","ContainerName":"κόσμε",'
    '"ResourceName":"example.com/gpu","DeviceIDs":{"0":["设备-1","😀"]},"AllocResp":"AA=="}],'
    '"RegisteredDevices":{"example.com/gpu":["😀","设备-1","q\\"b\\\\c\\n\\t\\u0001\x7f\\u2028"]}},"Checksum":492914970}'
)


def with_checksum(blob: str, value: int) -> bytes:
    return json.dumps({**json.loads(blob), "Checksum": value}).encode()


@pytest.mark.parametrize("name", WRITTEN)
def test_written_checksum_is_the_kubelets_and_reads_back(tmp_path: Path, name: str) -> None:
    data, go_checksum = WRITTEN[name]
    path = tmp_path / "kubelet_internal_checkpoint"
    write(path, data)
    assert json.loads(path.read_bytes())["Checksum"] == go_checksum
    assert read(path) == data


def test_written_file_is_byte_for_byte_gos(tmp_path: Path) -> None:
    """Go's json.Marshal: struct field order, map keys sorted, HTML and U+2028 escaped, UTF-8 kept."""
    path = tmp_path / "kubelet_internal_checkpoint"
    write(path, WRITTEN["unicode"][0])
    assert path.read_bytes() == GO_FILE.encode()


def test_numa_keys_are_ordered_as_go_orders_them(tmp_path: Path) -> None:
    """JSON sorts "-1" < "10" < "2" as strings; spew sorts -1 < 2 < 10 as int64."""
    path = tmp_path / "cp"
    write(path, CheckpointData([Entry("p", "c", "r", {2: ["b"], 10: ["c"], -1: ["a"]}, b"")], {}))
    assert re.search(r'"DeviceIDs":\{"-1":\["a"\],"10":\["c"\],"2":\["b"\]\}', path.read_text())
    data, _ = parse(path.read_bytes())
    assert "DeviceIDs:(checkpoint.DevicesPerNUMA)map[-1:[a] 2:[b] 10:[c]]" in spew_dump(data)


@pytest.mark.parametrize("name", DECODED)
def test_decoded_checksum_is_the_kubelets(tmp_path: Path, name: str) -> None:
    blob, go_checksum = DECODED[name]
    assert checksum(parse(blob.encode())[0]) == go_checksum
    path = tmp_path / "kubelet_internal_checkpoint"
    path.write_bytes(with_checksum(blob, go_checksum))
    assert read(path) is not None
    path.write_bytes(with_checksum(blob, go_checksum ^ 1))
    with pytest.raises(CheckpointError, match="checksum mismatch"):
        read(path)


def test_spew_dump_is_gos() -> None:
    data, _ = parse(DECODED["zero fields and nil maps"][0].encode())
    assert spew_dump(data) == GO_DUMP


def test_nil_values_read_as_empty(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    blob, go_checksum = DECODED["nulls in lists"]
    path.write_bytes(with_checksum(blob, go_checksum))
    assert read(path) == CheckpointData(
        [Entry("", "", "", {}, b""), Entry("", "", "", {2: [], -3: ["x", ""]}, b"")], {"b": ["x"], "a": [], "B": []}
    )


def test_missing_file_is_no_checkpoint(tmp_path: Path) -> None:
    assert read(tmp_path / "absent") is None


@pytest.mark.parametrize(
    "blob",
    [
        "not json",
        '{"Checksum":1.0}',
        '{"Checksum":-1}',
        '{"Checksum":true}',
        '{"Data":[]}',
        '{"Data":{"PodDeviceEntries":{}}}',
        '{"Data":{"PodDeviceEntries":[{"PodUID":1}]}}',
        '{"Data":{"PodDeviceEntries":[{"DeviceIDs":{"x":["a"]}}]}}',
        '{"Data":{"PodDeviceEntries":[{"DeviceIDs":{"9223372036854775808":["a"]}}]}}',
        '{"Data":{"PodDeviceEntries":[{"AllocResp":"not base64!"}]}}',
        '{"Data":{"RegisteredDevices":{"r":"a"}}}',
    ],
)
def test_what_go_cannot_decode_is_an_error(tmp_path: Path, blob: str) -> None:
    path = tmp_path / "cp"
    path.write_text(blob)
    with pytest.raises(CheckpointError, match="unexpected shape"):
        read(path)
