"""Errors of the api room: a parse failure carries every field problem it found."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FieldError:
    """One problem with one field, e.g. ``spec.files[2].mode: must be an octal string``."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class InvalidObject(ValueError):
    """A ConfigSet (or ManagedNode) that cannot be used; ``errors`` names each bad field."""

    def __init__(self, kind: str, name: str, errors: list[FieldError]):
        self.kind = kind
        self.name = name
        self.errors = tuple(errors)
        details = "; ".join(str(e) for e in errors)
        super().__init__(f"{kind} {name or '<unnamed>'} is invalid: {details}")

    @property
    def reason(self) -> str:
        return "InvalidSpec"
