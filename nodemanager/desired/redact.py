"""Keep Secret values out of messages (pure, no I/O).

A template error can quote a value: ``{{ node.configmaps[node.secrets.password] }}`` fails with
"has no attribute 'hunter2'". Such messages go to status, Events and logs, which every node and
many people read. So every spelling of every Secret value the template could see (as is, as a
Python or JSON string literal, base64, hex, and each line of a multi-line value) is replaced
before the message leaves. A value too short to replace safely withholds the whole message, and
so does a word of three or more letters or digits that is a piece of a value (forwards or
backwards, any case): `split`, slicing and case filters make new spellings no list can hold.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable, Mapping

REDACTED = "<redacted>"
WITHHELD = "the message is withheld: it may contain a Secret value"
_MIN = 4  # shorter forms match too much ordinary text to be replaced, so they withhold


def _forms(value: str) -> set[str]:
    raw = value.encode()
    forms = {value, repr(value)[1:-1], json.dumps(value)[1:-1], base64.b64encode(raw).decode()}
    forms.add(raw.hex())
    forms.update(line.strip() for line in value.splitlines())
    return {f for f in forms if f}


_WORD = re.compile(r"[^\W_]{3,}")  # runs of letters and digits


def _derived(message: str, secrets: list[str]) -> bool:
    """Whether any word of ``message`` is a piece of a Secret value, in either direction and
    any case: what `split`, slicing, `upper` or `reverse` of a value leave in an error."""
    haystacks = [h for v in secrets for h in (v.casefold(), v[::-1].casefold())]
    for word in _WORD.findall(message.replace(REDACTED, " ")):
        if any(word.casefold() in h for h in haystacks):
            return True
    return False


def scrub(message: str, values: Iterable[object]) -> str:
    """``message`` with every form of each string in ``values`` replaced, or withheld whole
    when a form is too short to replace or a word of it is a piece of a value."""
    secrets = [v for v in values if isinstance(v, str) and v]
    forms = set().union(*(_forms(v) for v in secrets))
    for form in sorted(forms, key=len, reverse=True):
        if form not in message:
            continue
        if len(form) < _MIN:
            return WITHHELD
        message = message.replace(form, REDACTED)
    return WITHHELD if _derived(message, secrets) else message


def decoded(secrets: Mapping[str, Mapping[str, str]]) -> list[str]:
    """Every value of Secrets as the API gives them (name -> key -> base64), as text to scrub;
    a value that is not UTF-8 is scrubbed as its base64."""
    out: list[str] = []
    for data in secrets.values():
        for value in data.values():
            try:
                out.append(base64.b64decode(value).decode("utf-8"))
            except (binascii.Error, UnicodeDecodeError, ValueError):
                out.append(value)
    return out
