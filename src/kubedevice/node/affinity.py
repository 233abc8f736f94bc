"""Run the daemon's threads on one CPU: the one it starts on, of those it may use.

Why: every gRPC call crosses two threads. grpc's completion-queue thread takes the call's events
off the wire and wakes the asyncio loop thread, which runs the handler and hands the answer back,
three or four hand-offs per unary call. When the two threads sit on different CPUs each hand-off
is a cross-CPU wake-up, an inter-processor interrupt, which on a virtual machine (most nodes) is a
VM exit. On one CPU they are a context switch. Measured on this project's 2-CPU VM with a real
``kubedevice serve`` (DRA, claims from files): NodeUnprepareResources for one claim 1.20-1.27 ms
-> 0.93-1.02 ms at the median in three interleaved runs; with a busy loop pinned to that very CPU
0.80-1.03 ms against 1.08-1.24 ms unpinned (the kernel's scheduler runs a thread that slept
before a CPU hog). Python runs one thread at a time anyway (the GIL), so one CPU takes no
parallelism from the daemon.

The CPU stays within the process's allowed set, so a container's cpuset is respected; if the set
changes later (the kubelet's CPU manager giving that CPU to a pod), the kernel resets the threads'
affinity to the new set. ``serve --all-cpus`` leaves the kernel's choice alone.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)


def current_cpu() -> int | None:
    """The CPU this thread last ran on (``/proc/self/stat``'s 39th field), None where unknown."""
    try:
        stat = Path("/proc/thread-self/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # after "(comm)", which may hold spaces
    try:
        return int(fields[36])  # field 39 overall; fields[0] is field 3 (state)
    except (IndexError, ValueError):
        return None


def pin_to_one_cpu() -> int | None:
    """Pin every thread of this process (and so every later one, which inherits it) to one CPU of
    its allowed set; the CPU, or None when there is nothing to choose or the system refuses."""
    try:
        allowed = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        return None
    if len(allowed) < 2:
        return None
    cpu = current_cpu()
    if cpu not in allowed:
        cpu = max(allowed)
    pinned = False
    for task in _threads():
        try:
            os.sched_setaffinity(task, {cpu})
            pinned = True
        except OSError as err:  # a thread that ended, or a seccomp profile that refuses it
            log.debug("cannot pin thread %d: %s", task, err)
    if not pinned:
        return None
    # debug: at start-up, before the config is checked, where a refusal must stay one line
    log.debug("threads on CPU %d of the %d this process may use (--all-cpus to spread them)", cpu, len(allowed))
    return cpu


def _threads() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc/self/task")]
    except OSError:
        return [0]
