"""A ConfigSet file with a very long double-quoted scalar, read without holding it twice.

libyaml scans a scalar into one buffer, grown by doubling (64 MB for a 53 MB content), and
PyYAML then decodes that buffer into a str: both are alive at once, with the interpreter 2.6×
the content (``make bench BENCH=large``). Here each long double-quoted scalar (what
``yaml.dump`` writes for a long text) is cut out of the file: the rest of it, now small, goes
through the caller's loader with a placeholder where the scalar was, and the scalar itself is
decoded by libyaml in pieces of a few hundred kB, cut where its meaning is known (a line break
that folds to one space, or before an escape), and appended to one str that grows in place.

Exact or nothing: whatever this reader is not sure of (another scalar style, a tag or anchor
before it, a placeholder not found as a whole value, a document indicator inside it, any YAML
error) returns None, and the caller reads the whole file as before, with libyaml's own messages
and line numbers. The differential test (tests/unit/agent/test_largeyaml.py) compares both
ways on generated texts with pieces of a few bytes.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import yaml

FILE_MIN = 4 << 20  # smaller files are read whole, as before: their scalars cost little
LONG = 1 << 20  # a double-quoted scalar this long (bytes in the file) is read apart
PIECE = 1 << 20  # bytes of a scalar decoded at once
LINE = 1 << 16  # bytes of a line read at once while looking for long scalars
SMALL_MAX = 8 << 20  # the rest of the file must stay small, or the whole file is read

# Where a double-quoted value starts: indentation, sequence entries, an optional simple key
# (plain, single- or double-quoted) and ':', then the quote. Nothing else is cut out.
_START = re.compile(
    rb"""^(?P<prefix>[ ]*(?:-[ ]+)*(?:(?:[A-Za-z0-9_][A-Za-z0-9_./-]*|"[^"\\\n]*"|'[^'\n]*')"""
    rb""":[ ]+)?)\""""
)
_INDICATOR = re.compile(rb"^(?:---|\.\.\.)(?:[ \t\r\n]|$)")
_BLANKS = b" \t"
_CUT_NOT = frozenset(b" \t\r\n")


class _Unsure(Exception):
    """Not a shape this reader knows to be exact: read the whole file instead."""


@dataclass(frozen=True)
class _Region:
    placeholder: str
    start: int  # first byte after the opening quote
    end: int  # the closing quote


def _odd_backslashes(data: bytes, end: int) -> bool:
    """Whether the backslashes just before ``end`` are an odd run (the next byte is escaped)."""
    run = 0
    while end - run > 0 and data[end - run - 1] == 0x5C:
        run += 1
    return run % 2 == 1


def _closing_quote(data: bytes, start: int, escaped: bool) -> int:
    """Index of the unescaped '"' in data[start:], or -1; ``escaped``: data[start] is escaped."""
    at = start
    while (at := data.find(b'"', at)) != -1:
        run = 0
        while at - run > start and data[at - run - 1] == 0x5C:
            run += 1
        if at - run == start and escaped:
            run += 1  # the backslash before this chunk escapes its first byte
        if run % 2 == 0:
            return at
        at += 1
    return -1


def _escapes_next(data: bytes, start: int, escaped: bool) -> bool:
    """Whether the byte after data[start:] is escaped (an odd run of backslashes ends it)."""
    run = len(data) - len(data.rstrip(b"\\"))
    run = min(run, len(data) - start)
    if run == len(data) - start and escaped:
        run += 1
    return run % 2 == 1


def _locate(stream: IO[bytes]) -> tuple[bytes, list[_Region]]:
    """The file with each long double-quoted scalar replaced by a placeholder, and where each
    one lies in the file."""
    small: list[bytes] = []
    regions: list[_Region] = []
    size, offset, line_start = 0, 0, True
    nonce = secrets.token_hex(8)
    while line := stream.readline(LINE):
        offset += len(line)
        match = _START.match(line) if line_start else None
        line_start = line.endswith(b"\n")
        if not match or line.lstrip(_BLANKS).startswith(b"#"):
            small.append(line)
            size += len(line)
            if size > SMALL_MAX:
                raise _Unsure("large content in a shape not read apart")
            continue
        start = offset - len(line) + match.end()
        chunk, at, escaped = line, match.end(), False
        held, held_size = [line], len(line)  # a short scalar stays as it is
        while (close := _closing_quote(chunk, at, escaped)) == -1:
            escaped = _escapes_next(chunk, at, escaped)
            inside_line = not chunk.endswith(b"\n")
            chunk, at = stream.readline(LINE), 0
            if not chunk or (not inside_line and _INDICATOR.match(chunk)):
                raise _Unsure("no closing quote, or a document marker inside")
            offset += len(chunk)
            if held_size <= 2 * LONG:
                held.append(chunk)
                held_size += len(chunk)
        line_start = chunk.endswith(b"\n")
        end = offset - len(chunk) + close
        if end - start < LONG:
            if held[-1] is not chunk:
                raise _Unsure("a short scalar on very long lines")
            small.extend(held)
            size += held_size
            continue
        name = f"nodemanager-long-scalar-{nonce}-{len(regions)}"
        regions.append(_Region(name, start, end))
        small.append(match.group("prefix") + f'"{name}"'.encode() + chunk[close + 1 :])
    return b"".join(small), regions


def _rstrip_unescaped(data: bytes) -> bytes:
    """Blanks before a line break are dropped, unless escaped (``\\ `` is a space)."""
    kept = data.rstrip(_BLANKS)
    if len(kept) < len(data) and _odd_backslashes(kept, len(kept)):
        kept = data[: len(kept) + 1]
    return kept


def _fold_cut(buffer: bytes) -> tuple[bytes, bytes, str] | None:
    """At the last line break of ``buffer`` between two non-blank lines, which libyaml folds to
    one space (to nothing after an escaped line break): (left, right, what joins them)."""
    at = len(buffer)
    while (at := buffer.rfind(b"\n", 0, at)) > 0:
        left = _rstrip_unescaped(buffer[:at].removesuffix(b"\r"))
        right = buffer[at + 1 :]
        first, last = right.lstrip(_BLANKS)[:1], left[-1:]
        if not (first and last) or _INDICATOR.match(right):
            continue
        if first in b"\r\n" or last in b"\r\n" or first >= b"\x80" or last >= b"\x80":
            continue  # other breaks (NEL, LS, PS, blank lines) fold otherwise
        if last == b"\\" and _odd_backslashes(left, len(left)):
            return left[:-1], right.lstrip(_BLANKS), ""
        return left, right.lstrip(_BLANKS), " "
    return None


def _text_cut(buffer: bytes) -> int | None:
    """A place inside a line where the text before it is complete: between two ASCII bytes
    that are neither blanks nor breaks, not inside an escape (before a backslash that starts
    one, or with none just before)."""
    for p in range(len(buffer) - 1, max(0, len(buffer) - 8192), -1):
        before, here = buffer[p - 1], buffer[p]
        if before >= 0x80 or here >= 0x80 or before in _CUT_NOT or here in _CUT_NOT:
            continue  # never beside blanks or breaks: libyaml folds or drops those
        if here == 0x5C:
            if not _odd_backslashes(buffer, p):
                return p
        elif 0x5C not in buffer[max(0, p - 10) : p]:
            return p
    return None


def _pieces(stream: IO[bytes], region: _Region) -> Iterator[tuple[bytes, str]]:
    """The scalar's text in pieces, each a double-quoted scalar of its own, with what libyaml
    puts between one and the next."""
    stream.seek(region.start)
    remaining = region.end - region.start
    buffer = b""
    while remaining > 0:
        data = stream.read(min(PIECE, remaining))
        if not data:
            raise _Unsure("file changed while read")
        remaining -= len(data)
        buffer += data
        if len(buffer) < PIECE or remaining == 0:
            continue
        fold = _fold_cut(buffer)
        if fold is not None:
            left, buffer, join = fold
            yield left, join
            continue
        cut = _text_cut(buffer)
        if cut is not None:
            yield buffer[:cut], ""
            buffer = buffer[cut:]
        elif len(buffer) > 8 * PIECE:
            raise _Unsure("no place to cut the scalar")
    yield buffer, ""


def _decode(stream: IO[bytes], region: _Region, loader: Any) -> str:
    value = ""
    for text, join in _pieces(stream, region):
        piece = yaml.load(b'"' + text + b'"', Loader=loader)
        if not isinstance(piece, str):
            raise _Unsure("a piece is not text")
        value += piece  # one reference: CPython grows the str in place, no second copy
        value += join
    return value


class _Substitute:
    """Each placeholder in the loaded documents replaced by its scalar, decoded once."""

    def __init__(self, stream: IO[bytes], regions: list[_Region], loader: Any):
        self.stream, self.loader = stream, loader
        self.regions = {r.placeholder: r for r in regions}
        self.found: dict[str, str] = {}

    def __call__(self, node: Any) -> Any:
        if isinstance(node, dict):
            if any(isinstance(k, str) and k in self.regions for k in node):
                raise _Unsure("a long scalar as a key")
            for key, value in node.items():
                node[key] = self(value)
        elif isinstance(node, list):
            for index, value in enumerate(node):
                node[index] = self(value)
        elif isinstance(node, str) and node in self.regions:
            if node not in self.found:
                self.found[node] = _decode(self.stream, self.regions[node], self.loader)
            return self.found[node]
        return node


def load_all(path: Path, loader: Any) -> list[Any] | None:
    """The documents of ``path`` as ``yaml.load_all(..., Loader=loader)`` gives them, with long
    double-quoted scalars read apart; None when the file is small or not of a shape this reader
    is sure of (the caller then reads it whole)."""
    try:
        if os.stat(path).st_size < FILE_MIN:
            return None
        with open(path, "rb") as stream:
            small, regions = _locate(stream)
            if not regions:
                return None
            docs = list(yaml.load_all(small, Loader=loader))
            del small
            substitute = _Substitute(stream, regions, loader)
            docs = [substitute(doc) for doc in docs]
            if len(substitute.found) != len(regions):
                return None  # a placeholder inside other text (a block scalar, a comment)
            return docs
    except (_Unsure, yaml.YAMLError, UnicodeDecodeError):
        return None
