"""CEL lexer and recursive-descent parser producing a small AST with source spans.

Macros (has, all, exists, exists_one, map, filter, cel.bind, optMap, optFlatMap) are
recognised here, as cel-go's parser does, so later stages see them as dedicated nodes.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import KubedeviceError

MAX_RECURSION = 250
MAX_CODE_POINTS = 100_000
RESERVED = frozenset(
    {
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    }
)


_KEYWORDS = frozenset({"in", "true", "false", "null"})  # tokens of their own: never a field name


class ParseError(KubedeviceError):
    """Syntax error; becomes a compile error reported at ``offset`` (cel-go's error location)."""

    def __init__(self, message: str, offset: int | None = None) -> None:
        super().__init__(message)
        self.offset = offset


@dataclass(eq=False)
class Node:
    start: int
    end: int
    # Where cel-go locates this expression (its operator, '.', '[' or call '('), for error messages.
    loc: int = field(default=-1, init=False, repr=False, compare=False)

    def at(self, loc: int) -> Node:
        self.loc = loc
        return self


@dataclass(eq=False)
class Lit(Node):
    value: Any
    kind: str  # int uint double string bytes bool null


@dataclass(eq=False)
class Ident(Node):
    name: str
    absolute: bool = False  # written with a leading dot: a global name, never a macro's variable


@dataclass(eq=False)
class Select(Node):
    operand: Node
    field: str
    test_only: bool = False
    optional: bool = False


@dataclass(eq=False)
class Call(Node):
    function: str
    target: Node | None
    args: list[Node]


@dataclass(eq=False)
class ListLit(Node):
    elements: list[Node]
    optional: set[int] = field(default_factory=set)


@dataclass(eq=False)
class MapLit(Node):
    entries: list[tuple[Node, Node, bool]]


@dataclass(eq=False)
class Comprehension(Node):
    """A macro: kind in all, exists, exists_one, map, filter, bind, optMap, optFlatMap, sortBy,
    transformList, transformMap, transformMapEntry (the last three, and all/exists/exists_one
    with ``var2``, are ext.TwoVarComprehensions)."""

    kind: str
    target: Node
    var: str
    body: Node
    extra: Node | None = None  # the filter of map(x, filter, e) and of the transform macros
    var2: str | None = None  # the value variable of a two-variable comprehension


_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t\r\n\f]+|//[^\n]*)
  | (?P<num>0x[0-9a-fA-F]+[uU]?
      |[0-9]+\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+|\.[0-9]+(?:[eE][+-]?[0-9]+)?
      |[0-9]+[uU]?)
  | (?P<id>[_a-zA-Z][_a-zA-Z0-9]*)
  | (?P<quoted>`[a-zA-Z0-9_./\- ]+`)
  | (?P<op>==|!=|<=|>=|&&|\|\||\.\?|\[\?|[-+*/%!<>?:.,\[\](){}])
    """,
    re.VERBOSE,
)
# A string or bytes literal's opening: the grammar's prefixes (r, b, br in either case) and quote.
_STRING_START = re.compile(r"""[bB]?[rR]?(?:\"\"\"|'''|"|')""")
_QUOTED_NAME = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./- ")


@dataclass(slots=True)
class Token:
    kind: str
    text: str
    start: int
    end: int


_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "`": "`",
    "?": "?",
}
_HEX = "0123456789abcdefABCDEF"


class _BadEscape(Exception):
    """The lexer stops at text[index]: ANTLR's token recognition error."""

    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.index = index


def _first_bad(body: str, start: int, allowed: list[str]) -> int | None:
    """Index of the first character from ``start`` outside its allowed set (the end counts)."""
    for k, chars in enumerate(allowed):
        if start + k >= len(body) or body[start + k] not in chars:
            return start + k
    return None


def _escape_end(text: str, i: int) -> int:
    """Index after the escape sequence whose backslash is text[i] (the grammar's ESC_SEQ);
    _BadEscape at the first character the lexer cannot take."""
    nxt = text[i + 1 : i + 2]
    if nxt and nxt in _ESCAPES:
        return i + 2
    if nxt and nxt in "xXuU":
        width = {"x": 2, "X": 2, "u": 4, "U": 8}[nxt]
        bad = _first_bad(text, i + 2, [_HEX] * width)
    else:
        width = 2
        bad = _first_bad(text, i + 1, ["0123", "01234567", "01234567"])
    if bad is not None:
        raise _BadEscape(bad)
    return i + 2 + width


def _scan_string(text: str, body: int, quote: str, raw: bool) -> tuple[int, bool]:
    """(end, True) for a literal whose body starts at text[body]; else (index of the character
    where the lexer gives up: a bad escape, a line break in a one-quote literal, or the end)."""
    i = body
    while i < len(text):
        if text.startswith(quote, i):
            return i + len(quote), True
        if len(quote) == 1 and text[i] in "\r\n":
            return i, False
        if text[i] == "\\" and not raw:
            try:
                i = _escape_end(text, i)
            except _BadEscape as exc:
                return exc.index, False
            continue
        i += 1
    return len(text), False


def _failure(text: str, pos: int) -> int:
    """Where ANTLR's lexer gives up on text[pos], which starts no token: '=', '&' and '|' only
    start two-character operators, a backtick a quoted name; anything else fails at once."""
    if text[pos] in "=&|":
        return pos + 1
    if text[pos] == "`":
        i = pos + 1
        while i < len(text) and text[i] in _QUOTED_NAME:
            i += 1
        return i
    return pos


@dataclass(slots=True)
class _Lexed:
    """The token stream ANTLR's parser sees and the first error its lexer reports: after an
    error the lexer drops the characters it read and goes on (Lexer.recover)."""

    tokens: list[Token] = field(default_factory=list)
    error: ParseError | None = None

    def fail(self, text: str, pos: int, stop: int) -> int:
        """Record the recognition error over text[pos:stop + 1]; lexing resumes after it."""
        if self.error is None:
            self.error = ParseError(f"Syntax error: token recognition error at: '{text[pos : stop + 1]}'", pos)
        return min(stop + 1, len(text))


def _lex_string(text: str, pos: int, opening: str, out: _Lexed) -> int:
    """A string or bytes literal at text[pos]. When it fails, ANTLR falls back to the longest
    token it had: for three quotes an empty literal of the same prefix (the third quote then
    starts a plain string), else the prefix as an identifier; a bare quote is the error."""
    quote = opening.lstrip("bBrR")
    prefix = len(opening) - len(quote)
    end, ok = _scan_string(text, pos + len(opening), quote, "r" in opening[:prefix].lower())
    if ok:
        out.tokens.append(Token("str", text[pos:end], pos, end))
        return end
    if len(quote) == 3:
        out.tokens.append(Token("str", text[pos : pos + prefix + 2], pos, pos + prefix + 2))
        return pos + prefix + 2
    if prefix:
        out.tokens.append(Token("id", text[pos : pos + prefix], pos, pos + prefix))
        return pos + prefix
    return out.fail(text, pos, end)


def tokenize(text: str) -> _Lexed:
    out = _Lexed()
    pos = 0
    while pos < len(text):
        if opening := _STRING_START.match(text, pos):
            pos = _lex_string(text, pos, opening.group(), out)
            continue
        m = _TOKEN.match(text, pos)
        if m is None:
            pos = out.fail(text, pos, _failure(text, pos))
            continue
        kind = m.lastgroup or ""
        if kind != "ws":
            out.tokens.append(Token(kind, m.group(), m.start(), m.end()))
        pos = m.end()
    out.tokens.append(Token("eof", "", len(text), len(text)))
    return out


def _unescape(body: str, is_bytes: bool) -> str | bytes:
    """The value of a literal the lexer accepted (so every escape is well formed)."""
    out: list[int | str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        nxt, end = body[i + 1], _escape_end(body, i)
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
        elif nxt in "xXuU":
            code = int(body[i + 2 : end], 16)
            if nxt in "uU" and is_bytes:
                raise ParseError("unable to unescape string")
            if nxt in "uU" and (0xD800 <= code <= 0xDFFF or code > 0x10FFFF):
                raise ParseError("invalid unicode code point")
            out.append(code if is_bytes else chr(code))
        else:
            out.append(int(body[i + 1 : end], 8) if is_bytes else chr(int(body[i + 1 : end], 8)))
        i = end
    if is_bytes:
        return b"".join(bytes([p]) if isinstance(p, int) else p.encode() for p in out)
    return "".join(p if isinstance(p, str) else chr(p) for p in out)


def _string_literal(text: str) -> tuple[str | bytes, str]:
    """The value of a literal token (lexed whole, so only its value can be wrong)."""
    prefix = ""
    while text[0] in "rRbB":
        prefix += text[0].lower()
        text = text[1:]
    quote = 3 if text[:3] in ('"""', "'''") else 1
    body = text[quote:-quote]
    kind = "bytes" if "b" in prefix else "string"
    if "r" in prefix:
        return (body.encode() if "b" in prefix else body), kind
    return _unescape(body, "b" in prefix), kind


def _display(text: str) -> str:
    """Input quoted as ANTLR's parser quotes it in messages (DefaultErrorStrategy.escapeWSAndQuote);
    its lexer quotes the bad characters as they are."""
    return "'" + text.replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r") + "'"


# What ANTLR lists when an expression was expected.
_EXPRESSION_START = (
    "{'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}"
)


class Parser:
    """One expression; raises ParseError."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lexed = tokenize(text)
        self.tokens = self.lexed.tokens
        self.pos = 0
        self.depth = 0

    def peek(self, offset: int = 0) -> Token:
        return self.tokens[min(self.pos + offset, len(self.tokens) - 1)]

    def next(self) -> Token:
        tok = self.tokens[self.pos]
        self.pos += 1
        return tok

    def accept(self, text: str) -> Token | None:
        tok = self.peek()
        if tok.kind == "op" and tok.text == text:
            self.pos += 1
            return tok
        return None

    def expect(self, text: str) -> Token:
        tok = self.accept(text)
        if tok is None:
            found = self.peek()
            raise ParseError(f"Syntax error: mismatched input {_display(found.text or '<EOF>')} expecting '{text}'")
        return tok

    def parse(self) -> Node:
        """The tree, or the first error by position: cel-go shows its errors sorted by location
        (common/errors.go, ToDisplayString), so a syntax error before a bad character wins."""
        lexer_error = self.lexed.error
        try:
            node = self._parse()
        except ParseError as exc:
            if lexer_error is None or (exc.offset if exc.offset is not None else 0) < (lexer_error.offset or 0):
                raise
            raise lexer_error from None
        if lexer_error is not None:
            raise lexer_error
        return node

    def _parse(self) -> Node:
        try:
            node = self.expr()
        except ParseError as exc:
            if exc.offset is None:  # the offending token is the next one
                exc.offset = self.peek().start
            raise
        if self.peek().kind != "eof":
            # ANTLR's recovery at the rule's EOF: one token too many is deleted ("extraneous"),
            # anything longer is reported as a mismatch (DefaultErrorStrategy.recoverInline).
            after = self.tokens[self.pos + 1].kind
            how = "extraneous" if after == "eof" else "mismatched"
            found = self.peek()
            raise ParseError(f"Syntax error: {how} input {_display(found.text)} expecting <EOF>", found.start)
        return node

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_RECURSION:
            raise ParseError(f"expression recursion limit exceeded: {MAX_RECURSION}", -1)  # no location

    def expr(self) -> Node:
        self._enter()
        cond = self.or_expr()
        if question := self.accept("?"):
            then = self.or_expr()
            self.expect(":")
            other = self.expr()
            cond = Call(cond.start, other.end, "_?_:_", None, [cond, then, other]).at(question.start)
        self.depth -= 1
        return cond

    def _chain(self, op: str, function: str, sub: Any) -> Node:
        left: Node = sub()
        while tok := self.accept(op):
            right = sub()
            left = Call(left.start, right.end, function, None, [left, right]).at(tok.start)
        return left

    def or_expr(self) -> Node:
        return self._chain("||", "_||_", self.and_expr)

    def and_expr(self) -> Node:
        return self._chain("&&", "_&&_", self.relation)

    def relation(self) -> Node:
        ops = {"<": "_<_", "<=": "_<=_", ">": "_>_", ">=": "_>=_", "==": "_==_", "!=": "_!=_"}
        left = self.addition()
        while True:
            tok = self.peek()
            if tok.kind == "op" and tok.text in ops:
                function = ops[tok.text]
            elif tok.kind == "id" and tok.text == "in":
                function = "@in"
            else:
                return left
            self.pos += 1
            right = self.addition()
            left = Call(left.start, right.end, function, None, [left, right]).at(tok.start)

    def addition(self) -> Node:
        left = self.multiplication()
        while (tok := self.peek()).kind == "op" and tok.text in "+-":
            self.pos += 1
            right = self.multiplication()
            left = Call(left.start, right.end, "_+_" if tok.text == "+" else "_-_", None, [left, right]).at(tok.start)
        return left

    def multiplication(self) -> Node:
        names = {"*": "_*_", "/": "_/_", "%": "_%_"}
        left = self.unary()
        while (tok := self.peek()).kind == "op" and tok.text in names:
            self.pos += 1
            right = self.unary()
            left = Call(left.start, right.end, names[tok.text], None, [left, right]).at(tok.start)
        return left

    def unary(self) -> Node:
        tok = self.peek()
        if tok.kind == "op" and tok.text in "!-":
            count = 0
            while self.peek().kind == "op" and self.peek().text == tok.text:
                self.pos += 1
                count += 1
            # Like cel-go: pairs of the same unary operator cancel out.
            if tok.text == "-" and self.peek().kind == "num" and count % 2 == 1:
                return self.member(negate=True)
            operand = self.member()
            if count % 2 == 1:
                operand = Call(tok.start, operand.end, "!_" if tok.text == "!" else "-_", None, [operand])
            return operand
        return self.member()

    def member(self, negate: bool = False) -> Node:
        node = self.primary(negate)
        while True:
            tok = self.peek()
            if tok.kind != "op":
                return node
            if tok.text in (".", ".?"):
                self.pos += 1
                name = self.next()
                if name.kind == "quoted":  # a backtick-quoted field name: a.`b-c`
                    node = Select(node.start, name.end, node, name.text[1:-1], optional=tok.text == ".?").at(tok.start)
                    continue
                if name.kind != "id" or name.text in _KEYWORDS:
                    raise self._not_a_field(tok, name)
                if tok.text == "." and (open_ := self.accept("(")):
                    args = self.arguments(")")
                    node = self.macro_or_call(name.text, node, args, node.start).at(open_.start)
                else:
                    node = Select(node.start, name.end, node, name.text, optional=tok.text == ".?").at(tok.start)
            elif tok.text in ("[", "[?"):
                self.pos += 1
                index = self.expr()
                end = self.expect("]")
                fn = "_[?_]" if tok.text == "[?" else "_[_]"
                node = Call(node.start, end.end, fn, None, [node, index]).at(tok.start)
            else:
                return node

    def _not_a_field(self, dot: Token, name: Token) -> ParseError:
        """ANTLR's error for what follows a dot: after '.?' only a field name can come; after '.'
        it quotes the input from the dot through the offending token, skipped blanks included, but
        for a literal keyword right against the dot (`a.true`, not `a. true`; cel-go v0.29, checked
        against the Go program in tests/dra/test_cel_kubernetes_corners.py) it expects a name."""
        if dot.text == ".?":
            return ParseError(
                f"Syntax error: mismatched input {_display(name.text or '<EOF>')} expecting "
                "{IDENTIFIER, ESC_IDENTIFIER}",
                name.start,
            )
        if name.text in ("true", "false", "null") and name.start == dot.end:
            return ParseError(f"Syntax error: mismatched input '{name.text}' expecting IDENTIFIER", name.start)
        return ParseError(
            f"Syntax error: no viable alternative at input {_display(self.text[dot.start : name.end])}", name.start
        )

    def arguments(self, close: str) -> list[Node]:
        args: list[Node] = []
        if self.accept(close):
            return args
        while True:
            args.append(self.expr())
            if self.accept(close):
                return args
            self.expect(",")

    def primary(self, negate: bool) -> Node:
        tok = self.next()
        if tok.kind == "num":
            return self.number(tok, negate)
        if tok.kind == "str":
            try:
                value, kind = _string_literal(tok.text)
            except ParseError as exc:
                exc.offset = tok.start
                raise
            return Lit(tok.start, tok.end, value, kind)
        if tok.kind == "id":
            return self.identifier(tok)
        if tok.kind == "op":
            return self.bracketed(tok)
        found = _display(tok.text or "<EOF>")
        raise ParseError(f"Syntax error: mismatched input {found} expecting {_EXPRESSION_START}", tok.start)

    def identifier(self, tok: Token) -> Node:
        constants = {"true": (True, "bool"), "false": (False, "bool"), "null": (None, "null")}
        if tok.text in constants:
            value, kind = constants[tok.text]
            return Lit(tok.start, tok.end, value, kind)
        if tok.text in RESERVED or tok.text == "in":
            raise ParseError(f"Syntax error: reserved identifier: {tok.text}", tok.start)
        if open_ := self.accept("("):
            args = self.arguments(")")
            return self.macro_or_call(tok.text, None, args, tok.start).at(open_.start)
        return Ident(tok.start, tok.end, tok.text)

    def bracketed(self, tok: Token) -> Node:
        if tok.text == "(":
            inner = self.expr()
            self.expect(")")
            return inner
        if tok.text in ("[", "[?"):
            return self.list_literal(tok, first_optional=tok.text == "[?")
        if tok.text == "{":
            return self.map_literal(tok)
        if tok.text == "." and (self.peek().kind == "quoted" or self.peek().text in _KEYWORDS):
            raise self._not_a_field(tok, self.peek())  # a leading dot takes a plain name only
        if tok.text == "." and self.peek().kind == "id":
            name = self.next()
            if open_ := self.accept("("):
                return self.macro_or_call(name.text, None, self.arguments(")"), tok.start).at(open_.start)
            return Ident(tok.start, name.end, name.text, absolute=True).at(name.start)
        raise ParseError(f"Syntax error: mismatched input '{tok.text}' expecting {_EXPRESSION_START}", tok.start)

    def list_literal(self, tok: Token, first_optional: bool) -> Node:
        elements: list[Node] = []
        optional: set[int] = {0} if first_optional else set()
        if first_optional and self.peek().text == "]":  # "[?]": the ? needs an element
            raise ParseError("Syntax error: mismatched input ']' expecting an expression")
        while not self.accept("]"):
            if self.accept("?"):
                optional.add(len(elements))
            elements.append(self.expr())
            if not self.accept(","):
                self.expect("]")
                break
        return ListLit(tok.start, self.tokens[self.pos - 1].end, elements, optional)

    def map_literal(self, tok: Token) -> Node:
        entries: list[tuple[Node, Node, bool]] = []
        while not self.accept("}"):
            opt = self.accept("?") is not None
            key = self.expr()
            self.expect(":")
            entries.append((key, self.expr(), opt))
            if not self.accept(","):
                self.expect("}")
                break
        return MapLit(tok.start, self.tokens[self.pos - 1].end, entries)

    def number(self, tok: Token, negate: bool) -> Node:
        """Int, uint (u suffix) or double literal; a preceding unary minus is folded in."""
        raw, start = tok.text, tok.start - (1 if negate else 0)
        hexadecimal = raw[:2] == "0x"
        unsigned = raw[-1] in "uU"
        digits = raw[:-1] if unsigned else raw
        if not hexadecimal and any(c in digits for c in ".eE"):
            number = float(digits)
            if math.isinf(number):
                raise ParseError("invalid double literal", tok.start)
            return Lit(start, tok.end, -number if negate else number, "double")
        value = int(digits, 16 if hexadecimal else 10) * (-1 if negate else 1)
        if unsigned and negate:  # the grammar has no signed uint literal: '-' applies to it
            return Call(start, tok.end, "-_", None, [self.number(tok, False)]).at(start)
        if unsigned:
            if value >= 1 << 64:
                raise ParseError("invalid uint literal", tok.start)
            return Lit(start, tok.end, value, "uint")
        if not -(1 << 63) <= value < (1 << 63):
            raise ParseError("invalid int literal", tok.start)
        return Lit(start, tok.end, value, "int")

    def macro_or_call(self, name: str, target: Node | None, args: list[Node], start: int) -> Node:
        end = self.tokens[self.pos - 1].end
        macro = _macro(name, target, args, start, end)
        if macro is not None:
            return macro
        return Call(start, end, name, target, args)


def location(node: Node) -> int:
    """Where cel-go locates an expression: its operator or call parenthesis, else its start."""
    return node.loc if node.loc >= 0 else node.start


ACCUMULATOR = "__result__"  # cel-go's parser.AccumulatorName: a comprehension's result variable


def _var(node: Node, message: str = "argument must be a simple name", iterates: bool = True) -> str:
    """A macro's variable; otherwise cel-go's error at the argument. An iteration variable may not
    be the accumulator's reserved name (cel-go parser/macro.go and ext/comprehensions.go); the
    variables of cel.bind, optMap and optFlatMap are not iteration variables and may."""
    if not isinstance(node, Ident):
        raise ParseError(message, location(node))
    if iterates and node.name == ACCUMULATOR:
        raise ParseError("iteration variable overwrites accumulator variable", node.start)
    return node.name


def _macro(name: str, target: Node | None, args: list[Node], start: int, end: int) -> Node | None:
    if target is None:
        if name == "has" and len(args) == 1:
            arg = args[0]
            if not isinstance(arg, Select) or arg.optional:
                raise ParseError("invalid argument to has() macro", arg.start)
            return Select(start, end, arg.operand, arg.field, test_only=True)
        return None
    if name == "bind" and isinstance(target, Ident) and target.name == "cel" and len(args) == 3:
        name = _var(args[0], "cel.bind() variable names must be simple identifiers", iterates=False)
        return Comprehension(start, end, "bind", args[1], name, args[2])
    if (name, len(args)) in _TWO_VAR:
        return _two_var(name, target, args, start, end)
    if name == "sortBy" and len(args) == 2:
        if isinstance(target, (Lit, MapLit)):
            raise ParseError(
                "sortBy can only be applied to a list, identifier, comprehension, call or select expression",
                target.start,
            )
        return Comprehension(start, end, "sortBy", target, _var(args[0], "argument is not an identifier"), args[1])
    # cel-go's StandardMacros, which Kubernetes uses: not ExistsOneMacroNew (a two-argument existsOne)
    kinds = {
        ("all", 2),
        ("exists", 2),
        ("exists_one", 2),
        ("map", 2),
        ("filter", 2),
        ("map", 3),
        ("optMap", 2),
        ("optFlatMap", 2),
    }
    if (name, len(args)) not in kinds:
        return None
    if name in ("optMap", "optFlatMap"):  # cel-go cel/library.go
        var = _var(args[0], f"{name}() variable name must be a simple identifier", iterates=False)
    else:
        var = _var(
            args[0], "argument is not an identifier" if name in ("map", "filter") else "argument must be a simple name"
        )
    if name == "map" and len(args) == 3:
        return Comprehension(start, end, "map", target, var, args[2], extra=args[1])
    return Comprehension(start, end, name, target, var, args[1])


_TWO_VAR = {
    ("all", 3),
    ("exists", 3),
    ("exists_one", 3),
    ("existsOne", 3),
    ("transformList", 3),
    ("transformList", 4),
    ("transformMap", 3),
    ("transformMap", 4),
    ("transformMapEntry", 3),
    ("transformMapEntry", 4),
}


def _two_var(name: str, target: Node, args: list[Node], start: int, end: int) -> Comprehension:
    """ext.TwoVarComprehensions: (index, value) over a list, (key, value) over a map."""
    first, second = (_var(a, iterates=False) for a in args[:2])
    if first == second:
        raise ParseError(f"duplicate variable name: {first}", args[1].start)
    for arg in args[:2]:  # after the duplicate check, as ext/comprehensions.go extractIterVars
        _var(arg)
    kind = "exists_one" if name == "existsOne" else name
    extra = args[2] if len(args) == 4 else None
    return Comprehension(start, end, kind, target, first, args[-1], extra=extra, var2=second)


def _depth(node: Node) -> int:
    """Nesting depth as cel-go's visitor counts it: && and || chains are balanced trees."""
    stack: list[tuple[Node, int]] = [(node, 1)]
    deepest = 0
    while stack:
        current, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > MAX_RECURSION:
            break
        if isinstance(current, Call) and current.function in ("_&&_", "_||_"):
            leaves: list[Node] = []
            flatten(current, current.function, leaves)
            extra = max(1, (len(leaves) - 1).bit_length())
            stack.extend((leaf, depth + extra) for leaf in leaves)
        else:
            stack.extend((child, depth + 1) for child in _children(current))
    return deepest


def flatten(node: Node, function: str, out: list[Node]) -> None:
    """Operands of a chain of the same binary operator (a && b && c), left to right."""
    pending = [node]
    while pending:
        current = pending.pop()
        if isinstance(current, Call) and current.function == function and current.target is None:
            pending.extend(reversed(current.args))
        else:
            out.append(current)


def _children(node: Node) -> list[Node]:
    if isinstance(node, Select):
        return [node.operand]
    if isinstance(node, Call):
        return ([node.target] if node.target is not None else []) + list(node.args)
    if isinstance(node, ListLit):
        return list(node.elements)
    if isinstance(node, MapLit):
        return [n for key, value, _ in node.entries for n in (key, value)]
    if isinstance(node, Comprehension):
        return [n for n in (node.target, node.body, node.extra) if n is not None]
    return []


def parse(text: str) -> Node:
    """Parse ``text``; ParseError for syntax errors and for nesting beyond cel-go's limits."""
    if len(text) > MAX_CODE_POINTS:
        raise ParseError(f"expression code point size exceeds limit: size: {len(text)}, limit {MAX_CODE_POINTS}")
    node = Parser(text).parse()
    if _depth(node) > MAX_RECURSION:
        raise ParseError("max recursion depth exceeded")
    return node
