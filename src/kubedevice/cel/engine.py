"""Type-check a parsed CEL expression and compile it into nested Python closures.

Checking mirrors cel-go's outcome classes (undeclared names, unknown fields, no matching
overload, wrong result type) so compile errors match Kubernetes; the closures then run
without any per-node dispatch, which is what makes simple selectors fast.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import KubedeviceError
from . import regex
from . import values as v
from .library import (
    DYN,
    NAMESPACES,
    NOT_CONSTANT,
    OVERLOADS,
    QTY,
    REFUSALS,
    RESOLVED_ASSERTS,
    RUNTIME_COSTS,
    SEMVER,
    SPECIALIZERS,
    UNCHECKED,
    VALUE_TYPES,
    Overload,
)
from .parser import Call, Comprehension, Ident, ListLit, Lit, MapLit, Node, Select
from .quantity import ComputedQuantity, Quantity
from .semver import Semver
from .values import NONE, Err, Optional, UInt

Closure = Callable[[dict[str, Any]], Any]
View = Any  # an environment's key for one of its views (Declarations.view): hashable, opaque here
DEFERRED = "@deferred:"  # scope marker: this variable may hold a Deferred error (cel.bind)
# [].sort(): cel-go binds the empty literal's free element type to the first comparable overload.
EMPTY_SORTED = ("list", "int")
VIEW = "@view:"  # scope marker: this cel.bind variable names a view (see Declarations.view)


class CheckError(KubedeviceError):
    """A type-check failure; becomes a compile error located at ``node`` (the innermost node
    being checked unless the raiser names another)."""

    def __init__(self, message: str, node: Node | None = None) -> None:
        super().__init__(message)
        self.node = node


@dataclass
class Compiled:
    type: Any
    fn: Closure
    cost: int  # work of one evaluation outside loops: what a comprehension charges per iteration


class Declarations:
    """What an environment declares on top of the base library (cel-go's variable declarations,
    object types and extra overloads); the base environment declares nothing.

    An environment such as DRA's (kubedevice.dra.cel) subclasses this: the engine knows no
    variable by name. It may also recognise *views*, sub-expressions it can read straight from
    its input (``device.attributes["d"]``): reading one attribute then skips building every map
    on the way, which is what makes the common selectors cheap.
    """

    variables: Mapping[str, Any] = {}  # name -> declared type; the activation holds the value
    overloads: Mapping[str, tuple[Overload, ...]] = {}  # added to the library's, by function name

    def select(self, compiler: Compiler, node: Select, operand: Compiled) -> Compiled:
        """Field ``node.field`` of ``operand``, whose type is one of OBJECT_TYPES."""
        raise CheckError(f"undefined field '{node.field}'")

    def value(self, name: str) -> Closure:
        """The variable ``name`` used as a whole (not through a field): the activation's value."""
        return lambda a: a[name]

    def view(self, compiler: Compiler, node: Node) -> View | None:
        """A key for ``node`` if this environment reads it directly, else None."""
        return None

    def read(self, view: View) -> Closure:
        """Evaluates the view's whole value."""
        raise NotImplementedError

    def read_key(self, view: View, key: str) -> Closure:
        """Evaluates ``<view>[key]`` without building the view's value."""
        raise NotImplementedError

    def size(self, path: list[str]) -> tuple[int, int] | None:
        """cel-go's size estimator: the declared (min, max) size of what ``path`` reaches from a
        variable (``["device", "attributes", "@values"]``), None when nothing is declared."""
        return None


# Object types an environment declares (``kubernetes.DRADevice``), registered when its module is
# imported, like the libraries' value types: null-comparable, fields by Declarations.select.
OBJECT_TYPES: set[str] = set()
# string.format()'s compile-time check, registered by strformat.py (which builds on this module).
FORMAT_VALIDATOR: list[Callable[[str, list[Node], Callable[[Node], Any]], tuple[Node | None, str] | None]] = []
# Identifiers that denote types (int, string, ...); filled in by the type() library module.
TYPE_DENOTATIONS: dict[str, Any] = {}


def _qualified_name(node: Node) -> str:
    """``net.IP`` for a plain selection chain on an identifier, else ""."""
    if isinstance(node, Select) and not node.test_only and not node.optional:
        base = _qualified_name(node.operand)
        return f"{base}.{node.field}" if base else ""
    return node.name if isinstance(node, Ident) else ""


ERROR = "error"  # the type of a node that failed to check


def is_dyn(t: Any) -> bool:
    """dyn, or a type that cannot be checked further (cel-go's isDynOrError)."""
    return t in (DYN, "any", ERROR)


def _not_checked(_a: dict[str, Any]) -> Any:
    raise AssertionError("an expression with type-check errors is never evaluated")


def assignable(want: Any, have: Any, binding: dict[str, Any]) -> bool:
    """Is a value of type ``have`` acceptable where ``want`` is declared (binding type params)?"""
    if isinstance(want, str) and len(want) == 1:
        bound = binding.get(want)
        if bound is None:
            binding[want] = have
            return True
        return is_dyn(bound) or is_dyn(have) or assignable(bound, have, binding)
    if is_dyn(want) or is_dyn(have) or have == "error":
        return True
    if isinstance(want, tuple) and isinstance(have, tuple):
        return (
            want[0] == have[0]
            and len(want) == len(have)
            and all(assignable(w, h, binding) for w, h in zip(want[1:], have[1:], strict=True))
        )
    if want == "null_type" or have == "null_type":
        return _nullable(have if want == "null_type" else want)
    return bool(want == have)


def _nullable(t: Any) -> bool:
    """cel-go's checker keeps the legacy nullness: null is assignable to opaque and object types
    (optionals, every Kubernetes type, the environment's objects), timestamps and durations."""
    if isinstance(t, tuple):
        return bool(t[0] == "optional")
    return t in ("null_type", "any") or t in OBJECT_TYPES or (t in VALUE_TYPES and t not in _PRIMITIVES)


_PRIMITIVES = frozenset({"int", "uint", "double", "string", "bytes", "bool", "type"})


def _unified(t: Any, optional: bool) -> Any:
    """An optional entry's value type; None for optional.none()'s free type (unified upstream)."""
    return None if optional and t == DYN else t


class _FreeType(str):
    """A type variable left free (an empty literal's element type, an unbound type parameter).

    It equals ``dyn`` everywhere (cel-go substitutes dyn for free variables in the end) except
    in the homogeneous-literal check, where cel-go's checker would have bound it to the other
    element's type: ``[[], [1]]`` is accepted, ``[[dyn(1)], [2]]`` is not."""

    __slots__ = ()


FREE = _FreeType(DYN)
_FREE_NAME = "_var0"  # how a message names a free type variable (cel-go numbers them: _var9)


class TypeOf(str):
    """The checked type of a type value, ``type(T)``: it equals ``type`` for overloads, costs and
    runtime (every type value has one runtime type), but keeps ``T`` for what cel-go tells
    apart: the homogeneous-literal check (``[int, uint]`` is an error) and messages."""

    of: Any

    def __new__(cls, of: Any) -> TypeOf:
        made = super().__new__(cls, "type")
        made.of = of
        return made


def _equivalent(a: Any, b: Any) -> bool:
    """Type.IsEquivalentType after the checker's substitution: free type parameters match any
    type, an explicit ``dyn`` only ``dyn``."""
    if isinstance(a, _FreeType) or isinstance(b, _FreeType):
        return True
    if isinstance(a, TypeOf) and isinstance(b, TypeOf):
        return _equivalent(a.of, b.of)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return a[0] == b[0] and len(a) == len(b) and all(_equivalent(x, y) for x, y in zip(a[1:], b[1:], strict=True))
    return bool(a == b)


def substitute(t: Any, binding: dict[str, Any]) -> Any:
    if isinstance(t, str) and len(t) == 1:
        return binding.get(t, FREE)
    if isinstance(t, tuple):
        return (t[0], *(substitute(p, binding) for p in t[1:]))
    return t


def join_types(types: list[Any]) -> Any:
    """Element type of a literal list/map: the common type, or dyn when they differ."""
    if not types:
        return FREE
    first = types[0]
    return first if all(t == first for t in types) else DYN


def fmt(t: Any, free: str = DYN) -> str:
    """A type as cel-go's checker prints it in errors (FormatCELType). A free type variable is
    ``dyn`` where cel-go substitutes before printing (no matching overload) and a type variable
    (``free="_var0"``) where it does not (expected type … but found …)."""
    if isinstance(t, _FreeType):
        return free
    if isinstance(t, TypeOf):
        return f"type({fmt(t.of, free)})"
    if isinstance(t, tuple):
        name = "optional_type" if t[0] == "optional" else t[0]
        return f"{name}({', '.join(fmt(p, free) for p in t[1:])})"
    return _FORMATTED.get(t, str(t))


def mismatch(want: Any, found: Any) -> str:
    """cel-go's typeMismatch, which prints the types unsubstituted."""
    return f"expected type '{fmt(want, _FREE_NAME)}' but found '{fmt(found, _FREE_NAME)}'"


_FORMATTED = {
    "any": "any",
    ERROR: "!error!",
    "null_type": "null",
    "google.protobuf.Timestamp": "timestamp",
    "google.protobuf.Duration": "duration",
}
_DENOTED = {"list": ("list", DYN), "map": ("map", DYN, DYN), "optional_type": ("optional", DYN)}


def denoted(name: str) -> TypeOf:
    """The checked type of a type's name used as a value (``int``: ``type(int)``)."""
    return TypeOf(_DENOTED.get(name, name))


def type_string(t: Any) -> str:
    """A type as ``Type.String()`` prints it (Kubernetes' output-type check uses this)."""
    if isinstance(t, tuple):
        return f"{t[0]}({', '.join(type_string(p) for p in t[1:])})"
    return "google.protobuf.Any" if t == "any" else str(t)


class Compiler:
    """Compiles one checked expression for one environment."""

    def __init__(self, env: Declarations) -> None:
        self.env = env
        self.scopes: list[dict[str, Any]] = []
        self.types: dict[int, Any] = {}  # id(node) -> checked type, for the cost estimator
        self.exempt_literals = 0  # > 0 inside the arguments of string.format()
        # cel-go reports these only when type checking succeeded: the validators' findings
        # (all of them, by location), else the first failure of program planning.
        self.invalid: list[tuple[Node, str]] = []
        self.planning: list[str] = []
        self.errors: list[CheckError] = []  # type-check errors: every one is reported, like cel-go
        self.panics: list[str] = []  # where cel-go's compiler would panic (after a clean check)

    def compile(self, node: Node) -> Compiled:
        method = getattr(self, "c_" + type(node).__name__)
        try:
            result: Compiled = method(node)
        except CheckError as exc:  # cel-go checks on: the node has the error type, which fits anywhere
            if exc.node is None:
                exc.node = node
            self.errors.append(exc)
            result = Compiled(ERROR, _not_checked, 0)
        self.types[id(node)] = result.type
        return result

    # literals and names -------------------------------------------------------------
    def c_Lit(self, node: Lit) -> Compiled:
        value = UInt(node.value) if node.kind == "uint" else node.value
        kind = {"null": "null_type"}.get(node.kind, node.kind)
        return Compiled(kind, _constant(value), 0)

    def c_Ident(self, node: Ident) -> Compiled:
        name = node.name
        scope = self._scope_of(node)
        if scope is not None:
            bound = scope.get(VIEW + name)
            if bound is not None:  # cel.bind(x, device.attributes["d"], ...): read the view itself
                return Compiled(scope[name], self.env.read(bound), 1)
            if scope.get(DEFERRED + name):
                return Compiled(scope[name], lambda a: v.undefer(a[name]), 1)
            return Compiled(scope[name], lambda a: a[name], 1)
        if name in self.env.variables:
            return Compiled(self.env.variables[name], self.env.value(name), 1)
        if name in TYPE_DENOTATIONS:
            value = TYPE_DENOTATIONS[name]
            return Compiled(denoted(name), lambda _a: value, 1)
        raise CheckError(f"undeclared reference to '{'.' if node.absolute else ''}{name}' (in container '')")

    def _scope_of(self, node: Ident) -> dict[str, Any] | None:
        """The innermost scope binding ``node``. cel-go resolves ``.name`` from the root, past the
        macro variables (checker.go, resolveSimpleIdent): a name only they bind is undeclared. A
        global hidden by a macro variable of its name is the case we do not follow: macro
        variables share the activation with the globals, so there ``.name`` reads the variable
        (docs/cel.md, "Not covered")."""
        name = node.name
        scope = next((scope for scope in reversed(self.scopes) if name in scope), None)
        if node.absolute and name not in self.env.variables and name not in TYPE_DENOTATIONS:
            return None
        return scope

    def c_ListLit(self, node: ListLit) -> Compiled:
        parts = [self.compile(e) for e in node.elements]
        elem_types = [
            p.type[1] if i in node.optional and isinstance(p.type, tuple) else p.type for i, p in enumerate(parts)
        ]
        for i in node.optional:
            self._check_optional(node.elements[i], parts[i].type)
        self._homogeneous([_unified(t, i in node.optional) for i, t in enumerate(elem_types)], node.elements)
        self._optional_of_dyn([p.type for p in parts], [i in node.optional for i in range(len(parts))], True)
        fns = [p.fn for p in parts]
        opt = frozenset(node.optional)
        if not opt and all(isinstance(e, Lit) for e in node.elements):
            constant = [f({}) for f in fns]
            return Compiled(("list", join_types(elem_types)), lambda _a: constant, 10)

        def build(a: dict[str, Any]) -> list[Any]:
            out = []
            for i, f in enumerate(fns):
                item = f(a)
                if i in opt:
                    if not isinstance(item, Optional):
                        raise Err(f"cannot initialize optional list element from non-optional value {v.go_value(item)}")
                    if not item.present:
                        continue
                    item = item.value
                out.append(item)
            return out

        return Compiled(("list", join_types(elem_types)), build, 10 + sum(p.cost for p in parts))

    def _check_optional(self, node: Node, t: Any) -> None:
        """An optional element or entry (``[?x]``, ``{?k: x}``) must be an optional or dyn: cel-go's
        checker reports the mismatch at the value and goes on."""
        if isinstance(t, _FreeType) or (not (isinstance(t, tuple) and t[0] == "optional") and t not in (DYN, "any")):
            self.errors.append(CheckError(mismatch(("optional", t), t), node))

    def _optional_of_dyn(self, types: list[Any], optional: list[bool], is_list: bool) -> None:
        """cel-go's homogeneous-literal validator reads the type parameter of every optional
        element it reaches: for one of type dyn (``[?dyn(x)]``, ``{?k: dyn(x)}``) it has none and
        the compiler panics. A list's loop stops at its first mismatch, a map's does not; literals
        inside ``format()`` are exempt."""
        if self.exempt_literals:
            return
        first: Any = None
        for i, (t, opt) in enumerate(zip(types, optional, strict=True)):
            if opt and t in (DYN, "any"):
                self.panics.append("runtime error: index out of range [0] with length 0")
                return
            if not is_list:
                continue
            elem = t[1] if opt and isinstance(t, tuple) else t
            if i == 0:
                first = elem
            elif not _equivalent(first, elem):
                return

    def _homogeneous(self, types: list[Any], nodes: list[Node]) -> None:
        """ValidateHomogeneousAggregateLiterals: every element has the first one's type exactly
        (``dyn`` included), reported at the first element that differs; literals inside
        ``format()`` arguments are exempt."""
        if self.exempt_literals:
            return
        known = [(t, n) for t, n in zip(types, nodes, strict=True) if t is not None]
        for t, n in known[1:]:
            if not _equivalent(known[0][0], t):
                self.invalid.append((n, f"expected type '{fmt(known[0][0])}' but found '{fmt(t)}'"))
                return

    def c_MapLit(self, node: MapLit) -> Compiled:
        keys = [self.compile(k) for k, _, _ in node.entries]
        vals = [self.compile(val) for _, val, _ in node.entries]
        self._homogeneous([k.type for k in keys], [k for k, _, _ in node.entries])
        val_types = [
            p.type[1] if o and isinstance(p.type, tuple) else p.type
            for p, (_, _, o) in zip(vals, node.entries, strict=True)
        ]
        self._homogeneous(
            [_unified(t, o) for t, (_, _, o) in zip(val_types, node.entries, strict=True)],
            [val for _, val, _ in node.entries],
        )
        for (_, value, optional), part in zip(node.entries, vals, strict=True):
            if optional:
                self._check_optional(value, part.type)
        self._optional_of_dyn([p.type for p in vals], [o for _, _, o in node.entries], False)
        pairs = [(k.fn, val.fn, o) for k, val, (_, _, o) in zip(keys, vals, node.entries, strict=True)]

        def build(a: dict[str, Any]) -> dict[Any, Any]:
            out = v.CelMap()
            for kf, vf, opt in pairs:
                key, value = kf(a), vf(a)
                if opt:
                    if not isinstance(value, Optional):
                        raise Err(
                            f"cannot initialize optional entry '{v.go_value(key)}' from non-optional value "
                            f"{v.go_value(value)}"
                        )
                    if not value.present:  # an absent entry also removes an earlier one of its key
                        out.drop(key)
                        continue
                    value = value.value
                out.put(key, value)
            return out

        return Compiled(
            ("map", join_types([k.type for k in keys]), join_types(val_types)),
            build,
            30 + sum(p.cost for p in keys + vals),
        )

    # field selection ------------------------------------------------------------------
    def c_Select(self, node: Select) -> Compiled:
        qualified = _qualified_name(node)
        if qualified in TYPE_DENOTATIONS and not any(qualified.split(".")[0] in s for s in self.scopes):
            value = TYPE_DENOTATIONS[qualified]
            return Compiled(denoted(qualified), lambda _a: value, 1)
        operand = self.compile(node.operand)
        if operand.type in OBJECT_TYPES:
            return self.env.select(self, node, operand)
        field = node.field
        direct = self._direct_lookup(node.operand, operand, field, node.test_only or node.optional)
        if direct is not None:
            return direct
        of = operand.fn
        if node.test_only:
            return self._has(operand, field)
        if node.optional or _is_optional(operand.type):  # x.f on an optional x is x.?f (checkSelectField)
            return self._optional_select(operand, field)
        if isinstance(operand.type, tuple) and operand.type[0] == "map":
            if operand.type[1] not in ("string",) and not is_dyn(operand.type[1]):
                raise CheckError(f"type '{fmt(operand.type)}' does not support field selection")
            result_type = operand.type[2]
        elif is_dyn(operand.type):
            result_type = DYN
        else:
            raise _no_fields(operand.type)

        def select(a: dict[str, Any]) -> Any:
            base = of(a)
            if type(base) is Optional:  # a dyn optional: applyQualifiers selects inside it
                return _select_present(base, field)
            return v.index(base, field)

        return Compiled(result_type, select, operand.cost + 1)

    def view(self, node: Node) -> View | None:
        """The environment's view (Declarations.view) that ``node`` names, or that the cel.bind
        variable ``node`` is bound to."""
        if isinstance(node, Ident):
            scope = self._scope_of(node)
            where: View | None = scope.get(VIEW + node.name) if scope is not None else None
            return where
        return self.env.view(self, node)

    def _direct_lookup(self, operand: Node, compiled: Compiled, ident: str, skip: bool) -> Compiled | None:
        """``device.attributes["d"].name``: read one entry of a view instead of building maps."""
        where = None if skip else self.view(operand)
        if where is None:
            return None
        result_type = compiled.type[2] if isinstance(compiled.type, tuple) and compiled.type[0] == "map" else DYN
        return Compiled(result_type, self.env.read_key(where, ident), 3)

    def _has(self, operand: Compiled, field: str) -> Compiled:
        inner = operand.type[1] if _is_optional(operand.type) else operand.type
        if not (is_dyn(inner) or (isinstance(inner, tuple) and inner[0] == "map")):
            raise _no_fields(inner)
        of = operand.fn
        return Compiled("bool", lambda a: _present(of(a), field), operand.cost)

    def _optional_select(self, operand: Compiled, field: str) -> Compiled:
        inner = operand.type[1] if isinstance(operand.type, tuple) and operand.type[0] == "optional" else operand.type
        result = inner[2] if isinstance(inner, tuple) and inner[0] == "map" else DYN
        if not (is_dyn(inner) or (isinstance(inner, tuple) and inner[0] == "map")):
            raise _no_fields(inner)
        of = operand.fn
        return Compiled(("optional", result), lambda a: _select_present(of(a), field), operand.cost + 1)

    # calls ----------------------------------------------------------------------------
    def c_Call(self, node: Call) -> Compiled:
        special = SPECIAL.get(node.function)
        if special is not None and node.target is None:
            result: Compiled = special(self, node)
            return result
        namespaced = self.namespaced(node)
        if namespaced is not None:
            return self._call(namespaced, None, node.args, node)
        return self._call(node.function, node.target, node.args, node)

    def namespaced(self, node: Call) -> str | None:
        """``sets.contains``, ``optional.of``, ``lists.range``, ``ip.isCanonical``: a global function."""
        target = node.target
        if isinstance(target, Ident) and target.name in NAMESPACES and not any(target.name in s for s in self.scopes):
            name = f"{target.name}.{node.function}"
            return name if name in OVERLOADS else None
        return None

    def _call(self, name: str, target: Node | None, args: list[Node], node: Node) -> Compiled:
        exempt = name == "format" and target is not None  # format's argument list may mix types
        self.exempt_literals += exempt
        try:
            parts = ([self.compile(target)] if target is not None else []) + [self.compile(a) for a in args]
        finally:
            self.exempt_literals -= exempt
        candidates = [*OVERLOADS.get(name, []), *self.env.overloads.get(name, ())]
        if not candidates:
            raise CheckError(f"undeclared reference to '{name}' (in container '')")
        matched = []
        for ov in candidates:
            if ov.member != (target is not None) or len(ov.params) != len(parts):
                continue
            binding: dict[str, Any] = {}
            if all(assignable(p, c.type, binding) for p, c in zip(ov.params, parts, strict=True)):
                matched.append((ov, substitute(ov.result, binding)))
        if not matched:  # cel-go prints a receiver as 'T.(args)'
            shown = ", ".join(fmt(p.type) for p in parts[target is not None :])
            receiver = f"{fmt(parts[0].type)}." if target is not None else ""
            raise CheckError(f"found no matching overload for '{name}' applied to '{receiver}({shown})'")
        result_type = _result_type(name, target, parts, [t for _, t in matched])
        impl = _dispatcher(name, [ov for ov, _ in matched])
        literals = [a.value for a in args if isinstance(a, Lit)]
        self._validate_regex_literals(name, target, args, parts[target is not None :])
        if (
            exempt
            and isinstance(target, Lit)
            and target.kind == "string"
            and len(args) == 1
            and isinstance(args[0], ListLit)
            and FORMAT_VALIDATOR
        ):
            problem = FORMAT_VALIDATOR[0](str(target.value), args[0].elements, lambda n: self.types.get(id(n), DYN))
            if problem is not None:
                self.invalid.append((problem[0] or node, problem[1]))
        if name in _CONVERSIONS and target is None and len(args) == 1 and is_constant(args[0]):
            return self._folded(impl, args[0], parts[0], result_type, name)
        if name in _PURE and target is None and len(literals) == len(args):
            folded = _try_fold(impl, [p.fn({}) for p in parts])
            if folded is not None:
                return Compiled(result_type, _constant(folded), sum(p.cost for p in parts) + 1)
        fns = [p.fn for p in parts]
        cost = sum(p.cost for p in parts) + 1
        asserts = RESOLVED_ASSERTS.get(name) if len(matched) == 1 else None
        tracked = RUNTIME_COSTS.get(name)
        if asserts is not None:
            return Compiled(result_type, _asserting(impl, fns, tracked, asserts), cost)
        specialize = SPECIALIZERS.get(name)
        if specialize is not None and name not in UNCHECKED:
            nodes = ([target] if target is not None else []) + args
            special = specialize(nodes, [_constant_value(n, f) for n, f in zip(nodes, fns, strict=True)], fns, impl)
            if special is not None:
                return Compiled(result_type, special, cost)
        if name in ("or", "orValue") and target is not None:
            return Compiled(result_type, _optional_or(fns[0], fns[1], unwrap=name == "orValue"), cost)
        if name in UNCHECKED:
            return Compiled(result_type, _panicking(impl, fns, tracked, name), cost)
        if tracked is not None:
            return Compiled(result_type, _charged(impl, fns, tracked), cost)
        if len(fns) == 1:
            f0 = fns[0]
            return Compiled(result_type, lambda a: impl(f0(a)), cost)
        if len(fns) == 2:
            f0, f1 = fns
            return Compiled(result_type, lambda a: impl(f0(a), f1(a)), cost)
        return Compiled(result_type, lambda a: impl(*[f(a) for f in fns]), cost)

    def _folded(self, impl: Callable[..., Any], arg: Node, part: Compiled, result_type: Any, name: str) -> Compiled:
        """cel-go's planner evaluates a conversion of a constant (a literal, or a conversion of one:
        ``int(dyn('x'))``) when the program is built: errors are compile errors. A timestamp or
        duration *literal* is checked earlier, by the validators, with their own message."""
        try:
            value = impl(part.fn({}))
        except Err as exc:
            if name in ("timestamp", "duration") and isinstance(arg, Lit):
                self.invalid.append((arg, f"invalid {name} argument"))
            else:
                self.planning.append(str(exc))
            value = None
        return Compiled(result_type, lambda _a: value, part.cost + 1)

    def _validate_regex_literals(self, name: str, target: Node | None, args: list[Node], parts: list[Compiled]) -> None:
        """A constant bad pattern is a compile error, as in Kubernetes: cel-go's ValidateRegexLiterals
        checks the first argument of ``matches`` (for the global form that is the *text*) when it
        is a literal, and the regex optimisations of ``matches``/``find``/``findAll`` compile the
        pattern argument when the program is built, if it is constant then (a literal, or a
        conversion the planner folded: ``dyn('(')``)."""
        if name not in ("matches", "find", "findAll"):
            return
        pattern_index = 0 if target is not None else 1
        if name == "matches" and args and _bad_pattern(args[0]):
            self.invalid.append((args[0], "invalid matches argument"))
        elif len(args) > pattern_index and is_constant(args[pattern_index]):
            pattern = parts[pattern_index].fn({})
            if isinstance(pattern, str) and not regex.is_valid(pattern):
                self.planning.append(f"error parsing regexp: {regex.error(pattern)}")

    def c_Comprehension(self, node: Comprehension) -> Compiled:
        return SPECIAL["@macro"](self, node)


_PURE = frozenset({"quantity", "semver", "ip", "cidr", "url"})


def _result_type(name: str, target: Node | None, parts: list[Compiled], results: list[Any]) -> Any:
    """The checked type of a call: its overloads' result if they agree, else dyn; ``type(x)`` is
    ``type(T)`` for x of type T; an empty literal's sort() keeps the list's element type free."""
    if name == "type" and target is None and len(parts) == 1:
        return TypeOf(parts[0].type)
    if name == "sort" and isinstance(target, ListLit) and not target.elements:
        return EMPTY_SORTED
    return results[0] if len({fmt(t) for t in results}) == 1 else DYN


def _optional_or(lhs: Closure, rhs: Closure, unwrap: bool) -> Closure:
    """``opt.or(alt)`` and ``opt.orValue(alt)`` evaluate ``alt`` only when ``opt`` is empty: cel-go
    replaces the call with a short-circuiting node (decorateOptionalOr, cel/library.go)."""

    def call(a: dict[str, Any]) -> Any:
        value = lhs(a)
        if type(value) is not Optional:  # a dyn operand that is no optional
            raise Err("no such overload")
        if value.present:
            return value.value if unwrap else value
        return rhs(a)

    return call


def _charged(impl: Callable[..., Any], fns: list[Closure], tracked: Callable[[list[Any], Any], int]) -> Closure:
    """A call whose runtime cost depends on its arguments: charge it to the evaluation."""
    if len(fns) == 2:
        f0, f1 = fns

        def call2(a: dict[str, Any]) -> Any:
            x, y = f0(a), f1(a)
            result = impl(x, y)
            cost = tracked([x, y], result)
            if cost > 1:  # v.charge_call written out: most calls cost their static 1
                v.charge(a, cost - 1)
            return result

        return call2

    def call(a: dict[str, Any]) -> Any:
        args = [f(a) for f in fns]
        result = impl(*args)
        cost = tracked(args, result)
        if cost > 1:
            v.charge(a, cost - 1)
        return result

    return call


def _panicking(
    impl: Callable[..., Any], fns: list[Closure], tracked: Callable[[list[Any], Any], int] | None, name: str
) -> Closure:
    """A call cel-go's cost tracker asserts the arguments of even when one is an error: the
    error becomes a panic (values.Panic) instead of an ordinary, absorbable error."""

    def call(a: dict[str, Any]) -> Any:
        try:
            args = [f(a) for f in fns]
        except v.Panic:
            raise
        except Err as exc:
            raise v.not_a_list(exc) from None
        result = impl(*args)
        if tracked is not None:
            v.charge_call(a, tracked(args, result))
        return result

    return call


def _asserting(
    impl: Callable[..., Any],
    fns: list[Closure],
    tracked: Callable[[list[Any], Any], int] | None,
    asserts: Callable[[list[Any]], Err | None],
) -> Closure:
    """A call whose cost tracker asserts its arguments' kinds (library.RESOLVED_ASSERTS): every
    argument is evaluated, a failed one kept as its error, and the assertion decides first."""

    def call(a: dict[str, Any]) -> Any:
        args: list[Any] = []
        for f in fns:
            try:
                args.append(f(a))
            except v.Panic:
                raise
            except Err as exc:
                args.append(exc)
        failed = asserts(args) or next((x for x in args if isinstance(x, Err)), None)
        if failed is not None:
            raise failed
        result = impl(*args)
        if tracked is not None:
            v.charge_call(a, tracked(args, result))
        return result

    return call


def _constant_value(node: Node, fn: Closure) -> Any:
    """The value of a literal, a conversion of a constant (``string("a")``, which cel-go's
    planner folds, so its regex optimisation takes it as a constant pattern), a list of literals
    or a folded constructor of literals (``cidr("10.0.0.0/8")``), else NOT_CONSTANT: what a
    specialisation may precompute."""
    if (
        is_constant(node)
        or (isinstance(node, ListLit) and not node.optional and all(isinstance(e, Lit) for e in node.elements))
        or (
            isinstance(node, Call)
            and node.function in _PURE
            and node.target is None
            and all(isinstance(a, Lit) for a in node.args)
        )
    ):
        try:
            return fn({})
        except Err:
            return NOT_CONSTANT
    return NOT_CONSTANT


def _try_fold(impl: Callable[..., Any], args: list[Any]) -> Any:
    """Evaluate a pure constructor of literals once; a failure stays a runtime error, as in Kubernetes."""
    try:
        return impl(*args)
    except Err:
        return None


_CONVERSIONS = frozenset({"int", "uint", "double", "string", "bytes", "bool", "dyn", "timestamp", "duration"})


def is_constant(node: Node) -> bool:
    """A literal, or a conversion of a constant: what cel-go's planner evaluates ahead of time."""
    if isinstance(node, Lit):
        return True
    return (
        isinstance(node, Call)
        and node.target is None
        and node.function in _CONVERSIONS
        and len(node.args) == 1
        and is_constant(node.args[0])
    )


def _bad_pattern(node: Node) -> bool:
    return isinstance(node, Lit) and isinstance(node.value, str) and not regex.is_valid(node.value)


def _present(value: Any, field: str) -> bool:
    """``has(x.f)`` and ``x.?f`` on a dyn value, as cel-go's refQualify tests presence
    (interpreter/attributes.go): a map's key, a list refuses the string index, and any other
    value (a string, an int, a semver) has no fields, which is no error. An optional is looked
    into (applyQualifiers)."""
    if type(value) is Optional:
        return value.present and _present(value.value, field)
    if isinstance(value, dict):
        return v.has_key(value, field)
    if isinstance(value, (list, tuple)):
        v.index(value, field)  # raises: unsupported index type 'string' in list
    return False


def _select_present(base: Any, field: str) -> Optional:
    """``x.?f`` (and ``x.f`` on an optional x): the field if present, else optional.none()."""
    if type(base) is Optional:
        if not base.present:
            return NONE
        base = base.value
    return Optional(True, v.index(base, field)) if _present(base, field) else NONE


def _is_optional(t: Any) -> bool:
    return isinstance(t, tuple) and t[0] == "optional"


# Kubernetes declares these with cel.ObjectType (struct kind): selecting a field the type
# provider does not know is a resolution failure in cel-go's checker, not "no field selection".
_STRUCT_KINDS = frozenset({QTY, SEMVER, "kubernetes.URL", "kubernetes.NamedFormat"})


def _no_fields(t: Any) -> CheckError:
    """cel-go checker's error for a field selection on a type without fields (checkSelectField)."""
    if t in _STRUCT_KINDS:
        return CheckError(f"unexpected failed resolution of '{t}'")
    return CheckError(f"type '{fmt(t)}' does not support field selection")


def _constant(value: Any) -> Closure:
    return lambda _a: value


_PY_TYPES: dict[str, tuple[type, ...]] = VALUE_TYPES
_PY_TYPES.update(
    {
        "int": (int,),
        "uint": (UInt,),
        "double": (float,),
        "string": (str,),
        "bytes": (bytes,),
        "bool": (bool,),
        "null_type": (type(None),),
        QTY: (Quantity, ComputedQuantity),
        SEMVER: (Semver,),
    }
)


_CONTAINERS: dict[str, tuple[type, ...]] = {
    "list": (list, tuple),
    "map": (dict, v.DefaultingMap, v.CelMap),
    "optional": (Optional,),
}


def _guard(param: Any) -> tuple[type, ...] | None:
    """The runtime classes an argument for ``param`` may have (None: any), like cel-go's guards,
    which do not look at element types."""
    if isinstance(param, tuple):
        return _CONTAINERS[param[0]]
    return _PY_TYPES.get(param)


def _dispatcher(name: str, overloads: list[Overload]) -> Callable[..., Any]:
    """Runtime overload choice by the dynamic types of the arguments."""
    table = [(ov.impl, [_guard(p) for p in ov.params]) for ov in overloads]
    refuse = REFUSALS.get(name) or (lambda *args: v.no_overload(name, *args))
    unchecked = name in UNCHECKED  # a mismatch panics in Go: the general dispatcher below raises Panic
    if unchecked:
        pass
    elif len(table) == 1 and all(g is None for g in table[0][1]):
        return table[0][0]  # accepts anything: the implementation checks what it needs
    elif len(table) == 1 and len(table[0][1]) == 1:
        impl, (g0,) = table[0]

        def call1(x: Any) -> Any:
            if g0 is None or type(x) in g0:
                return impl(x)
            raise refuse(x)

        return call1
    elif len(table) == 1 and len(table[0][1]) == 2:
        impl, (g0, g1) = table[0]

        def call2(x: Any, y: Any) -> Any:
            if (g0 is None or type(x) in g0) and (g1 is None or type(y) in g1):
                return impl(x, y)
            raise refuse(x, y)

        return call2

    def call(*args: Any) -> Any:
        for impl, guards in table:
            for arg, guard in zip(args, guards, strict=True):
                if guard is not None and type(arg) not in guard:
                    break
            else:
                return impl(*args)
        if unchecked:
            raise v.not_a_list(args[0])
        raise refuse(*args)

    return call


# Operators and macros, registered by the package (those modules build on this one).
SPECIAL: dict[str, Callable[[Compiler, Any], Compiled]] = {}
