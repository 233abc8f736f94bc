"""One format for every error a command reports, whichever command it is.

A user who pipes two kubedevice commands together, or greps a node's journal, should meet one
shape: ``kubedevice: <what>`` on stderr, one line, no traceback. Places in a file are written
as compilers write them (``file.yaml:4:1: ...``) so editors can jump to them, and an OS error
is its lower-case reason without ``[Errno N]``.

The exit code says whose move it is: 2 for bad input (a flag, a file, a config: the user fixes
the command line), 1 for a failure of something the command depends on (a port another process
holds, a kubelet that went away: the user fixes the machine). Library code raises
:class:`UsageError` or :class:`DependencyError` with the line as its message; the command line
(``kubedevice.commands.run``) prints it with that exit code.
"""

from __future__ import annotations

import sys
from typing import NoReturn

PREFIX = "kubedevice"


class KubedeviceError(Exception):
    """The one base of kubedevice's own exceptions: a library user catches every refusal and
    failure of ours with it and nothing else. Each layer's errors derive from it, most beside
    the built-in they have always been (``DecodeError`` is still a ``ValueError``, ``InputError``
    an ``OSError``). Not derived, on purpose: ``kubedevice.cel.values.Err`` (a CEL error *value*
    as Go's ``types.Err``, returned and compared inside the engine and wrapped in
    ``EvalError`` before it leaves), and the private signals of one module (``_TooMany``,
    ``RpcFailure``, ``Unanswered``, ...) that never reach a caller."""


class UsageError(KubedeviceError):
    """Bad input from the user (file, flag, config): ``str()`` is the one line to print; exit 2."""


class DependencyError(KubedeviceError):
    """Something the command needs failed at run time (a port, a kubelet, an API server):
    ``str()`` is the one line to print, naming the thing and what to do; exit 1."""


class FieldProblem(KubedeviceError, ValueError):
    """A check across fields that blames one of them.

    A schema's model validator runs on the whole model, so its error would point at the model's
    first line; ``loc`` (field names and list indexes, relative to the model that raises it, and
    ``"[key]"`` after a map key to blame the key itself) says which entry the line should name.
    """

    def __init__(self, loc: tuple[int | str, ...], message: str) -> None:
        super().__init__(message)
        self.loc = loc


def line(message: str) -> str:
    """The message as the one line every command prints (the prefix added once)."""
    text = " ".join(message.split("\n")).strip()
    return text if text.startswith(f"{PREFIX}:") else f"{PREFIX}: {text}"


def fail(message: str, code: int = 2) -> NoReturn:
    """Print one line on stderr and exit: the only way a command reports bad input."""
    print(line(message), file=sys.stderr, flush=True)
    raise SystemExit(code)


def os_reason(err: OSError | UnicodeDecodeError) -> str:
    """``No such file or directory`` -> ``no such file or directory``; no errno, no repr."""
    if isinstance(err, UnicodeDecodeError):
        return f"not UTF-8 text (byte {err.start})"
    reason = err.strerror or str(err)
    return reason[:1].lower() + reason[1:]


def api_reason(err: BaseException) -> str:
    """An API client error as one phrase: the API server's ``status.message`` when it sent one
    (lightkube's ``ApiError``, read without importing lightkube), else the error's text."""
    message = getattr(getattr(err, "status", None), "message", None)
    return str(message or err) or type(err).__name__


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``1 claim``, ``2 claims``: a number in a message agrees with its noun."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def cannot_read(path: object, err: OSError | UnicodeDecodeError) -> str:
    return f"{path}: cannot read: {os_reason(err)}"


def at(source: object, line_no: int | None = None, column: int | None = None) -> str:
    """``file:line:col`` (1-based), or as much of it as is known."""
    where = str(source)
    if line_no is not None:
        where += f":{line_no}"
        if column is not None:
            where += f":{column}"
    return where
