"""Upstream's gomplate templates translated to this project's Jinja2 (pure, no I/O).

Covers what docs/migrating-templates.md lists: ``(ds "data")`` data (``.Node.Labels``,
``.Node.Secrets``, ``.Node.ConfigMaps``, ``.Node.Status``, ``.Nodes``), ``range``, ``if``,
``else``, ``end``, ``$v := X``, ``index``, ``strings.FromBytes`` (Secrets are text already),
``eq``/``ne``/``not``/``and``/``or``/``len``, and the ``{{-``/``-}}`` trim markers. Go field
names become the API's (``PublicKey`` -> ``publicKey``). Anything else is not guessed at: the
action is reported with its line, and the caller keeps the template as it was.

Bounded, as everything that reads a ConfigSet author's text (issue 37): actions are found by a
linear scan (a regular expression over ``{{`` without ``}}`` was quadratic), an action nested
deeper than ``MAX_DEPTH`` parentheses is reported, not followed (RecursionError), and so is
each action of a template past ``MAX_ACTIONS``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

MAX_DEPTH = 64  # parentheses in one action
MAX_ACTIONS = 10_000
_TOKEN = re.compile(r'(\s*)("(?:[^"\\]|\\.)*"|\(|\)|\||\[[^\]]*\]|[^\s()|\[]+)')
_GLUED = "\x01"  # marks a field or [key] written right after the term before it
_ROOT = {"Node": "node", "Nodes": "nodes"}
_NAMES = {"IPv4": "ipv4", "IPv6": "ipv6", "SSHHostKeys": "sshHostKeys", "ConfigMaps": "configmaps"}
# API fields that are maps (Go ranges over their values, sorted by key)
_MAPS = frozenset({"interfaces", "labels", "secrets", "configmaps", "fileBackups"})
_BINARY = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


class Untranslatable(ValueError):
    """An action outside the documented set; the message says which and why."""


@dataclass
class Translation:
    text: str
    problems: list[str] = field(default_factory=list)  # "line N: {{ ... }}: why"


def field_name(go: str) -> str:
    """A Go field name as the API spells it: ``PublicKey`` -> ``publicKey``."""
    if go in _NAMES:
        return _NAMES[go]
    head = re.match(r"[A-Z]+(?=[A-Z][a-z]|$)|[A-Z]", go)
    return go if not head else head.group(0).lower() + go[head.end() :]


class _Scope:
    def __init__(self) -> None:
        self.dots: list[str] = []  # the element name of each enclosing range
        self.blocks: list[str] = []  # "for" | "if"
        self.depth = 0  # parentheses open in the action being translated


def _path(text: str, scope: _Scope, test: bool) -> str:
    """``.A.B``, ``$v.A`` or ``(ds "data")``-rooted paths in Jinja2."""
    if text.startswith("$"):
        var, _, rest = text[1:].partition(".")
        if not var:  # gomplate's own context, not the data: upstream rendered nothing useful
            raise Untranslatable(
                "'$' is gomplate's root context, not the data (upstream printed no value): "
                "name the range element instead"
            )
        base, parts = var, [p for p in rest.split(".") if p]
    elif text.startswith("."):
        parts = [p for p in text.split(".") if p]
        if not scope.dots:
            raise Untranslatable("'.' outside a range: write (ds \"data\")")
        base = scope.dots[-1]
    else:
        raise Untranslatable(f"unknown function or name {text!r}")
    names = [field_name(p) for p in parts]
    if test and names:  # a key a node may not report yet: .get, not an error
        return base + "".join(f".{n}" for n in names[:-1]) + f'.get("{names[-1]}")'
    return base + "".join(f".{n}" for n in names)


def _term(tokens: list[str], scope: _Scope, test: bool) -> str:
    tok = tokens.pop(0)
    if tok == "(":
        scope.depth += 1
        if scope.depth > MAX_DEPTH:
            raise Untranslatable(f"nested deeper than {MAX_DEPTH} parentheses")
        inner = _pipeline(tokens, scope, test, stop=")")
        tokens.pop(0)
        scope.depth -= 1
        value = inner
    elif tok.startswith('"') or re.fullmatch(r"-?[0-9]+(\.[0-9]+)?|true|false", tok):
        return {"true": "true", "false": "false"}.get(tok, tok)
    else:
        value = _path(tok, scope, test)
    while tokens and tokens[0].startswith(_GLUED):
        nxt = tokens.pop(0)[1:]
        value = value + nxt if nxt.startswith("[") else value + _path_suffix(nxt)
    if value == '(ds "data")':
        raise Untranslatable('(ds "data") alone: use .Node or .Nodes on it')
    return value


def _path_suffix(text: str) -> str:
    parts = [p for p in text.split(".") if p]
    if parts and parts[0] in _ROOT:
        return "\0" + ".".join([_ROOT[parts[0]], *(field_name(p) for p in parts[1:])])
    return "".join(f".{field_name(p)}" for p in parts)


def _call(words: list[list[str]], scope: _Scope, test: bool, piped: str | None) -> str:
    name = words[0][0]
    args = [_term(list(w), scope, test=False) for w in words[1:]]
    if name == "index":  # piped (X | index "k"): upstream's docs mean X["k"]
        base, *keys = [piped, *args] if piped is not None else args
        return base + "".join(f"[{k}]" for k in keys)
    args += [piped] if piped is not None else []
    if name == "strings.FromBytes" and len(args) == 1:
        return args[0]  # node.secrets are decoded text already
    if name in _BINARY and len(args) == 2:
        return f"({args[0]} {_BINARY[name]} {args[1]})"
    if name == "not" and len(args) == 1:
        return f"(not {args[0]})"
    if name in ("and", "or") and len(args) >= 2:
        return "(" + f" {name} ".join(args) + ")"
    if name == "len" and len(args) == 1:
        return f"({args[0]} | length)"
    if name == "ds" and args == ['"data"']:
        return '(ds "data")'
    raise Untranslatable(f"function {name!r} is not among those translated")


def _words(tokens: list[str], stop: str | None) -> list[list[str]]:
    """The operands of one command, each as its tokens (a parenthesised group stays whole)."""
    words: list[list[str]] = []
    while tokens and tokens[0] not in ("|", stop):
        if tokens[0] == "(":
            depth, group = 0, []
            while tokens:
                t = tokens.pop(0)
                group.append(t)
                depth += {"(": 1, ")": -1}.get(t, 0)
                if depth == 0:
                    break
            words.append(group)
        elif tokens[0].startswith(_GLUED) and words:
            words[-1].append(tokens.pop(0))
        else:
            words.append([tokens.pop(0)])
    return words


def _pipeline(tokens: list[str], scope: _Scope, test: bool, stop: str | None = None) -> str:
    value: str | None = None
    while tokens and tokens[0] != stop:
        words = _words(tokens, stop)
        first = words[0][0] if words and words[0] else ""
        is_call = len(words[0]) == 1 and re.fullmatch(r"[a-z][A-Za-z0-9.]*", first) is not None
        if is_call:
            value = _call(words, scope, test, value)
        elif value is None and len(words) == 1:
            value = _term(list(words[0]), scope, test)
        else:
            raise Untranslatable("a value cannot take arguments")
        if tokens and tokens[0] == "|":
            tokens.pop(0)
    if value is None:
        raise Untranslatable("empty expression")
    return _rooted(value)


def _rooted(value: str) -> str:
    """``(ds "data")`` followed by a root path becomes that path (``node.labels``)."""
    return re.sub(r'\(ds "data"\)\x00', "", value)


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    for space, tok in _TOKEN.findall(text):
        glued = out and not space and tok[0] in ".[" and out[-1] not in ("(", "|")
        out.append(_GLUED + tok if glued else tok)
    return out


def _expr(text: str, scope: _Scope, test: bool = False) -> str:
    return _pipeline(_tokens(text), scope, test)


def _tail(collection: str) -> str:
    """The last field of a translated path: ``n.status.get("interfaces")`` -> interfaces."""
    last = collection.rsplit(".", 1)[-1]
    quoted = re.fullmatch(r'get\("(\w+)"\)', last)
    return quoted.group(1) if quoted else last.split("(")[0]


def _element(collection: str, depth: int) -> str:
    tail = _tail(collection)
    return {"nodes": "n", "sshHostKeys": "k", "wireGuard": "wg"}.get(tail, f"x{depth}")


def _statement(body: str, scope: _Scope) -> str:
    """One action as Jinja2: ``{% ... %}`` for control, ``{{ ... }}`` for a value (no markers)."""
    word, _, rest = body.partition(" ")
    if word == "range":
        if ":=" in rest:
            raise Untranslatable("range with variables ($i, $v := ...)")
        collection = _expr(rest, scope, test=rest.strip().startswith((".", "$")))
        is_map = _tail(collection) in _MAPS
        if collection.endswith('")'):  # a status key: absent means nothing to range over
            collection = collection[:-1] + (", {})" if is_map else ", [])")
        name = _element(collection, len(scope.dots))
        scope.dots.append(name)
        scope.blocks.append("for")
        if is_map:  # Go ranges over a map's values in key order; Jinja would give the keys
            return f"% for _, {name} in ({collection}) | dictsort %"
        return f"% for {name} in {collection} %"
    if word == "if":
        scope.blocks.append("if")
        return f"% if {_expr(rest, scope, test=True)} %"
    if word == "else" and not rest:
        return "% else %"
    if word == "end" and not rest:
        if not scope.blocks:
            raise Untranslatable("end without range or if")
        block = scope.blocks.pop()
        if block == "for":
            scope.dots.pop()
        return f"% end{block} %"
    if re.match(r"\$\w+\s*:?=", body):
        name, _, value = body.partition("=")
        return f"% set {name.strip(' :$')} = {_expr(value, scope)} %"
    if word in ("with", "define", "template", "block", "break", "continue") or body.startswith(
        "/*"
    ):
        raise Untranslatable(f"{word!r} is not among the actions translated")
    return "{ " + _expr(body, scope) + " }"


def _actions(template: str) -> Iterator[tuple[int, int, str, bool, bool]]:
    """(start, end, body, left trim, right trim) of each ``{{ ... }}``, in one linear scan:
    an action ends at the first ``}}`` after it opens."""
    pos = 0
    while (start := template.find("{{", pos)) >= 0:
        end = template.find("}}", start + 2)
        if end < 0:
            return
        body = template[start + 2 : end]
        left = len(body) >= 2 and body[0] == "-" and body[1].isspace()
        right = len(body) >= 2 and body[-1] == "-" and body[-2].isspace()
        body = body[2 if left else 0 : len(body) - 2 if right else len(body)]
        yield start, end + 2, body, left, right
        pos = end + 2


def _literal(text: str) -> str:
    """Text outside actions, kept literal: ``{%`` and ``{#`` are gomplate text but Jinja2 syntax."""
    if "{%" not in text and "{#" not in text:
        return text
    return (
        "{% raw %}"
        + text.replace("{% endraw %}", "{% endraw %}{{ '{% endraw %}' }}{% raw %}")
        + "{% endraw %}"
    )


def translate(template: str) -> Translation:
    """The Jinja2 for a gomplate ``template``; problems name each action left untranslated."""
    scope, out, problems, pos = _Scope(), [], [], 0
    line, counted = 1, 0  # line numbers counted as the scan goes: linear in the text
    for n, (start, end, body, trim_left, trim_right) in enumerate(_actions(template)):
        out.append(_literal(template[pos:start]))
        pos = end
        line += template.count("\n", counted, start)
        counted = start
        whole = template[start:end]
        scope.depth = 0
        try:
            if n >= MAX_ACTIONS:
                raise Untranslatable(f"past {MAX_ACTIONS} actions in one template")
            stmt = _statement(body.strip(), scope)
        except (Untranslatable, IndexError, RecursionError) as e:
            problems.append(f"line {line}: {whole[:200]}: {e}")
            out.append(whole)
            continue
        left, right = ("-" if trim_left else ""), ("-" if trim_right else "")
        out.append("{" + stmt[0] + left + " " + stmt[1:-1].strip() + " " + right + stmt[-1] + "}")
    out.append(_literal(template[pos:]))
    if scope.blocks:
        problems.append(f"{len(scope.blocks)} range/if without end")
    return Translation("".join(out), problems)
