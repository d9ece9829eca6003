"""docs/migrating-templates.md: every upstream (gomplate) example is detected as gomplate, and
every Jinja2 translation renders with the project's real template engine."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from nodemanager.api import File, Node, Ref
from nodemanager.api.configset import GOMPLATE
from nodemanager.desired.templates import TemplateData, render_file

GUIDE = (Path(__file__).resolve().parents[2] / "docs" / "migrating-templates.md").read_text()
BLOCKS = re.findall(r"```(gotemplate|jinja)\n(.*?)```", GUIDE, re.S)
GO = [text for lang, text in BLOCKS if lang == "gotemplate"]
JINJA = [text for lang, text in BLOCKS if lang == "jinja"]

STATUS = {
    "interfaces": {"eth0": {"ipv4": ["10.0.0.1"], "ipv6": []}},
    "wireGuard": [{"name": "wg0", "publicKey": "PUBKEY1=", "listenPort": 51820}],
    "sshHostKeys": [{"algorithm": 4, "fingerprintType": 2, "fingerprint": "abcd"}],
}
ME = Node("web-1", {"kubernetes.io/hostname": "web-1"}, STATUS)
DATA = TemplateData(
    node=ME,
    nodes=(ME, Node("web-2", {}, {})),
    secrets={
        "app": {
            "password": base64.b64encode(b"pw").decode(),
            "privateKey": base64.b64encode(b"PRIV=").decode(),
        }
    },
)


def test_the_guide_pairs_each_upstream_example_with_a_translation():
    assert len(GO) == len(JINJA) == 4


@pytest.mark.parametrize("template", GO)
def test_upstream_examples_are_detected_as_gomplate(template):
    assert GOMPLATE.search(template)


@pytest.mark.parametrize("template", JINJA)
def test_translations_render_and_are_not_taken_for_gomplate(template):
    assert not GOMPLATE.search(template)
    text = render_file(File(path="/x", template=template, secret_refs=(Ref("app"),)), DATA).text
    assert "{{" not in text and "{%" not in text
    expected = {
        "password=": "password=pw",
        "address=": "address=10.0.0.1",
        "[Peer]": "PublicKey = PUBKEY1=",
        "SSHFP": "web-1 IN SSHFP 4 2 abcd",
    }
    assert any(marker in text and line in text for marker, line in expected.items()), text


@pytest.mark.parametrize("go, jinja", list(zip(GO, JINJA, strict=True)))
def test_nodemanager_migrate_translates_each_example_to_the_same_output(go, jinja):
    """desired/gomplate.py: the translated upstream example renders what the guide's does."""
    from nodemanager.desired.gomplate import translate

    result = translate(go)
    assert result.problems == []
    assert not GOMPLATE.search(result.text)
    ours = render_file(File(path="/x", template=result.text, secret_refs=(Ref("app"),)), DATA)
    guide = render_file(File(path="/x", template=jinja, secret_refs=(Ref("app"),)), DATA)
    assert ours.text == guide.text
