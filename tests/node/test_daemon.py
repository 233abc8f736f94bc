"""`kubedevice serve` as a process under the kubelet simulator: metrics, probes, reload, bad config."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
from grpc import aio

from kubedevice.api import pb, pb_grpc
from kubedevice.kubelet import Container, KubeletSimulator, Pod
from kubedevice.names import endpoint_for
from kubedevice.testing import waiting

TIMEOUT = 60.0  # a bound on a hang: a `kubedevice serve` took 12 s to import at a load of 20 on 2 cores
NULL = "example.com/null"
SERIAL = "example.com/serial"


def config_text(*resources: str) -> str:
    blocks = {
        NULL: f"  - name: {NULL}\n    static: {{count: 4, paths: [/dev/null]}}\n",
        SERIAL: f'  - name: {SERIAL}\n    glob: {{paths: ["/dev/ttyUSB*"]}}\n',
        "example.com/extra": "  - name: example.com/extra\n    static: {count: 2, paths: [/dev/null]}\n",
    }
    return "resources:\n" + "".join(blocks[r] for r in resources)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Daemon:
    """A `kubedevice serve` process over a fake host root with /dev/null and a ttyUSB."""

    def __init__(self, tmp: Path, config: str) -> None:
        self.plugin_dir = tmp / "plugins"
        self.host = tmp / "host"
        (self.host / "dev").mkdir(parents=True)
        (self.host / "dev" / "null").touch()
        (self.host / "dev" / "ttyUSB0").touch()
        self.plugin_dir.mkdir()
        self.config = tmp / "config.yaml"
        self.config.write_text(config)
        self.port = free_port()
        self.log = tmp / "daemon.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        args = [sys.executable, "-m", "kubedevice", "serve", "--config", str(self.config)]
        args += ["--plugin-dir", str(self.plugin_dir), "--host-root", str(self.host)]
        args += ["--cdi-dir", str(self.host / "cdi"), "--metrics-address", f"127.0.0.1:{self.port}"]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(TIMEOUT)

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=2) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()
        except (urllib.error.URLError, ConnectionError):
            return 0, ""  # not listening (yet)

    def metric(self, name: str, **labels: str) -> float:
        _, text = self.get("/metrics")
        wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        for line in text.splitlines():
            match = re.match(r"^(\w+)(?:\{(.*)\})? (\S+)$", line)
            if match and match[1] == name and ",".join(sorted((match[2] or "").split(","))) == wanted:
                return float(match[3])
        return 0.0


async def eventually(check: Callable[[], bool], what: str) -> None:
    """``check`` polled in a thread: its HTTP calls and file reads block, and the simulator this
    loop runs must keep answering the daemon meanwhile."""
    await waiting.eventually(what, lambda: asyncio.to_thread(check), TIMEOUT)


@asynccontextmanager
async def daemon_and_kubelet(tmp: Path, config: str) -> AsyncIterator[tuple[Daemon, KubeletSimulator]]:
    daemon = Daemon(tmp, config)
    sim = KubeletSimulator(daemon.plugin_dir, grace_period=1.0)
    await sim.start()
    daemon.start()
    try:
        yield daemon, sim
    finally:
        code = await asyncio.to_thread(daemon.stop)
        await sim.stop()
        assert code == 0, daemon.log.read_text()


def test_metrics_move_with_their_events(tmp_path: Path) -> None:
    async def main() -> None:
        async with daemon_and_kubelet(tmp_path, config_text(NULL, SERIAL)) as (daemon, sim):
            await sim.wait_until(
                lambda: sim.allocatable().get(NULL) == 4 and sim.allocatable().get(SERIAL) == 1, TIMEOUT
            )
            await eventually(
                lambda: daemon.metric("kubedevice_registrations_total", resource=NULL, result="ok") == 1, "registration"
            )
            assert daemon.metric("kubedevice_devices", resource=NULL, health="healthy") == 4

            await sim.admit(Pod("uid-1", "p", [Container("c", {NULL: 2})]))
            assert daemon.metric("kubedevice_allocations_total", resource=NULL, result="ok") == 1
            assert daemon.metric("kubedevice_preferred_allocations_total", resource=NULL, result="ok") == 1
            assert daemon.metric("kubedevice_rpc_duration_seconds_count", resource=NULL, method="Allocate") == 1

            async with aio.insecure_channel(f"unix://{daemon.plugin_dir / endpoint_for(NULL)}") as channel:
                bad = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=["nope"])])
                try:
                    await pb_grpc.DevicePluginStub(channel).Allocate(bad)
                except aio.AioRpcError as err:
                    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert daemon.metric("kubedevice_allocations_total", resource=NULL, result="invalid_argument") == 1

            (daemon.host / "dev" / "ttyUSB1").touch()  # hotplug
            await sim.wait_until(lambda: sim.allocatable().get(SERIAL) == 2, TIMEOUT)
            await eventually(
                lambda: daemon.metric("kubedevice_hotplug_events_total", resource=SERIAL, action="added") == 1,
                "hotplug",
            )
            (daemon.host / "dev" / "ttyUSB0").unlink()
            await sim.wait_until(lambda: sim.capacity().get(SERIAL) == 1, TIMEOUT)
            await eventually(
                lambda: daemon.metric("kubedevice_hotplug_events_total", resource=SERIAL, action="removed") == 1,
                "unplug",
            )

            before = len(sim.registrations)
            await sim.restart()
            await sim.wait_until(lambda: len(sim.registrations) >= before + 2, TIMEOUT)
            await eventually(lambda: daemon.metric("kubedevice_kubelet_restarts_total") == 1, "restart counted")
            assert daemon.metric("kubedevice_registrations_total", resource=NULL, result="ok") == 2

    asyncio.run(main())


def test_readiness_follows_registration_and_kubelet_restarts(tmp_path: Path) -> None:
    async def main() -> None:
        daemon = Daemon(tmp_path, config_text(NULL))
        daemon.start()
        try:
            await eventually(lambda: daemon.get("/healthz")[0] == 200, "liveness")
            status, body = daemon.get("/readyz")
            assert status == 503 and f"[-]{NULL}" in body  # no kubelet yet
            sim = KubeletSimulator(daemon.plugin_dir)
            await sim.start()
            await eventually(lambda: daemon.get("/readyz")[0] == 200, "ready after registration")
            await sim.stop()  # the kubelet goes away and its restart wipes the directory
            for entry in daemon.plugin_dir.iterdir():
                if entry.is_socket():
                    entry.unlink()
            await eventually(lambda: daemon.get("/readyz")[0] == 503, "unready while the kubelet is down")
            sim = KubeletSimulator(daemon.plugin_dir)
            await sim.start()
            await eventually(lambda: daemon.get("/readyz")[0] == 200, "ready after re-registration")
            await sim.stop()
        finally:
            assert await asyncio.to_thread(daemon.stop) == 0

    asyncio.run(main())


def test_reload_keeps_untouched_streams_and_refuses_a_bad_config(tmp_path: Path) -> None:
    async def main() -> None:
        async with daemon_and_kubelet(tmp_path, config_text(NULL, SERIAL)) as (daemon, sim):
            await sim.wait_until(
                lambda: sim.allocatable().get(SERIAL) == 1 and sim.allocatable().get(NULL) == 4, TIMEOUT
            )
            async with aio.insecure_channel(f"unix://{daemon.plugin_dir / endpoint_for(NULL)}") as channel:
                stream = pb_grpc.DevicePluginStub(channel).ListAndWatch(pb.Empty())
                assert len((await stream.read()).devices) == 4

                daemon.config.write_text(config_text(NULL, "example.com/extra"))  # file change: no signal
                await sim.wait_until(lambda: sim.allocatable().get("example.com/extra") == 2, TIMEOUT)
                await sim.wait_until(lambda: sim.allocatable().get(SERIAL, 0) == 0, TIMEOUT)
                assert not (daemon.plugin_dir / endpoint_for(SERIAL)).exists()

                daemon.config.write_text(
                    "resources:\n  - name: not-qualified\n    static: {count: 1, paths: [/dev/null]}\n"
                )
                await eventually(lambda: "config reload refused" in daemon.log.read_text(), "refusal logged")

                daemon.config.write_text(config_text(NULL))
                assert daemon.proc is not None
                daemon.proc.send_signal(signal.SIGHUP)
                await eventually(lambda: not (daemon.plugin_dir / endpoint_for("example.com/extra")).exists(), "SIGHUP")

                # The untouched resource's stream never ended: a change still arrives on it.
                assert stream.done() is False
                status, body = daemon.get("/readyz")
                assert status == 200 and "extra" not in body
            assert (daemon.plugin_dir / endpoint_for(NULL)).exists()

    asyncio.run(main())


def _configmap_version(directory: Path, stamp: str, text: str) -> None:
    """What the kubelet's AtomicWriter does on a ConfigMap update: a new ``..<stamp>`` directory,
    then ``..data`` swapped to it by a rename; ``config.yaml`` links to ``..data/config.yaml``."""
    (directory / stamp).mkdir()
    (directory / stamp / "config.yaml").write_text(text)
    (directory / "..data_tmp").symlink_to(stamp)
    (directory / "..data_tmp").rename(directory / "..data")
    if not (directory / "config.yaml").is_symlink():
        (directory / "config.yaml").symlink_to("..data/config.yaml")


def test_reload_follows_a_configmap_update(tmp_path: Path) -> None:
    """The file the daemon is given resolves into a versioned directory that the update abandons:
    the watch must be on the directory it was named in (found on the real kubelet)."""
    mounted = tmp_path / "configmap"
    mounted.mkdir()
    _configmap_version(mounted, "..2026_01_01_00_00_00.1", config_text(NULL))

    async def main() -> None:
        daemon = Daemon(tmp_path, config_text(NULL))
        daemon.config = mounted / "config.yaml"
        sim = KubeletSimulator(daemon.plugin_dir, grace_period=1.0)
        await sim.start()
        daemon.start()
        try:
            await sim.wait_until(lambda: sim.allocatable().get(NULL) == 4, TIMEOUT)
            _configmap_version(mounted, "..2026_01_01_00_01_00.2", config_text(NULL, SERIAL))
            await sim.wait_until(lambda: sim.allocatable().get(SERIAL) == 1, TIMEOUT)
        finally:
            code = await asyncio.to_thread(daemon.stop)
            await sim.stop()
        assert code == 0, daemon.log.read_text()

    asyncio.run(main())


def test_bad_config_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    resource = "resources:\n  - name: example.com/x\n    static: {count: 1, paths: [/dev/null]}\n"
    cases = {
        "resources:\n  - name: example.com/x\n    static: {count: 4, paths: [dev/null]}\n": "resources[0].static.paths",
        "resources:\n  - name: x\n    static: {count: 1, paths: [/dev/null]}\n": "resources[0].name",
        "resources: [\n": "bad.yaml:2",
        "plugin_dir: rel\n" + resource: "plugin_dir",
    }
    for text, field in cases.items():
        bad.write_text(text)
        result = subprocess.run(
            [sys.executable, "-m", "kubedevice", "serve", "--config", str(bad), "--plugin-dir", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and field in lines[0] and "Traceback" not in result.stderr, result.stderr
    result = subprocess.run(
        [sys.executable, "-m", "kubedevice", "serve", "--config", str(tmp_path / "missing.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1


def test_health_check_failures_are_counted_by_check_type(tmp_path: Path) -> None:
    config = (
        f'resources:\n  - name: {SERIAL}\n    glob: {{paths: ["/dev/ttyUSB*"]}}\n'
        "    health: {interval_seconds: 0.1, checks: [{type: exec, argv: [/bin/false]}]}\n"
    )

    async def main() -> None:
        async with daemon_and_kubelet(tmp_path, config) as (daemon, sim):
            await sim.wait_until(lambda: sim.capacity().get(SERIAL) == 1 and sim.allocatable()[SERIAL] == 0, TIMEOUT)
            await eventually(
                lambda: daemon.metric("kubedevice_health_check_failures_total", resource=SERIAL, check="exec") >= 2,
                "failed checks counted",
            )
            assert daemon.metric("kubedevice_devices", resource=SERIAL, health="unhealthy") == 1

    asyncio.run(main())


def test_missing_host_root_is_one_line_and_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(config_text(NULL))
    result = subprocess.run(
        [sys.executable, "-m", "kubedevice", "serve", "--config", str(config), "--host-root", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().count("\n") == 0 and "nope" in result.stderr, result.stderr


def test_a_socket_path_over_107_bytes_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """gRPC would only say "failed to bind" (a traceback); the kernel's limit is named instead."""
    config = tmp_path / "c.yaml"
    config.write_text(config_text(NULL))
    deep = tmp_path / ("d" * max(1, 108 - len(str(tmp_path))))
    deep.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "kubedevice", "serve", "--config", str(config), "--plugin-dir", str(deep)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith(f"kubedevice: socket path {deep}/"), result.stderr
    assert result.stderr.strip().count("\n") == 0 and "longer than 107" in result.stderr, result.stderr
    assert list(deep.iterdir()) == []


def test_a_socket_path_of_exactly_107_bytes_is_served(tmp_path: Path) -> None:
    """The kernel's limit, not grpc's: ``unix://PATH`` binds only up to 105 bytes, ``unix:PATH`` 107."""
    name = endpoint_for(NULL)
    room = 107 - len(f"{tmp_path}/") - len(f"/plugins/{name}")
    assert room > 0
    deep = tmp_path / ("d" * room)
    deep.mkdir()
    assert len(os.fsencode(deep / "plugins" / name)) == 107

    async def main() -> None:
        async with daemon_and_kubelet(deep, config_text(NULL)) as (daemon, sim):
            await sim.wait_until(lambda: sim.allocatable().get(NULL) == 4, TIMEOUT)
            assert (daemon.plugin_dir / name).is_socket()

    asyncio.run(main())


def serve_args(config: Path, plugin_dir: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "kubedevice",
        "serve",
        "--config",
        str(config),
        "--plugin-dir",
        str(plugin_dir),
        *extra,
    ]


def sigterm_caught(pid: int) -> bool:
    """Whether the process has a handler for SIGTERM (``SigCgt`` in /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    return False


def test_sigterm_while_loading_the_config_is_a_clean_stop(tmp_path: Path) -> None:
    """The config is a FIFO, so serve is provably inside config loading when SIGTERM comes."""
    fifo, plugin_dir = tmp_path / "config.yaml", tmp_path / "plugins"
    os.mkfifo(fifo)
    plugin_dir.mkdir()
    proc = subprocess.Popen(serve_args(fifo, plugin_dir), stderr=subprocess.PIPE, text=True)
    with fifo.open("w") as writer:  # returns once serve has opened the FIFO to read its config
        proc.send_signal(signal.SIGTERM)
        writer.write(config_text(NULL))
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert "received SIGTERM: stopping" in stderr and "Traceback" not in stderr
    assert list(plugin_dir.iterdir()) == []


def test_sigterm_right_after_spawn_is_a_clean_stop(tmp_path: Path) -> None:
    daemon = Daemon(tmp_path, config_text(NULL))
    daemon.start()
    assert daemon.proc is not None
    deadline = time.monotonic() + TIMEOUT
    while not sigterm_caught(daemon.proc.pid) and time.monotonic() < deadline:
        pass  # no sleep: signal at the first moment a handler exists
    assert daemon.stop() == 0, daemon.log.read_text()
    assert "received SIGTERM: stopping" in daemon.log.read_text()
    assert not [p for p in daemon.plugin_dir.iterdir() if p.is_socket()]


def test_a_second_serve_or_a_file_at_the_endpoint_is_refused_in_one_line(tmp_path: Path) -> None:
    async def main() -> None:
        daemon = Daemon(tmp_path, config_text(NULL))
        daemon.start()
        endpoint = daemon.plugin_dir / endpoint_for(NULL)
        try:
            await eventually(endpoint.is_socket, "first serve listening")
            inode = endpoint.stat().st_ino
            second = await asyncio.to_thread(
                subprocess.run,
                serve_args(daemon.config, daemon.plugin_dir, "--host-root", str(daemon.host)),
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert second.returncode == 1, second.stderr
            assert second.stderr.strip() == (
                f"kubedevice: {endpoint} is served by another live process (a second kubedevice serve?): "
                "refusing to replace it"
            )
            assert endpoint.stat().st_ino == inode  # the first one's socket is untouched
        finally:
            assert await asyncio.to_thread(daemon.stop) == 0

    asyncio.run(main())
    endpoint = tmp_path / "plugins" / endpoint_for(NULL)
    endpoint.write_text("someone else's file\n")
    result = subprocess.run(
        serve_args(tmp_path / "config.yaml", tmp_path / "plugins", "--host-root", str(tmp_path / "host")),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.strip() == f"kubedevice: {endpoint} exists and is not a socket: refusing to replace it"
    assert endpoint.read_text() == "someone else's file\n"


def test_serve_never_deletes_the_kubelets_socket(tmp_path: Path) -> None:
    async def main() -> None:
        async with daemon_and_kubelet(tmp_path, config_text(NULL)) as (daemon, sim):
            await sim.wait_until(lambda: sim.allocatable().get(NULL) == 4, TIMEOUT)
            inode = sim.kubelet_sock.stat().st_ino
            await asyncio.to_thread(daemon.stop)
            assert sim.kubelet_sock.is_socket() and sim.kubelet_sock.stat().st_ino == inode
            with socket.socket(socket.AF_UNIX) as probe:
                probe.connect(str(sim.kubelet_sock))  # still the live kubelet's
            daemon.start()  # a second run meets the live kubelet.sock at start-up
            before = len(sim.registrations)
            await sim.wait_until(lambda: len(sim.registrations) > before, TIMEOUT)
            assert sim.kubelet_sock.stat().st_ino == inode

    asyncio.run(main())


def test_readiness_drops_when_the_kubelet_exits_and_returns_with_it(tmp_path: Path) -> None:
    """No restart wipe here: the simulator just exits, as a crashed or stopped kubelet does."""

    async def main() -> None:
        daemon = Daemon(tmp_path, config_text(NULL))
        daemon.start()
        try:
            sim = KubeletSimulator(daemon.plugin_dir)
            await sim.start()
            await eventually(lambda: daemon.get("/readyz")[0] == 200, "ready after registration")
            await sim.stop()
            assert (daemon.plugin_dir / endpoint_for(NULL)).is_socket()
            await eventually(lambda: daemon.get("/readyz")[0] == 503, "unready once the kubelet is gone")
            await eventually(lambda: "lost the kubelet" in daemon.log.read_text(), "loss logged")
            sim = KubeletSimulator(daemon.plugin_dir)
            await sim.start()
            await eventually(lambda: daemon.get("/readyz")[0] == 200, "ready after re-registration")
            await sim.stop()
        finally:
            assert await asyncio.to_thread(daemon.stop) == 0
        log = daemon.log.read_text()
        # Which the daemon sees first, the stream closing or kubelet.sock going, is the simulator's race.
        why = r"(its ListAndWatch stream closed|\S+ was removed)"
        assert re.search(rf"lost the kubelet \({why}\): {NULL} no longer registered", log)
        assert "received SIGTERM: stopping" in log

    asyncio.run(main())


def test_a_missing_plugin_dir_is_not_created_and_is_waited_for(tmp_path: Path) -> None:
    async def main() -> None:
        daemon = Daemon(tmp_path, config_text(NULL))
        daemon.plugin_dir.rmdir()
        daemon.start()
        try:
            await eventually(lambda: "waiting for it to appear" in daemon.log.read_text(), "wait logged")
            assert not daemon.plugin_dir.exists()
            sim = KubeletSimulator(daemon.plugin_dir)  # a kubelet's first start makes the directory
            await sim.start()
            await sim.wait_until(lambda: sim.allocatable().get(NULL) == 4, TIMEOUT)
            await sim.stop()
        finally:
            assert await asyncio.to_thread(daemon.stop) == 0
        assert f"plugin directory {daemon.plugin_dir} does not exist" in daemon.log.read_text()

    asyncio.run(main())
    typo = tmp_path / "typo" / "dir"
    proc = subprocess.Popen(serve_args(tmp_path / "config.yaml", typo), stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        if "waiting for it to appear" in line:
            break
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(TIMEOUT) == 0 and not (tmp_path / "typo").exists()


def test_serve_a_glob_with_the_default_host_root(tmp_path: Path) -> None:
    """No --host-root: the config's default '/' must work for a glob (it failed with '//dev/null')."""
    config, plugin_dir = tmp_path / "c.yaml", tmp_path / "plugins"
    config.write_text('resources:\n  - name: a.com/null\n    glob: {paths: ["/dev/null"]}\n')
    plugin_dir.mkdir()

    async def main() -> None:
        sim = KubeletSimulator(plugin_dir)
        await sim.start()
        proc = subprocess.Popen(serve_args(config, plugin_dir), stderr=subprocess.PIPE)
        try:
            await sim.wait_until(lambda: sim.allocatable().get("a.com/null") == 1, TIMEOUT)
        finally:
            proc.send_signal(signal.SIGTERM)
            _, stderr = await asyncio.to_thread(proc.communicate, timeout=TIMEOUT)
            await sim.stop()
        assert proc.returncode == 0, stderr

    asyncio.run(main())


def test_ready_for_systemd_once_the_plugins_are_served(tmp_path: Path) -> None:
    """``Type=notify``: READY=1 reaches $NOTIFY_SOCKET only when our plugin's socket is served, so a
    kubelet ordered after us never starts before it; nothing is sent without the variable."""
    notify = tmp_path / "notify"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as listener:
        listener.bind(str(notify))
        listener.settimeout(TIMEOUT)
        plugin_dir = tmp_path / "plugins"
        plugin_dir.mkdir()
        config = tmp_path / "config.yaml"
        config.write_text(config_text(NULL))
        proc = subprocess.Popen(
            serve_args(config, plugin_dir),
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "NOTIFY_SOCKET": str(notify)},
        )
        try:
            assert listener.recv(64) == b"READY=1"
            assert (plugin_dir / endpoint_for(NULL)).is_socket()  # served before READY, not after
        finally:
            proc.send_signal(signal.SIGTERM)
            _, stderr = proc.communicate(timeout=TIMEOUT)
        assert proc.returncode == 0, stderr
        assert "told systemd we are ready" in stderr
