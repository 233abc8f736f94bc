"""``kubectl dra``: the ``dra`` commands as a kubectl plugin (the ``kubectl-dra`` console script,
:func:`kubedevice.cli.kubectl_dra`, which runs the commands with these arguments).

kubectl runs ``kubectl-dra`` from PATH for ``kubectl dra ...`` with the words after ``dra``.
The commands are kubedevice's own (``kubedevice dra ...``); kubectl's spellings are taken
too: ``-o json`` / ``--output=json`` for ``--json`` (``allocate`` has ``-o`` of its own), and
``-n``, ``--context``, ``--kubeconfig`` as every command has them.
"""

from __future__ import annotations

from ...errors import fail

JSON_COMMANDS = ("explain", "available", "validate")
"""Commands whose machine-readable output is ``--json`` (``allocate`` takes ``-o yaml|json`` itself)."""


def kubectl_args(args: list[str]) -> list[str]:
    """kubectl's ``-o json`` as ``--json`` for the commands that print text or JSON."""
    command = next((a for a in args if not a.startswith("-")), None)
    if command not in JSON_COMMANDS:
        return list(args)
    out: list[str] = []
    words = iter(args)
    for word in words:
        value = None
        if word in ("-o", "--output"):
            value = next(words, "")
        elif word.startswith("--output="):
            value = word.partition("=")[2]
        elif word.startswith("-o") and not word.startswith("--"):
            value = word[2:].lstrip("=")
        if value is None:
            out.append(word)
        elif value == "json":
            out.append("--json")
        else:
            fail(f"-o {value!r}: kubectl dra {command} prints text, or JSON with -o json")
    return out
