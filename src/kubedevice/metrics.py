"""Prometheus metrics, liveness and readiness over one small asyncio HTTP server.

``prometheus_client`` is imported only when a :class:`Metrics` is built, so a library user
who never turns metrics on does not pay for it. The HTTP server is a few dozen lines on
``asyncio.start_server``: three fixed GET endpoints do not justify a web framework, and it
runs on the daemon's own event loop instead of the extra thread ``prometheus_client``'s
server would start.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import os
import re
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .errors import DependencyError, os_reason

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric

    from .device import Device
    from .podresources.attribution import Attribution
    from .podresources.model import Holder

ALLOCATION_RESULTS = ("ok", "invalid_argument", "failed_precondition", "internal")
REGISTRATION_RESULTS = ("ok", "rejected", "error")
HOTPLUG_ACTIONS = ("added", "removed")
# Allocate answers in well under a millisecond; ListAndWatch streams are not timed here.
RPC_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)


class Metrics:
    """Every kubedevice metric, on a registry of its own.

    A private registry (plus the process, platform and GC collectors) keeps one daemon's
    series apart from anything else imported in the process and lets tests build as many
    as they like. Each resource's label sets are created at zero on first sight so that
    ``rate()`` and ``increase()`` work from the first event, as Prometheus advises.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        import prometheus_client as prom  # noqa: PLC0415 - lazy on purpose, see the module docstring

        from . import __version__  # noqa: PLC0415 - the package imports nothing from here

        own = registry is None
        self.registry: CollectorRegistry | None = prom.CollectorRegistry() if registry is None else registry
        reg = self.registry
        if own:
            prom.ProcessCollector(registry=reg)
            prom.PlatformCollector(registry=reg)
            prom.GCCollector(registry=reg)
        prom.Gauge("kubedevice_build_info", "Version of the running kubedevice.", ["version"], registry=reg).labels(
            __version__
        ).set(1)
        self._devices = prom.Gauge(
            "kubedevice_devices", "Devices advertised to the kubelet, by health.", ["resource", "health"], registry=reg
        )
        self._allocations = prom.Counter(
            "kubedevice_allocations", "Allocate calls by result.", ["resource", "result"], registry=reg
        )
        self._preferred = prom.Counter(
            "kubedevice_preferred_allocations",
            "GetPreferredAllocation calls by result.",
            ["resource", "result"],
            registry=reg,
        )
        self._rpc = prom.Histogram(
            "kubedevice_rpc_duration_seconds",
            "Time to answer a device plugin RPC.",
            ["resource", "method"],
            buckets=RPC_BUCKETS,
            registry=reg,
        )
        self._registrations = prom.Counter(
            "kubedevice_registrations", "Register calls to the kubelet by result.", ["resource", "result"], registry=reg
        )
        self._kubelet_restarts = prom.Counter(
            "kubedevice_kubelet_restarts", "Kubelet restarts seen (its socket re-created).", registry=reg
        )
        self._hotplug = prom.Counter(
            "kubedevice_hotplug_events", "Devices that appeared or disappeared.", ["resource", "action"], registry=reg
        )
        self._health_failures = prom.Counter(
            "kubedevice_health_check_failures",
            "Health checks that found a device unhealthy.",
            ["resource", "check"],
            registry=reg,
        )
        self._seen: set[str] = set()
        self._seen_lock = threading.Lock()
        # Every labelled child, by (metric, resource, label): ``labels()`` takes a lock and
        # validates on every call, which these calls on every RPC's path avoid; and
        # forget() knows from here exactly which series a resource has.
        self._children: dict[tuple[Any, str, str], Any] = {}
        self._before_scrape: list[Callable[[], Awaitable[None]]] = []

    @classmethod
    def disabled(cls) -> Metrics:
        """A do-nothing stand-in: callers record unconditionally, and it costs a method call."""
        return _DisabledMetrics()

    @property
    def enabled(self) -> bool:
        return True

    def _see(self, resource: str) -> None:
        """Create the resource's known label sets at zero, once."""
        if resource in self._seen:
            return
        with self._seen_lock:
            if resource in self._seen:
                return
            for result in ALLOCATION_RESULTS:
                self._child(self._allocations, resource, result)
                self._child(self._preferred, resource, result)
            for result in REGISTRATION_RESULTS:
                self._child(self._registrations, resource, result)
            for action in HOTPLUG_ACTIONS:
                self._child(self._hotplug, resource, action)
            self._seen.add(resource)

    def _child(self, metric: Any, resource: str, label: str) -> Any:
        key = (metric, resource, label)
        child = self._children.get(key)
        if child is None:
            child = self._children.setdefault(key, metric.labels(resource, label))
        return child

    def set_devices(self, resource: str, healthy: int, unhealthy: int) -> None:
        self._see(resource)
        self._child(self._devices, resource, "healthy").set(healthy)
        self._child(self._devices, resource, "unhealthy").set(unhealthy)

    def forget(self, resource: str) -> None:
        """Drop a resource's series, e.g. when a config reload removes it, so no stale gauge lingers."""
        with self._seen_lock:
            self._seen.discard(resource)
            for key in [key for key in list(self._children) if key[1] == resource]:
                metric, _, label = key
                del self._children[key]
                metric.remove(resource, label)

    def allocation(self, resource: str, result: str) -> None:
        self._see(resource)
        self._child(self._allocations, resource, result).inc()

    def preferred_allocation(self, resource: str, result: str) -> None:
        self._see(resource)
        self._child(self._preferred, resource, result).inc()

    def observe_rpc(self, resource: str, method: str, seconds: float) -> None:
        self._child(self._rpc, resource, method).observe(seconds)

    def registration(self, resource: str, result: str) -> None:
        self._see(resource)
        self._child(self._registrations, resource, result).inc()

    def kubelet_restart(self) -> None:
        self._kubelet_restarts.inc()

    def hotplug(self, resource: str, action: str) -> None:
        self._see(resource)
        self._child(self._hotplug, resource, action).inc()

    def health_check_failure(self, resource: str, check: str) -> None:
        self._child(self._health_failures, resource, check).inc()

    def before_scrape(self, refresh: Callable[[], Awaitable[None]]) -> None:
        """Await ``refresh`` on the daemon's loop before each ``/metrics`` answer is rendered."""
        self._before_scrape.append(refresh)

    async def refresh(self) -> None:
        for refresh in self._before_scrape:
            await refresh()

    def attribute(self, collector: AttributedDevices) -> None:
        """Serve ``collector``'s series, rebuilt before each scrape."""
        assert self.registry is not None
        self.registry.register(collector)
        self.before_scrape(collector.refresh)

    def attribute_devices(
        self, attribution: Attribution, devices: Callable[[], Mapping[str, Sequence[Device]]]
    ) -> None:
        """``kubedevice_device_healthy``: each device of ``devices()`` (by resource), labelled with
        the container holding it by ``attribution``."""

        def rows(held: Sequence[Holder]) -> Iterator[Row]:
            from .podresources.attribution import attributed  # noqa: PLC0415 - grpc only when used

            listed = devices()
            ours = [((name, d.id), d.healthy) for name, found in listed.items() for d in found]
            theirs = [((h.resource, h.device), h) for h in held if h.resource in listed]
            return ((key + holder_labels(h), value) for key, h, value in attributed(ours, theirs))

        labels = ["resource", "device"]
        self.attribute(AttributedDevices(attribution, "kubedevice_device_healthy", DEVICE_HEALTHY_HELP, labels, rows))

    def exposition(self, accept: str = "") -> tuple[bytes, str]:
        """The scrape body and its content type, in the format the scraper asked for."""
        from prometheus_client.exposition import choose_encoder  # noqa: PLC0415

        assert self.registry is not None
        encoder, content_type = choose_encoder(accept)
        return encoder(self.registry), content_type


class _DisabledMetrics(Metrics):
    """Metrics off: no prometheus_client import, no registry, every record a no-op."""

    def __init__(self) -> None:  # deliberately not calling super(): that is the whole point
        self.registry = None

    @property
    def enabled(self) -> bool:
        return False

    def set_devices(self, resource: str, healthy: int, unhealthy: int) -> None:
        pass

    def forget(self, resource: str) -> None:
        pass

    def allocation(self, resource: str, result: str) -> None:
        pass

    def preferred_allocation(self, resource: str, result: str) -> None:
        pass

    def observe_rpc(self, resource: str, method: str, seconds: float) -> None:
        pass

    def registration(self, resource: str, result: str) -> None:
        pass

    def kubelet_restart(self) -> None:
        pass

    def hotplug(self, resource: str, action: str) -> None:
        pass

    def health_check_failure(self, resource: str, check: str) -> None:
        pass

    def before_scrape(self, refresh: Callable[[], Awaitable[None]]) -> None:
        pass

    def attribute(self, collector: AttributedDevices) -> None:
        pass

    def attribute_devices(
        self, attribution: Attribution, devices: Callable[[], Mapping[str, Sequence[Device]]]
    ) -> None:
        pass


POD_LABELS = ("pod", "namespace", "container")
UP_HELP = "1 if the kubelet's PodResources API answered before this scrape, else 0 (no pod labels then)."
DEVICE_HEALTHY_HELP = (
    "1 if the device is healthy, 0 if not (or gone while a container holds it); one series per container "
    "holding it (pod, namespace, container from the kubelet's PodResources API), one with empty pod labels "
    "while it is free or the API does not answer."
)
Row = tuple[tuple[str, ...], float]
"""A series: its label values and its value."""


def holder_labels(holder: Holder | None) -> tuple[str, str, str]:
    """``POD_LABELS`` of a holder; empty for a free device (Prometheus reads an empty label as none)."""
    return (holder.pod, holder.namespace, holder.container) if holder else ("", "", "")


class AttributedDevices:
    """A collector: one gauge per device and container holding it, and ``kubedevice_pod_resources_up``.

    ``rows(holders)`` turns the kubelet's answer into label values (``labels`` then
    ``POD_LABELS``) and values. They are built on the daemon's loop before each scrape, from
    the devices and the answer of that moment; ``collect()``, on the exposition thread, only
    reads them, so a series outlives its pod or device by no more than a scrape.
    """

    def __init__(
        self,
        attribution: Attribution,
        name: str,
        documentation: str,
        labels: Sequence[str],
        rows: Callable[[Sequence[Holder]], Iterable[Row]],
    ) -> None:
        self._attribution = attribution
        self._name = name
        self._documentation = documentation
        self._labels = [*labels, *POD_LABELS]
        self._build = rows
        self._rows: tuple[Row, ...] = ()

    async def refresh(self) -> None:
        await self._attribution.refresh()
        self._rows = tuple(self._build(self._attribution.holders))

    def describe(self) -> list[Metric]:
        return []  # nothing to check at registration; collect() is called only on scrapes

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily  # noqa: PLC0415

        family = GaugeMetricFamily(self._name, self._documentation, labels=self._labels)
        for labels, value in self._rows:
            family.add_metric(labels, value)
        yield family
        yield GaugeMetricFamily("kubedevice_pod_resources_up", UP_HELP, value=1.0 if self._attribution.up else 0.0)


class Readiness:
    """Which configured resources are registered with the kubelet and serving.

    Updated from gRPC and watcher threads and read by the HTTP handler, hence the lock.
    Resources outside the configured set are ignored: a plugin that is shutting down after
    a reload removed it must not make the daemon unready for good.
    """

    def __init__(self, resources: Iterable[str]) -> None:
        self._lock = threading.Lock()
        self._state: dict[str, bool] = dict.fromkeys(resources, False)

    def configure(self, resources: Iterable[str]) -> None:
        """Replace the configured set (config reload), keeping the state of resources that stay."""
        with self._lock:
            self._state = {name: self._state.get(name, False) for name in resources}

    def set_registered(self, resource: str, registered: bool) -> None:
        with self._lock:
            if resource in self._state:
                self._state[resource] = registered

    def ready(self) -> bool:
        with self._lock:
            return all(self._state.values())

    def detail(self) -> dict[str, bool]:
        with self._lock:
            return dict(self._state)


# -- HTTP ---------------------------------------------------------------------------
MAX_REQUEST_HEAD = 8192
REQUEST_TIMEOUT = 5.0
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}
_TEXT = "text/plain; charset=utf-8"


def parse_address(address: str) -> tuple[str | None, int]:
    """``HOST:PORT``, ``:PORT`` (all interfaces) or ``[V6]:PORT`` to what asyncio binds.

    HOST is an IP address or a host name (letters, digits, '-', '.'), an IPv6 address in brackets;
    anything else is refused here, not left to the resolver to fail on.
    """
    host, sep, port_text = address.rpartition(":")
    bracketed = host.startswith("[") and host.endswith("]")
    host = host[1:-1] if bracketed else host
    if not sep or not port_text.isdigit() or int(port_text) > 65535 or not _is_host(host, bracketed):
        raise ValueError(f"metrics address {address!r}: expected HOST:PORT, e.g. ':9500' or '127.0.0.1:0'")
    return (host or None), int(port_text)


_HOST_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?\Z")


def _is_host(host: str, bracketed: bool) -> bool:
    """An empty host (every interface), an IP address (IPv6 only in brackets) or a host name."""
    try:
        return isinstance(ipaddress.ip_address(host), ipaddress.IPv6Address) == bracketed
    except ValueError:
        return not bracketed and (host == "" or _HOST_NAME.match(host) is not None)


class ListenError(DependencyError):
    """The metrics address cannot be listened on (taken, not this machine's, a privileged port)."""


_LISTEN_ADVICE = {
    errno.EADDRINUSE: "another process listens there: stop it or choose another port",
    errno.EADDRNOTAVAIL: "not an address of this machine",
    errno.EACCES: "ports below 1024 need root or CAP_NET_BIND_SERVICE",
}


def listen_error(address: str, err: OSError) -> ListenError:
    """``--metrics-address 127.0.0.1:9400: address already in use (another process listens there: ...)``.

    asyncio words a failed bind with the address repeated; the reason is the errno's own text.
    """
    code = err.errno if err.errno is not None and err.errno > 0 else 0  # a resolver's error is negative
    reason = os.strerror(code).lower() if code else os_reason(err)
    advice = _LISTEN_ADVICE.get(code)
    return ListenError(f"--metrics-address {address}: {reason}" + (f" ({advice})" if advice else ""))


class MetricsServer:
    """The running /metrics, /healthz and /readyz endpoint."""

    def __init__(self, metrics: Metrics, readiness: Readiness) -> None:
        self._metrics = metrics
        self._readiness = readiness
        self._server: asyncio.Server | None = None

    async def listen(self, host: str | None, port: int) -> None:
        self._server = await asyncio.start_server(self.handle, host, port, limit=MAX_REQUEST_HEAD, reuse_address=True)

    @property
    def port(self) -> int:
        assert self._server is not None, "listen() first"
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer one request and close: probes and scrapers do not need keep-alive."""
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_TIMEOUT)
        except (asyncio.LimitOverrunError, asyncio.IncompleteReadError, TimeoutError, ConnectionError):
            writer.close()  # a client that sends no complete head within limits gets nothing
            return
        status, headers, body = await self.respond(head.decode("latin-1"))
        payload = b"" if head.startswith(b"HEAD ") else body
        writer.write(_response(status, headers, payload, len(body)))
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()

    async def respond(self, head: str) -> tuple[int, dict[str, str], bytes]:
        """Route a request head to (status, headers, body)."""
        request_line, *header_lines = head.split("\r\n")
        parts = request_line.split(" ")
        if len(parts) != 3:
            return 400, {"Content-Type": _TEXT}, b"bad request\n"
        method, target, _ = parts
        if method not in ("GET", "HEAD"):
            return 405, {"Content-Type": _TEXT, "Allow": "GET, HEAD"}, b"method not allowed\n"
        path = target.split("?", 1)[0]
        if path == "/healthz":
            return 200, {"Content-Type": _TEXT}, b"ok\n"
        if path == "/readyz":
            return self._readyz()
        if path == "/metrics" and self._metrics.enabled:
            await self._metrics.refresh()  # e.g. which pod holds which device, asked of the kubelet now
            # Off the loop: a big registry takes milliseconds to render, and the GIL's switch
            # interval then lets gRPC handlers on the loop interleave instead of waiting.
            body, content_type = await asyncio.to_thread(self._metrics.exposition, _header(header_lines, "accept"))
            return 200, {"Content-Type": content_type}, body
        return 404, {"Content-Type": _TEXT}, b"not found\n"

    def _readyz(self) -> tuple[int, dict[str, str], bytes]:
        """Kubernetes' verbose readyz style: one [+]/[-] line per resource, then the verdict."""
        detail = self._readiness.detail()
        lines = [
            f"[{'+' if ok else '-'}]{name} {'registered' if ok else 'not registered'}"
            for name, ok in sorted(detail.items())
        ]
        ready = all(detail.values())
        lines.append("readyz check passed" if ready else "readyz check failed")
        return (200 if ready else 503), {"Content-Type": _TEXT}, ("\n".join(lines) + "\n").encode()


def _header(lines: list[str], name: str) -> str:
    for line in lines:
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() == name:
            return value.strip()
    return ""


def _response(status: int, headers: dict[str, str], body: bytes, length: int) -> bytes:
    head = [f"HTTP/1.1 {status} {_REASONS[status]}", f"Content-Length: {length}", "Connection: close"]
    head += [f"{key}: {value}" for key, value in headers.items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


async def start_http_server(address: str, metrics: Metrics, readiness: Readiness) -> MetricsServer:
    """Serve /metrics, /healthz and /readyz on ``address`` (port 0 picks a free port).

    :class:`ListenError` (one line naming the address and what to do) when it cannot listen there.
    """
    server = MetricsServer(metrics, readiness)
    try:
        await server.listen(*parse_address(address))
    except OSError as err:  # the port taken, an address not this machine's, a name that does not resolve
        raise listen_error(address, err) from None
    return server
