"""memory.malloc_trim really returns freed heap to the system (RSS measured in /proc)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kubedevice.node.memory import ARENAS, malloc_trim

# In a child process: a clean heap whose free chunks sit below a live one, as fragmentation leaves
# them (free() itself cannot give those back), then RSS before and after one trim.
CHILD = """
import ctypes
from kubedevice.node.memory import ARENAS, malloc_trim
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
blocks = [libc.malloc(4000) for _ in range(20000)]  # ~80 MB below the mmap threshold
for b in blocks:
    ctypes.memset(b, 1, 4000)
keep = libc.malloc(4000)  # a live chunk on top: free() cannot shrink the heap past it
for b in blocks:
    libc.free(b)
before = rss()
returned = malloc_trim()()
print(before, rss(), returned)
"""


@pytest.mark.skipif(malloc_trim() is None, reason="not glibc")
def test_trim_returns_free_pages_to_the_system() -> None:
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True, timeout=60)
    before, after, returned = map(int, done.stdout.split())
    assert returned == 1
    assert before - after > 50_000, (before, after)  # KiB: most of the 80 MB came back


# Eight threads allocating at once, then glibc's own count of its arenas (malloc_stats, on stderr).
THREADS = """
import ctypes, sys, threading
from kubedevice.node.memory import cap_arenas
if sys.argv[1] == "cap":
    assert cap_arenas()
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
def work():
    for _ in range(2000):
        blocks = [libc.malloc(1024) for _ in range(20)]
        for block in blocks:
            libc.free(block)
threads = [threading.Thread(target=work) for _ in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
libc.malloc_stats()
"""


def arenas(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", THREADS, mode], capture_output=True, text=True, check=True, timeout=60)
    return sum(line.startswith("Arena ") for line in done.stderr.splitlines())


@pytest.mark.skipif(malloc_trim() is None, reason="not glibc")
def test_capped_threads_share_two_arenas() -> None:
    assert arenas("cap") <= ARENAS
    assert arenas("free") > ARENAS  # the same threads without the cap: one arena each, nearly


def test_no_trim_without_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another C library (no CS_GNU_LIBC_VERSION): trim_forever has nothing to call."""

    def no_glibc(name: str) -> str | None:
        raise ValueError(name)

    monkeypatch.setattr("os.confstr", no_glibc)
    assert malloc_trim() is None
