"""Metrics, /healthz and /readyz over real HTTP on a real socket, scraped with urllib."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

import kubedevice
from kubedevice.metrics import ListenError, Metrics, MetricsServer, Readiness, parse_address, start_http_server

R = "example.com/null"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def fetch(
    port: int, path: str, method: str = "GET", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def parse(body: bytes) -> Samples:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def serve(
    body: Callable[[MetricsServer, Metrics, Readiness], Awaitable[None]],
    metrics: Metrics | None = None,
    resources: tuple[str, ...] = (R,),
) -> None:
    """Run ``body`` against a server on an ephemeral loopback port, then close it."""

    async def main() -> None:
        m = Metrics() if metrics is None else metrics
        readiness = Readiness(resources)
        server = await start_http_server("127.0.0.1:0", m, readiness)
        try:
            await body(server, m, readiness)
        finally:
            await server.close()

    asyncio.run(main())


async def scrape(server: MetricsServer) -> Samples:
    status, headers, body = await asyncio.to_thread(fetch, server.port, "/metrics")
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
    return parse(body)


# Each event, the call that records it, and the sample that must move by exactly one.
EVENTS: list[tuple[str, Callable[[Metrics], None], str, dict[str, str]]] = [
    ("allocation", lambda m: m.allocation(R, "ok"), "kubedevice_allocations_total", {"resource": R, "result": "ok"}),
    (
        "allocation rejected",
        lambda m: m.allocation(R, "invalid_argument"),
        "kubedevice_allocations_total",
        {"resource": R, "result": "invalid_argument"},
    ),
    (
        "preferred",
        lambda m: m.preferred_allocation(R, "ok"),
        "kubedevice_preferred_allocations_total",
        {"resource": R, "result": "ok"},
    ),
    (
        "registration",
        lambda m: m.registration(R, "ok"),
        "kubedevice_registrations_total",
        {"resource": R, "result": "ok"},
    ),
    (
        "registration error",
        lambda m: m.registration(R, "error"),
        "kubedevice_registrations_total",
        {"resource": R, "result": "error"},
    ),
    ("kubelet restart", lambda m: m.kubelet_restart(), "kubedevice_kubelet_restarts_total", {}),
    (
        "hotplug",
        lambda m: m.hotplug(R, "removed"),
        "kubedevice_hotplug_events_total",
        {"resource": R, "action": "removed"},
    ),
    (
        "health",
        lambda m: m.health_check_failure(R, "presence"),
        "kubedevice_health_check_failures_total",
        {"resource": R, "check": "presence"},
    ),
    (
        "rpc",
        lambda m: m.observe_rpc(R, "Allocate", 0.0004),
        "kubedevice_rpc_duration_seconds_count",
        {"resource": R, "method": "Allocate"},
    ),
]


@pytest.mark.parametrize(("event", "record", "name", "labels"), EVENTS, ids=[e[0] for e in EVENTS])
def test_each_metric_moves_by_one_when_its_event_happens(
    event: str, record: Callable[[Metrics], None], name: str, labels: dict[str, str]
) -> None:
    async def body(server: MetricsServer, m: Metrics, _: Readiness) -> None:
        m.registration(R, "rejected")  # the resource is known, so its label sets exist
        before = await scrape(server)
        record(m)
        after = await scrape(server)
        assert value(after, name, **labels) == value(before, name, **labels) + 1
        changed = {key for key in after if after[key] != before.get(key) and key[0].startswith("kubedevice_")}
        moved_names = {key[0] for key in changed if not key[0].endswith("_created")}
        assert moved_names <= {name, name.replace("_count", "_sum"), name.replace("_count", "_bucket")}

    serve(body)


def test_devices_gauge_follows_health_and_label_sets_start_at_zero() -> None:
    async def body(server: MetricsServer, m: Metrics, _: Readiness) -> None:
        m.set_devices(R, healthy=3, unhealthy=1)
        samples = await scrape(server)
        assert value(samples, "kubedevice_devices", resource=R, health="healthy") == 3
        assert value(samples, "kubedevice_devices", resource=R, health="unhealthy") == 1
        for result in ("ok", "invalid_argument", "failed_precondition", "internal"):
            assert ("kubedevice_allocations_total", frozenset({"resource": R, "result": result}.items())) in samples
        m.set_devices(R, healthy=4, unhealthy=0)
        samples = await scrape(server)
        assert value(samples, "kubedevice_devices", resource=R, health="healthy") == 4
        assert ("kubedevice_devices", frozenset({"resource": R, "health": "unhealthy"}.items())) in samples

    serve(body)


def test_rpc_histogram_resolves_sub_millisecond_latencies() -> None:
    async def body(server: MetricsServer, m: Metrics, _: Readiness) -> None:
        for seconds in (0.0002, 0.0004, 0.003):
            m.observe_rpc(R, "Allocate", seconds)
        samples = await scrape(server)
        bucket = "kubedevice_rpc_duration_seconds_bucket"
        assert value(samples, bucket, resource=R, method="Allocate", le="0.00025") == 1
        assert value(samples, bucket, resource=R, method="Allocate", le="0.0005") == 2
        assert value(samples, bucket, resource=R, method="Allocate", le="+Inf") == 3
        assert value(samples, "kubedevice_rpc_duration_seconds_sum", resource=R, method="Allocate") == pytest.approx(
            0.0036
        )

    serve(body)


def test_forget_drops_a_removed_resources_series_only() -> None:
    async def body(server: MetricsServer, m: Metrics, _: Readiness) -> None:
        for resource in (R, "example.com/other"):
            m.set_devices(resource, 2, 0)
            m.observe_rpc(resource, "Allocate", 0.001)
            m.health_check_failure(resource, "presence")
        m.forget(R)
        resources = {dict(labels).get("resource") for _, labels in await scrape(server)}
        assert "example.com/other" in resources
        assert R not in resources
        m.observe_rpc(R, "Allocate", 0.001)  # a resource that comes back is counted afresh
        assert value(await scrape(server), "kubedevice_rpc_duration_seconds_count", resource=R, method="Allocate") == 1

    serve(body)


def test_process_metrics_and_build_info_are_exposed() -> None:
    async def body(server: MetricsServer, _m: Metrics, _r: Readiness) -> None:
        samples = await scrape(server)
        assert value(samples, "process_resident_memory_bytes") > 1_000_000
        assert value(samples, "kubedevice_build_info", version=kubedevice.__version__) == 1

    serve(body)


def test_openmetrics_is_served_when_the_scraper_asks_for_it() -> None:
    async def body(server: MetricsServer, m: Metrics, _: Readiness) -> None:
        m.kubelet_restart()
        status, headers, raw = await asyncio.to_thread(
            fetch, server.port, "/metrics", "GET", {"Accept": "application/openmetrics-text; version=1.0.0"}
        )
        assert status == 200
        assert headers["Content-Type"].startswith("application/openmetrics-text")
        assert raw.endswith(b"# EOF\n")
        assert b"kubedevice_kubelet_restarts_total 1.0" in raw

    serve(body)


def test_caller_supplied_registry_gets_only_kubedevice_metrics() -> None:
    registry = CollectorRegistry()
    Metrics(registry).kubelet_restart()
    names = {metric.name for metric in registry.collect()}
    assert "kubedevice_kubelet_restarts" in names
    assert not any(name.startswith("process_") for name in names)
    Metrics()  # a second instance on its own registry does not clash
    Metrics()


def test_readyz_flips_on_registration_and_on_kubelet_restart() -> None:
    other = "example.com/other"

    async def body(server: MetricsServer, _: Metrics, readiness: Readiness) -> None:
        status, _h, text = await asyncio.to_thread(fetch, server.port, "/readyz")
        assert status == 503
        assert f"[-]{R} not registered".encode() in text and f"[-]{other}".encode() in text
        readiness.set_registered(R, True)
        status, _h, text = await asyncio.to_thread(fetch, server.port, "/readyz")
        assert status == 503
        assert f"[+]{R} registered".encode() in text and f"[-]{other} not registered".encode() in text
        readiness.set_registered(other, True)
        status, _h, text = await asyncio.to_thread(fetch, server.port, "/readyz")
        assert (status, text.splitlines()[-1]) == (200, b"readyz check passed")
        readiness.set_registered(other, False)  # the kubelet restarted: registration is gone
        status, _h, text = await asyncio.to_thread(fetch, server.port, "/readyz")
        assert status == 503
        assert text.splitlines()[-1] == b"readyz check failed"
        status, _h, text = await asyncio.to_thread(fetch, server.port, "/healthz")
        assert (status, text) == (200, b"ok\n")  # liveness does not depend on registration

    serve(body, resources=(R, other))


def test_readiness_ignores_unknown_resources_and_keeps_state_across_reconfigure() -> None:
    readiness = Readiness(["a", "b"])
    readiness.set_registered("a", True)
    readiness.set_registered("gone", False)
    assert readiness.detail() == {"a": True, "b": False}
    readiness.configure(["a", "c"])
    assert readiness.detail() == {"a": True, "c": False}
    assert not readiness.ready()
    readiness.set_registered("c", True)
    assert readiness.ready()


def test_http_edges_head_post_unknown_path_and_query() -> None:
    async def body(server: MetricsServer, _m: Metrics, _r: Readiness) -> None:
        status, headers, text = await asyncio.to_thread(fetch, server.port, "/healthz", "HEAD")
        assert (status, text, headers["Content-Length"]) == (200, b"", "3")
        status, headers, _ = await asyncio.to_thread(fetch, server.port, "/healthz", "POST")
        assert (status, headers["Allow"]) == (405, "GET, HEAD")
        assert (await asyncio.to_thread(fetch, server.port, "/nope"))[0] == 404
        assert (await asyncio.to_thread(fetch, server.port, "/readyz?verbose"))[0] == 503

    serve(body)


def test_garbage_and_oversized_requests_close_the_connection_and_server_keeps_serving() -> None:
    def raw(port: int, payload: bytes) -> bytes:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
            return sock.recv(65536)

    async def body(server: MetricsServer, _m: Metrics, _r: Readiness) -> None:
        assert await asyncio.to_thread(raw, server.port, b"GET /healthz") == b""  # no complete head
        assert await asyncio.to_thread(raw, server.port, b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n") == b""
        reply = await asyncio.to_thread(raw, server.port, b"NONSENSE\r\n\r\n")
        assert reply.startswith(b"HTTP/1.1 400 ")
        assert (await asyncio.to_thread(fetch, server.port, "/healthz"))[0] == 200

    serve(body)


def test_disabled_metrics_serve_probes_but_no_metrics() -> None:
    disabled = Metrics.disabled()
    assert not disabled.enabled
    disabled.allocation(R, "ok")
    disabled.observe_rpc(R, "Allocate", 1.0)
    disabled.kubelet_restart()
    disabled.set_devices(R, 1, 0)
    disabled.forget(R)

    async def body(server: MetricsServer, _m: Metrics, readiness: Readiness) -> None:
        readiness.set_registered(R, True)
        assert (await asyncio.to_thread(fetch, server.port, "/metrics"))[0] == 404
        assert (await asyncio.to_thread(fetch, server.port, "/readyz"))[0] == 200

    serve(body, metrics=disabled)


def test_the_library_does_not_import_prometheus_client_unless_metrics_are_on() -> None:
    code = (
        "import sys, kubedevice, kubedevice.metrics as m; m.Metrics.disabled(); m.Readiness(['a']);"
        "print('prometheus_client' in sys.modules); m.Metrics(); print('prometheus_client' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.split() == ["False", "True"]


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        (":9500", (None, 9500)),
        ("0.0.0.0:9500", ("0.0.0.0", 9500)),
        ("127.0.0.1:0", ("127.0.0.1", 0)),
        ("[::1]:8080", ("::1", 8080)),
        ("localhost:1", ("localhost", 1)),
    ],
)
def test_parse_address(address: str, expected: tuple[str | None, int]) -> None:
    assert parse_address(address) == expected


@pytest.mark.parametrize("address", ["9500", "host:", "host:port", ":65536", "", ":-1"])
def test_parse_address_rejects_bad_input_naming_it(address: str) -> None:
    with pytest.raises(ValueError, match="metrics address"):
        parse_address(address)


def test_bind_failure_raises_instead_of_serving_nothing() -> None:
    async def main() -> Any:
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            with pytest.raises(ListenError, match=f"--metrics-address 127.0.0.1:{port}: address already in use"):
                await start_http_server(f"127.0.0.1:{port}", Metrics.disabled(), Readiness([]))

    asyncio.run(main())
