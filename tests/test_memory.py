"""memory.malloc_trim really returns freed heap to the system (RSS measured in /proc)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kubedevice.memory import malloc_trim

# In a child process: a clean heap whose free chunks sit below a live one, as fragmentation leaves
# them (free() itself cannot give those back), then RSS before and after one trim.
CHILD = """
import ctypes
from kubedevice.memory import malloc_trim
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


def test_no_trim_without_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another C library (no CS_GNU_LIBC_VERSION): trim_forever has nothing to call."""

    def no_glibc(name: str) -> str | None:
        raise ValueError(name)

    monkeypatch.setattr("os.confstr", no_glibc)
    assert malloc_trim() is None
