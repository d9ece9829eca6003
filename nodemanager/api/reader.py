"""A small typed reader over raw dicts that records errors with their field path.

Parsing a whole object in one pass and collecting every problem gives users one complete error
message instead of a fix-one-rerun loop.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, overload

from nodemanager.api.errors import FieldError

_MISSING = object()


class Reader:
    """Typed access to one raw object. It remembers which fields were read, so a strict parse
    can name every field nobody read (``spec.files[0].mdoe``) as unknown, as kubectl does."""

    def __init__(
        self, raw: Any, path: str, errors: list[FieldError], _family: list[Reader] | None = None
    ):
        self._errors = errors
        self._path = path
        self._seen: set[str] = set()
        self._open = False  # every field allowed (metadata: the API server owns its fields)
        self._family: list[Reader] = [] if _family is None else _family
        self._family.append(self)
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            self.error(None, f"must be an object, not {type(raw).__name__}")
            raw = {}
        self._raw = raw

    def _field(self, name: str | None) -> str:
        if name is None:
            return self._path or "<root>"
        return f"{self._path}.{name}" if self._path else name

    def error(self, name: str | None, message: str) -> None:
        self._errors.append(FieldError(self._field(name), message))

    @property
    def errors(self) -> list[FieldError]:
        return self._errors

    def field(self, name: str | None) -> str:
        """The full path of a field of this object (``spec.files[2].mode``)."""
        return self._field(name)

    def raw_list(self, name: str) -> list[Any]:
        """A list field's items as they are, for fields of more than one shape."""
        value = self._get(name)
        if value is None:
            return []
        if not isinstance(value, list):
            self.error(name, "must be a list")
            return []
        return value

    def has(self, name: str) -> bool:
        return self._get(name) is not None

    def child(self, name: str) -> Reader:
        return Reader(self._get(name), self._field(name), self._errors, self._family)

    def sub(self, raw: Any, path: str) -> Reader:
        """A reader of a nested value read some other way (an item of a mixed-shape list)."""
        return Reader(raw, path, self._errors, self._family)

    def _get(self, name: str, default: Any = None) -> Any:
        self._seen.add(name)
        return self._raw.get(name, default)

    def allow(self, *names: str) -> None:
        """Fields that are valid here though this parser does not read them."""
        self._seen.update(names)

    def allow_any(self) -> None:
        self._open = True

    def unknown_fields(self) -> list[str]:
        """Every field of this object and the objects read through it that nobody read."""
        return [
            r._field(key)
            for r in self._family
            if not r._open
            for key in r._raw
            if key not in r._seen
        ]

    def items(self, name: str) -> Iterator[Reader]:
        value = self._get(name)
        if value is None:
            return
        if not isinstance(value, list):
            self.error(name, "must be a list")
            return
        for i, item in enumerate(value):
            yield Reader(item, f"{self._field(name)}[{i}]", self._errors, self._family)

    def string(
        self,
        name: str,
        *,
        required: bool = False,
        pattern: re.Pattern[str] | None = None,
        hint: str | None = None,
        strip: bool = True,
        numbers: bool = True,
    ) -> str | None:
        """A string field; ``numbers`` accepts YAML's unquoted numbers (``version: 1.2``)."""
        value = self._get(name, _MISSING)
        if value is _MISSING or value is None:
            if required:
                self.error(name, "required")
            return None
        if (
            isinstance(value, bool)
            or not isinstance(value, (str, int, float))
            or ((not strip or not numbers) and not isinstance(value, str))
        ):
            self.error(name, f"must be a string, not {type(value).__name__}")
            return None
        value = str(value)
        if required and not value.strip():
            self.error(name, "must not be empty")
        elif pattern is not None and not pattern.match(value):
            self.error(
                name, f"{value!r} is not {hint or 'valid (pattern ' + pattern.pattern + ')'}"
            )
        return value

    def strings(self, name: str) -> tuple[str, ...]:
        value = self._get(name)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.error(name, "must be a list of strings")
            return ()
        return tuple(value)

    def string_map(self, name: str) -> dict[str, str]:
        value = self._get(name)
        if value is None:
            return {}
        if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
            self.error(name, "must be a map of strings")
            return {}
        return dict(value)

    def integer(self, name: str) -> int | None:
        value = self._get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.error(name, f"must be an integer, not {type(value).__name__}")
            return None
        return value

    @overload
    def boolean(self, name: str, *, default: bool) -> bool: ...
    @overload
    def boolean(self, name: str, *, default: None) -> bool | None: ...
    def boolean(self, name: str, *, default: bool | None) -> bool | None:
        value = self._get(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.error(name, f"must be true or false, not {value!r}")
            return default
        return value

    def choice(
        self, name: str, allowed: tuple[str, ...], *, default: str | None, required: bool = False
    ) -> str | None:
        value = self._get(name)
        if value is None:
            if required:
                self.error(name, "required")
            return default
        if value not in allowed:
            self.error(name, f"unknown value {value!r}; must be one of {', '.join(allowed)}")
            return default
        return str(value)

    def path(self, name: str, *, required: bool = False) -> str | None:
        value = self.string(name, required=required)
        if value:
            problem = path_problem(value)
            if problem:
                self.error(name, problem)
        return value

    def paths(self, name: str) -> tuple[str, ...]:
        values = self.strings(name)
        for i, value in enumerate(values):
            problem = path_problem(value)
            if problem:
                self.error(f"{name}[{i}]", problem)
        return values


# Characters no managed path may hold: C0 controls (NUL, newline, tab...) and DEL.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def path_problem(path: str) -> str | None:
    """Why ``path`` cannot name a managed file, or None.

    One file must have one spelling: ``/x/a.conf``, ``/x//a.conf`` and ``/x/./a.conf`` would
    otherwise be three resources to conflict detection and one file on disk, flipped on every
    check. So paths are absolute and canonical: no empty segment (``//``), no trailing ``/``, no
    ``.`` or ``..`` segment, no control characters. Rejected rather than normalised, so the CRD
    (a pattern) and local files give the same answer.
    """
    if _CONTROL.search(path):
        return f"{path!r} must not contain control characters (NUL, newline, ...)"
    if not path.startswith("/"):
        return f"{path!r} must be an absolute path"
    segments = path.split("/")[1:]
    if "" in segments:
        return f"{path!r} must not contain '//' or end with '/'"
    for dots in ("..", "."):
        if dots in segments:
            return f"{path!r} must not contain a '{dots}' segment"
    return None
