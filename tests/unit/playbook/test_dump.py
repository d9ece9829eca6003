"""`render` output means what the plan means: every value read back by ansible-core's own YAML
loader (which applies implicit typing even to `!unsafe` scalars) is the very string we wrote."""

import random

import pytest

from nodemanager.api import ConfigSet
from nodemanager.desired.merge import merge
from nodemanager.playbook.build import build
from nodemanager.playbook.dump import LongUnsafe, Unsafe, to_yaml
from nodemanager.playbook.plan import _digested
from nodemanager.playbook.render import fill, leaves
from nodemanager.playbook.steps import user_argv

loader = pytest.importorskip("ansible.parsing.yaml.loader")

TRICKY = [
    "123\n",
    "1.5",
    "0o17",
    "0x1f",
    "1_000",
    "yes",
    "No",
    "on",
    "null",
    "~",
    "",
    "1:30",
    "2001-01-01",
    ".inf",
    "-.nan",
    "!x",
    "*x",
    "&x",
    "=",
    "=x",
    "<<",
    "%x",
    "@x",
    "`x",
    "|",
    ">",
    "? x",
    "- x",
    "a: b",
    "a #b",
    "#c",
    "{{ lookup('pipe', 'id') }}",
    "{% raw %}",
    "{# c #}",
    "a\x85b",
    "a\u2028b",
    "a\u2029b",
    "x\r\ny",
    "trail \n",
    " lead",
    "\ttab\n",
    "multi\nline\n",
    "no final newline\nx",
    "\n",
    "\n\n",
    "  \n x",
    "0644",
    "1777",
    "2775",
    "4755",
    "01777",
    "u+rwx,g-w",
    "ünïcödé ✓\n",
    "\x00bin",
    "\x7f",
    "\ufeffbom",
    "'",
    '"',
    "\\",
    "a\\nb",
]


def _load(text: str):
    return loader.AnsibleLoader(text).get_single_data()


def _random_values(n: int) -> list[str]:
    rng = random.Random(11)
    alphabet = "09aZ :-#!*&=<{}%|>'\"\\\n\r\t\x85\u2028 ~.,_+eEoOxX"
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(n)]


@pytest.mark.parametrize("values", [TRICKY, _random_values(400)], ids=["table", "random"])
def test_ansible_reads_back_every_value_unchanged(values):
    playbook = [{"tasks": [{"name": Unsafe("t"), "argv": [Unsafe(v) if v else v for v in values]}]}]
    got = _load(to_yaml(playbook))[0]["tasks"][0]["argv"]
    wrong = [(v, g) for v, g in zip(values, got, strict=True) if not isinstance(g, str) or g != v]
    assert wrong == []


def test_templates_stay_untrusted_and_retyped_values_hold_no_template():
    from ansible.template import is_trusted_as_template, trust_as_template

    values = ["{{ x }}", "plain", "{% if 1 %}", "1.5", "yes"]
    # Loaded as Ansible loads a playbook: its text trusted as a template.
    got = loader.AnsibleLoader(
        trust_as_template(to_yaml([Unsafe(v) for v in values]))
    ).get_single_data()
    assert got == values
    # A value without `{{`, `{%` or `{#` is written plain: there is nothing in it to template.
    assert [is_trusted_as_template(g) for g in got] == [False, True, False, True, True]
    assert not any("{" in g for g in got if is_trusted_as_template(g))


def test_rendered_modes_and_args_keep_their_meaning():
    spec = {
        "files": [
            {"path": f"/t/{m}", "content": c, "mode": m}
            for m, c in [("1777", "123\n"), ("2775", "yes"), ("4755", "1:30"), ("0644", "\x85")]
        ],
        "executions": [
            {
                "command": "/usr/bin/find",
                "args": ["/d", "!", "-name", "0644", "*x"],
                "onEveryApply": True,
            }
        ],
    }
    plan = build(
        merge([ConfigSet.from_dict({"metadata": {"name": "c"}, "spec": spec})]), "debian", "n"
    )
    assert _load(to_yaml(plan.playbook)) == plan.playbook
    tasks = leaves(_load(to_yaml(plan.playbook))[0]["tasks"])
    tasks = [
        t for t in tasks if t["name"] in plan.origins and t["name"] in {s.task for s in plan.steps}
    ]
    assert [t["ansible.builtin.copy"]["mode"] for t in tasks[:4]] == [
        "1777",
        "2775",
        "4755",
        "0644",
    ]
    assert user_argv(tasks[4]["ansible.builtin.command"]["argv"]) == [
        "/usr/bin/find",
        "/d",
        "!",
        "-name",
        "0644",
        "*x",
    ]


def test_a_long_content_is_held_not_copied_and_written_as_unsafe():
    """Over LongUnsafe.ABOVE characters a ConfigSet value is carried as the same str object
    (an Unsafe would be a copy: +50 MB for a 50 MB file), written and digested exactly as an
    Unsafe of the same text."""
    text = "ünïcödé {{ lookup('pipe', 'id') }}\n" * (LongUnsafe.ABOVE // 30)
    filled = fill({"content": "$content", "dest": "$path"}, {"content": text, "path": "/x"})
    assert isinstance(filled["content"], LongUnsafe) and filled["content"].text is text
    assert isinstance(filled["dest"], Unsafe)
    assert to_yaml([{"content": filled["content"]}]) == to_yaml([{"content": Unsafe(text)}])
    assert "!unsafe" in to_yaml([{"content": filled["content"]}])[:40]
    assert _digested(filled) == _digested({"content": text, "dest": "/x"})


def test_noqa_becomes_a_comment_in_the_task_and_content_cannot_forge_one():
    from nodemanager.playbook.dump import NOQA

    forged = "x\nnodemanager_noqa_0123456789abcdef: 0\n  # noqa: name\n"
    task = {"name": "T", NOQA: ("risky-file-permissions", "why"), "copy": {"content": forged}}
    for pretty in (False, True):
        text = to_yaml([task], pretty=pretty)
        assert "# noqa: risky-file-permissions -- why\n" in text
        (loaded,) = _load(text)
        assert loaded == {"name": "T", "copy": {"content": forged}}


def test_pretty_output_is_indented_and_short_and_means_the_same():
    # (a line of content breaks only where it has a space: one long word stays long)
    long = "word " * 60 + "\n" + "x" * 300 + "\n" + "y" * 40 + "\n"
    playbook = [{"name": "P", "tasks": [{"name": "T", "copy": {"content": Unsafe(long)}}]}]
    text = to_yaml(playbook, pretty=True)
    assert "\n  tasks:\n    - name: T\n" in text
    assert max(len(line) for line in text.splitlines() if "xxx" not in line) <= 160
    assert _load(text) == playbook
