"""The end of a gRPC-serving process waits for grpc.aio's call tasks (kubedevice.eventloop)."""

from __future__ import annotations

import asyncio
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from grpc import aio

from kubedevice import Device, Plugin, eventloop
from kubedevice.api import api_pb2 as pb
from kubedevice.api import api_pb2_grpc as pb_grpc
from kubedevice.plugin.server import PluginServer


async def _grpc_like_call(turns: int) -> None:
    """What grpc.aio's ``_schedule_rpc_coro`` does for a call: a task named ``rpc_task`` that
    awaits the handler's task and prints whatever that await raises, CancelledError included;
    the handler ends ``turns`` loop turns later, as a completion still on its way would."""

    async def handler() -> None:
        for _ in range(turns):
            await asyncio.sleep(0)

    async def schedule() -> None:
        call = asyncio.create_task(handler(), name="HandleExceptions[/v1beta1.DevicePlugin/ListAndWatch]")
        try:
            await call
        except:  # noqa: E722 - as grpc's own code, which is what is being reproduced
            traceback.print_exc()

    _kept.add(asyncio.create_task(schedule(), name=eventloop.GRPC_CALL_TASK))  # as grpc keeps its own
    await asyncio.sleep(0)


_kept: set[asyncio.Task[None]] = set()


@pytest.mark.parametrize(("runner", "printed"), [(asyncio.run, True), (eventloop.run, False)])
def test_a_call_task_still_running_when_main_returns_is_waited_for(
    runner: Callable[[Any], None], printed: bool, capfd: pytest.CaptureFixture[str]
) -> None:
    runner(_grpc_like_call(turns=5))
    assert ("CancelledError" in capfd.readouterr().err) is printed


def test_the_wait_is_bounded() -> None:
    async def main() -> float:
        stuck = asyncio.create_task(asyncio.sleep(3600), name=eventloop.GRPC_CALL_TASK)
        start = time.monotonic()
        await eventloop.grpc_calls_settled(timeout=0.2)
        stuck.cancel()
        return time.monotonic() - start

    assert 0.15 < asyncio.run(main()) < 5


def test_grpc_names_its_call_tasks_as_the_wait_expects_and_they_end_after_stop(tmp_path: Path) -> None:
    """Against the real grpc.aio: an open ListAndWatch is a task of that name, and once the server
    is stopped (grace 0: every call cancelled) the wait leaves none of them running."""

    async def main() -> tuple[int, int]:
        server = PluginServer(Plugin("example.com/null", [Device("null-0")]), tmp_path / "p.sock")
        await server.serve()
        channel = aio.insecure_channel(f"unix://{tmp_path}/p.sock")
        stream = pb_grpc.DevicePluginStub(channel).ListAndWatch(pb.Empty())
        await stream.read()
        during = sum(t.get_name() == eventloop.GRPC_CALL_TASK for t in asyncio.all_tasks())
        await server.stop(grace=0)
        await eventloop.grpc_calls_settled()
        after = sum(t.get_name() == eventloop.GRPC_CALL_TASK and not t.done() for t in asyncio.all_tasks())
        await channel.close()
        return during, after

    assert asyncio.run(main()) == (1, 0)


# Modules that run an event loop with no gRPC server in it: a client of the API server or the
# kubelet, a TCP relay, the host service's supervisor (it runs the daemon as a process).
NO_GRPC_SERVER = {
    "dra/live/cli.py",
    "node/hostservice_cli.py",
    "podresources/client.py",
    "testing/relay.py",
}


def test_every_process_that_serves_grpc_ends_through_eventloop_run() -> None:
    """``asyncio.run`` is called only where no gRPC server runs: every daemon, simulator, checker
    and the demo end through :func:`kubedevice.eventloop.run` (a new one must too)."""
    package = Path(eventloop.__file__).parent
    direct = {
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if "asyncio.run(" in path.read_text() and path.name != "eventloop.py"
    }
    assert direct == NO_GRPC_SERVER
