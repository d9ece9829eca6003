"""The Jinja2 sandbox that renders ``files[].template``: imported only when a template is
rendered or read, so commands and ConfigSets without templates never load Jinja2 (`render`
and `apply -f` start faster; ``tests/unit/cli/test_start.py``). No I/O."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment


class _Sandbox(SandboxedEnvironment):
    """Jinja's sandbox with repetition and powers computed only when a template renders.

    Jinja folds constant expressions while it compiles, and its introspection compiles too:
    ``{{ 'x' * (15 * 10 ** 8) }}`` was evaluated by the agent itself (67 MB to 4.3 GB) before
    any limit of the render child applied. Intercepted operators are never folded (Jinja's
    ``BinExpr.as_const``), so they run in the child under its limits, and there a result past
    the output limit is refused before it is built."""

    intercepted_binops = frozenset({"*", "**", "%"})
    max_result = 16 * 2**20  # sandbox.Limits.output_bytes: larger could never be written

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for seq, times in ((left, right), (right, left)):
                if isinstance(seq, str | bytes | list | tuple) and isinstance(times, int):
                    if len(seq) * times > self.max_result:
                        raise jinja2.exceptions.SecurityError(
                            f"repetition: output over the limit of {self.max_result} bytes"
                        )
        if operator == "**" and isinstance(right, int) and abs(right) > 4096:
            raise jinja2.exceptions.SecurityError("power with an exponent past 4096")
        return super().call_binop(context, operator, left, right)


def environment(filters: Mapping[str, Callable[..., Any]]) -> SandboxedEnvironment:
    env = _Sandbox(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
    env.filters.update(filters)
    return env


def render(env: SandboxedEnvironment, template: str, **data: Any) -> str:
    return env.from_string(template).render(**data)


def error_message(e: Exception) -> str | None:
    """What went wrong in a template, for status; None for an error that is not Jinja's."""
    if isinstance(e, jinja2.TemplateSyntaxError):
        return f"template syntax error line {e.lineno}: {e.message}"
    if isinstance(e, jinja2.UndefinedError):
        return f"undefined in template: {e.message}"
    if isinstance(e, jinja2.exceptions.SecurityError):
        return f"template not allowed: {e}"
    return None


def names_lexed(env: SandboxedEnvironment, template: str) -> frozenset[str]:
    """The name tokens of a template, from Jinja's lexer (iterative: no recursion, no parse);
    raises TemplateSyntaxError when it does not lex."""
    return frozenset(value for _, kind, value in env.lex(template) if kind == "name")


def unreadable(
    env: SandboxedEnvironment, template: str, data: frozenset[str]
) -> list[tuple[int, str]]:
    """Why ``template`` cannot render whatever the data: its syntax error, or each name it reads
    that is neither in ``data``, a Jinja global, nor set by the template itself; (line, why).

    Parsed only, never compiled (code generation folds constants in this process); a parse
    that recurses too deep is an answer too, not a crash."""
    try:
        tree = env.parse(template)
    except jinja2.TemplateSyntaxError as e:
        return [(e.lineno, f"template syntax error: {e.message}")]
    except RecursionError:
        return [(1, "template nested too deeply to parse")]
    stored = {n.name for n in tree.find_all(jinja2.nodes.Name) if n.ctx in ("store", "param")}
    known = {*data, *stored, *env.globals, "loop"}
    out = []
    for n in tree.find_all(jinja2.nodes.Name):
        if n.ctx == "load" and n.name not in known:
            out.append((n.lineno, f"{n.name!r} is undefined"))
            known.add(n.name)  # once per name
    return out
