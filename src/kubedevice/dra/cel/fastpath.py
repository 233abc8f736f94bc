"""Fast path: turn the common selector shapes into one generated Python function.

A top-level chain of ``&&`` (or ``||``) clauses becomes straight-line code with CEL's error
absorption written out; clauses of the shapes ``device.driver == "x"`` and
``device.attributes["d"].name <op> literal`` are inlined, any other clause calls its general
closure. The result must classify every input exactly like the general closures do (the
differential test checks both against Kubernetes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...cel import values as v
from ...cel.engine import Compiler
from ...cel.parser import Call, Ident, Lit, Node, Select, flatten
from ...cel.values import Err
from .device import kept_value_getter

Fn = Callable[[Any], Any]  # takes the DeviceInput itself
_OPS = {"_==_": "==", "_!=_": "!=", "_<_": "<", "_<=_": "<=", "_>_": ">", "_>=_": ">="}


def _literal(node: Node) -> Any:
    if isinstance(node, Lit) and node.kind in ("string", "int", "bool"):
        return node.value
    return None


class _Emitter:
    def __init__(self, compiler: Compiler) -> None:
        self.compiler = compiler
        self.names: dict[str, Any] = {
            "Err": Err,
            "Panic": v.Panic,
            "_equals": v.equals,
            "_not_equals": v.not_equals,
            "_compare": v.compare,
            "_nonbool": v.refused,
        }

    def bind(self, value: Any) -> str:
        name = f"_k{len(self.names)}"
        self.names[name] = value
        return name

    def clause(self, node: Node, index: int) -> tuple[str, bool]:
        """Python expression for one clause and whether it can neither raise nor be non-bool."""
        inline = self._inline(node, index)
        if inline is not None:
            return inline
        fn = self.compiler.compile(node).fn
        return f"{self.bind(fn)}(a)", False

    def _inline(self, node: Node, index: int) -> tuple[str, bool] | None:
        if not (isinstance(node, Call) and node.function in _OPS and node.target is None):
            return None
        left, right = node.args
        const = _literal(right)
        if const is None or (isinstance(const, bool) and node.function not in ("_==_", "_!=_")):
            return None
        op, c = _OPS[node.function], self.bind(const)
        if not isinstance(left, Select) or left.test_only or left.optional:
            return None
        if (
            left.field == "driver"
            and isinstance(left.operand, Ident)
            and left.operand.name == "device"
            and not self.compiler.scopes
            and isinstance(const, str)
        ):
            return f"(d.driver {op} {c})", True
        where = self.compiler.view(left.operand)
        if where is None or where[0] != "attributes":
            return None
        field, domain = where
        get = self.bind(kept_value_getter(field, domain, left.field))
        t, tv = self.bind(type(const)), f"_v{index}"
        if op in ("==", "!="):
            slow = f"{'_not_equals' if op == '!=' else '_equals'}({tv}, {c})"
        else:
            slow = f"_compare({tv}, {c}, {self.bind(node.function)}) in {self.bind(_ALLOWED[op])}"
        return f"({tv} {op} {c} if type({tv} := {get}(d)) is {t} else {slow})", False


MAX_CLAUSES = 64  # longer chains gain nothing from one function and cost compile time
_ALLOWED = {"<": (-1,), "<=": (-1, 0), ">": (1,), ">=": (0, 1)}


def generate(compiler: Compiler, root: Node) -> Fn | None:
    """One Python function for ``root``, or None when the general closures are as good."""
    function = "_||_" if isinstance(root, Call) and root.function == "_||_" else "_&&_"
    clauses: list[Node] = []
    flatten(root, function, clauses)
    if len(clauses) > MAX_CLAUSES:
        return None
    emitter = _Emitter(compiler)
    parts = [emitter.clause(c, i) for i, c in enumerate(clauses)]
    if len(parts) == 1 and parts[0][0].endswith("(a)"):
        return None  # a single general clause: nothing to inline
    stop = "True" if function == "_||_" else "False"
    lines = ["def _selector(d):"]  # called with the device: the activation is built only if used
    if any(text.endswith("(a)") for text, _ in parts):
        lines.append("    a = {'device': d}")
    if len(parts) == 1:  # one inlined clause: its error propagates, Selector.matches checks the type
        lines.append(f"    return {parts[0][0]}")
    else:
        lines.append("    err = None")
        for text, _ in parts:
            lines += [
                "    try:",
                f"        r = {text}",
                "    except Panic:",
                "        raise",
                "    except Err as exc:",
                "        r = err = err or exc",
                f"    if r is {stop}:",
                f"        return {stop}",
                f"    if r is not {'False' if stop == 'True' else 'True'} and err is None:",
                "        err = _nonbool('_&&_', r)",
            ]
        lines += ["    if err is not None:", "        raise err", f"    return {'False' if stop == 'True' else 'True'}"]
    namespace = dict(emitter.names)
    exec("\n".join(lines), namespace)
    result: Fn = namespace["_selector"]
    return result
