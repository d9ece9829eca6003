"""No template error message carries a value of a Secret the template could read."""

from __future__ import annotations

import base64

import pytest

from nodemanager.api import ConfigSet, Node
from nodemanager.desired.merge import merge
from nodemanager.desired.redact import REDACTED, WITHHELD, scrub
from nodemanager.desired.templates import TemplateData, render_templates


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def failure(template: str, value: str) -> str:
    data = TemplateData(
        Node("web1", {}, {}),
        secrets={"db": {"password": b64(value)}},
        configmaps={"cm": {"k": "v"}},
    )
    cs = ConfigSet.from_dict(
        {
            "metadata": {"name": "t"},
            "spec": {
                "files": [
                    {
                        "path": "/x",
                        "template": template,
                        "secretRefs": [{"name": "db"}],
                        "configMapRefs": [{"name": "cm"}],
                    }
                ]
            },
        }
    )
    _, _, failures = render_templates(merge([cs]), data)
    return failures["file:/x"]


@pytest.mark.parametrize(
    "template",
    [
        "{{ node.configmaps[node.secrets.password] }}",  # the example
        "{{ node.configmaps.k[node.secrets.password] }}",
        "{{ node.secrets.password | int + 'x' }}",
        "{{ node.secrets.password + 1 }}",
        "{{ nodes[node.secrets.password] }}",
        "{{ node.secrets.password.nope }}",
        "{{ node.secrets.password | b64decode }}",
    ],
)
def test_template_errors_never_carry_the_secret_value(template):
    value = "hunter2-Sup3r\nsecond line"
    message = failure(template, value)
    assert message.startswith("TemplateError: spec.files[0].template: ")
    for form in (value, "hunter2-Sup3r", "second line", repr(value)[1:-1], b64(value)):
        assert form not in message, message


def test_a_short_value_withholds_the_whole_message():
    assert WITHHELD in failure("{{ node.configmaps[node.secrets.password] }}", "pw")


def test_scrub_replaces_every_spelling():
    assert scrub("no attribute 'abc\\ndef' / YWJjCmRlZg==", ["abc\ndef"]) == (
        f"no attribute '{REDACTED}' / {REDACTED}"
    )
    assert scrub("nothing here", ["abcd"]) == "nothing here"


@pytest.mark.parametrize(
    "template",
    [
        "{{ nodes[(node.secrets.password.split('-'))[0]] }}",  # a piece, by split
        "{{ nodes[node.secrets.password.split('-') | join('+')] }}",  # joined anew
        "{{ nodes[node.secrets.password | upper] }}",  # another case
        "{{ nodes[node.secrets.password | reverse | join] }}",  # backwards
        "{{ nodes[node.secrets.password[2:9]] }}",  # a slice
    ],
)
def test_values_derived_from_a_secret_are_withheld(template):
    message = failure(template, "hunter2-Sup3r-xyzzy")
    assert message.endswith(WITHHELD), message
    for piece in ("hunter2", "HUNTER2", "Sup3r", "xyzzy", "nter2-S", "yzzyx"):
        assert piece not in message


def test_an_error_with_no_piece_of_a_secret_keeps_its_message():
    message = failure("{{ node.secrets.pasword }}", "hunter2-Sup3r-xyzzy")
    assert "pasword" in message and WITHHELD not in message
