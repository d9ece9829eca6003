import base64
import resource

import pytest

from nodemanager.api import ConfigSet, Node
from nodemanager.desired import sandbox, templates
from nodemanager.desired.merge import merge
from nodemanager.desired.sandbox import Limits
from nodemanager.desired.templates import (
    Renderer,
    TemplateData,
    _round_robin,
    names_read,
    render_templates,
)


def b64(text: str | bytes) -> str:
    return base64.b64encode(text.encode() if isinstance(text, str) else text).decode()


ME = Node("web1", {"role": "web"}, {"interfaces": {"eth0": {"ipv4": ["10.0.0.1"], "ipv6": []}}})
PEERS = (
    Node(
        "db1",
        {},
        {
            "interfaces": {"eth0": {"ipv4": ["10.0.0.9"], "ipv6": []}},
            "wireGuard": [{"name": "wg0", "publicKey": "PUBDB", "listenPort": 51820}],
        },
    ),
    ME,
)
DATA = TemplateData(
    ME,
    PEERS,
    secrets={"db": {"password": b64("s3cret"), "blob": b64(b"\xff\x00")}},
    configmaps={"base": {"port": "80", "host": "a"}, "override": {"port": "8080"}},
)


def render(*files):
    desired = merge(
        [ConfigSet.from_dict({"metadata": {"name": "t"}, "spec": {"files": list(files)}})]
    )
    return render_templates(desired, DATA)


def test_node_data_configmaps_and_secrets():
    _, contents, failures = render(
        {
            "path": "/a",
            "template": "{{ node.name }} {{ node.labels.role }} "
            "{{ node.status.interfaces.eth0.ipv4[0] }}\n",
        },
        {
            "path": "/b",
            "template": "{{ node.configmaps.host }}:{{ node.configmaps.port }}",
            "configMapRefs": [{"name": "base"}, {"name": "override"}],
        },
        {
            "path": "/c",
            "template": "pw={{ node.secrets.password }}",
            "secretRefs": [{"name": "db", "key": "password"}],
        },
    )
    assert failures == {}
    assert contents["/a"].text == "web1 web 10.0.0.1\n" and not contents["/a"].secret
    assert contents["/b"].text == "a:8080"  # later refs win
    assert contents["/c"].text == "pw=s3cret" and contents["/c"].secret


def test_binary_secret_values_only_through_an_explicit_filter():
    _, contents, failures = render(
        {
            "path": "/k",
            "template": "{{ node.secrets.blob | b64encode }} {{ node.secrets.blob | hex }}",
            "secretRefs": [{"name": "db"}],
        }
    )
    assert failures == {}
    assert contents["/k"].text == "/wA= ff00" and contents["/k"].secret


def test_nodes_are_sorted_by_name():
    _, contents, _ = render(
        {
            "path": "/etc/hosts",
            "template": "{% for n in nodes %}{{ n.status.interfaces.eth0.ipv4[0] }} "
            "{{ n.name }}\n{% endfor %}",
        }
    )
    assert contents["/etc/hosts"].text == "10.0.0.9 db1\n10.0.0.1 web1\n"


@pytest.mark.parametrize(
    "file, words",
    [
        (
            {"path": "/x", "template": "{{ node.nope }}"},
            "spec.files[0].template: undefined in template",
        ),
        (
            {"path": "/x", "template": "{% for %}"},
            "spec.files[0].template: template syntax error line 1",
        ),
        (
            {"path": "/x", "template": "{{ node.secrets.k }}", "secretRefs": [{"name": "missing"}]},
            "Secret 'missing' not found",
        ),
        (
            {"path": "/x", "template": "{{ 1 }}", "secretRefs": [{"name": "db", "key": "nokey"}]},
            "Secret 'db' has no key 'nokey'",
        ),
        (
            {
                "path": "/x",
                "template": "{{ node.secrets.blob }}",
                "secretRefs": [{"name": "db", "key": "blob"}],
            },
            "binary Secret value: write it through a filter",
        ),
        ({"path": "/x", "template": "{{ ''.__class__.__mro__ }}"}, "spec.files[0].template:"),
    ],
)
def test_failures_name_the_field_and_leave_the_file_out(file, words):
    desired, contents, failures = render(file, {"path": "/fine", "content": "ok"})
    assert words in failures["file:/x"], failures
    assert failures["file:/x"].startswith("TemplateError: ")
    assert [r.id for r in desired.resources] == ["file:/fine"]
    assert "/x" not in contents


FREEZE = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"


def test_a_spinning_template_fails_alone_within_its_cpu_limit():
    renderer = Renderer(Limits(cpu_seconds=1, wall_seconds=60, total_seconds=180))
    desired = merge(
        [
            ConfigSet.from_dict(
                {
                    "metadata": {"name": "t"},
                    "spec": {
                        "files": [
                            {"path": "/before", "template": "{{ node.name }}"},
                            {"path": "/spin", "template": FREEZE},
                            {"path": "/after", "template": "{{ node.name }}"},
                        ]
                    },
                }
            )
        ]
    )
    kept, contents, failures = render_templates(desired, DATA, renderer)
    # The CPU limit, or on a very busy machine the wall clock first: a limit either way.
    spin = failures["file:/spin"]
    assert "over the CPU time limit of 1 s" in spin or "took longer than" in spin, failures
    assert failures["file:/spin"].startswith("TemplateError: spec.files[1].template: ")
    assert contents["/after"].text == "web1"  # the file after it rendered in a fresh child
    assert [r.id for r in kept.resources] == ["file:/before", "file:/after"]
    # Cached: the same inputs are not tried again (the very same outcome comes back).
    specs = [r.spec for r in desired.of_kind("file")]
    first = renderer.render(specs, DATA)
    assert all(a is b for a, b in zip(first, renderer.render(specs, DATA), strict=True))


# 100,000 numbers joined by 1,000 characters each: 100 MB built inside the render child
JOIN = "{{ (range(100000) | map('string')) | join(',' * 1000) }}"


def test_memory_and_output_limits_are_errors_on_their_file():
    renderer = Renderer(Limits(memory_bytes=64 * 2**20, output_bytes=1000))
    _, contents, failures = render_templates(
        merge(
            [
                ConfigSet.from_dict(
                    {
                        "metadata": {"name": "t"},
                        "spec": {
                            "files": [
                                {"path": "/mem", "template": JOIN},
                                {"path": "/big", "template": "{{ 'y' * 5000 }}"},
                                {"path": "/ok", "template": "{{ 'z' * 10 }}"},
                            ]
                        },
                    }
                )
            ]
        ),
        DATA,
        renderer,
    )
    assert "memory limit" in failures["file:/mem"], failures
    assert "output over the limit of 1000 bytes" in failures["file:/big"], failures
    assert contents["/ok"].text == "z" * 10


def test_rendering_again_with_other_data_renders_again():
    renderer = Renderer()
    desired = merge(
        [
            ConfigSet.from_dict(
                {
                    "metadata": {"name": "t"},
                    "spec": {"files": [{"path": "/n", "template": "{{ nodes | length }}"}]},
                }
            )
        ]
    )
    assert render_templates(desired, DATA, renderer)[1]["/n"].text == "2"
    fewer = TemplateData(ME, (ME,), DATA.secrets, DATA.configmaps)
    assert render_templates(desired, fewer, renderer)[1]["/n"].text == "1"


HOSTILE = {
    "folded constant": "{{ 'x' * (15 * 10 ** 8) }}",
    "folded power": "{{ 10 ** (10 ** 8) }}",
    "list repetition": "{{ [1, 2, 3] * (10 ** 9) }}",
    "huge range": "{{ (range(10 ** 12) | list) | length }}",
    "exponential join": JOIN,
    "format width": "{{ '%999999999d' % 1 }}",
    "str.format width": "{{ '{:999999999}'.format(1) }}",
    # Jinja's recursive parser: RecursionError, which the agent itself once raised (issue 37)
    "70 nested parentheses": "{{ " + "(" * 70 + "1" + ")" * 70 + " }}",
    "244 nested ifs": "{% if true %}" * 244 + "x" + "{% endif %}" * 244,
    "241 nested fors": "{% for i in [1] %}" * 241 + "x" + "{% endfor %}" * 241,
    "990-term sum": "{{ " + "+".join(["1"] * 990) + " }}",
}


@pytest.mark.parametrize("template", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_templates_fail_on_their_file_and_the_agent_stays_flat(template):
    """The agent's own peak RSS (ru_maxrss, this process: the render child is another) does
    not move: nothing of a template is evaluated here, not even while it is compiled."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    _, contents, failures = render(
        {"path": "/hostile", "template": template}, {"path": "/ok", "template": "{{ node.name }}"}
    )
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert failures["file:/hostile"].startswith("TemplateError: spec.files[0].template: ")
    assert contents["/ok"].text == "web1"
    assert grown_mb < 32, f"the agent's own peak RSS grew {grown_mb:.0f} MB"
    assert names_read(template) == frozenset()  # read without a parse: see names_read


def test_one_budget_per_pass_and_other_configsets_first(monkeypatch):
    """Five spinning templates of one ConfigSet (1 s CPU each) in a 2.5 s budget: what the
    budget did not reach is tried again (not cached as failed), what failed on its own limit is
    not, and the file the budget ran out on goes last. The pass right after one that spent its
    budget renders none of what that pass did not reach, so a change elsewhere waits one pass,
    not two (issue 37); the other ConfigSet's file renders by the third pass even when one
    spinner's wall clock spends a whole pass (a loaded machine)."""
    ran: list[int] = []

    def counted(jobs, limits):
        ran.append(len(jobs))
        return sandbox.run_limited(jobs, limits)

    monkeypatch.setattr(templates, "run_limited", counted)
    renderer = Renderer(Limits(cpu_seconds=1, wall_seconds=30, total_seconds=2.5))
    spin = [{"path": f"/spin{i}", "template": FREEZE} for i in range(5)]
    desired = merge(
        [
            ConfigSet.from_dict({"metadata": {"name": "a-slow"}, "spec": {"files": spin}}),
            ConfigSet.from_dict(
                {
                    "metadata": {"name": "b-other"},
                    "spec": {"files": [{"path": "/other", "template": "{{ node.name }}"}]},
                }
            ),
        ]
    )
    passes, other, jobs = [], [], []
    for _ in range(12):
        before = len(ran)
        _, contents, failures = render_templates(desired, DATA, renderer)
        passes.append(failures)
        jobs.append(sum(ran[before:]))
        other.append("/other" in contents)
        if not any("budget" in why for why in failures.values()):
            break
    assert any("budget was spent" in why for why in passes[0].values()), passes[0]
    assert any(other[:3]), passes[:3]
    resting = False
    for before, after, n in zip(passes, passes[1:], jobs[1:], strict=False):
        cut = [k for k, why in before.items() if "budget" in why]
        resting = bool(cut) and not resting
        if resting:  # nothing the spent pass rendered is tried now: no job, the same text
            assert n == 0 and all(after[k] == before[k] for k in cut), after
        else:  # only what the budget cut runs again
            assert n == len(cut), (before, jobs)
        own = {k: w for k, w in before.items() if "budget" not in w}
        assert {k: after[k] for k in own} == own  # a failure on its own limit is kept
    if not any("budget" in why for why in passes[-1].values()):  # not reached under heavy load
        assert sorted(passes[-1]) == [f"file:/spin{i}" for i in range(5)]
        assert all("CPU time limit" in w or "took longer" in w for w in passes[-1].values())


def test_files_are_taken_one_configset_at_a_time():
    desired = merge(
        [
            ConfigSet.from_dict(
                {
                    "metadata": {"name": name},
                    "spec": {"files": [{"path": f"/{name}{i}", "template": "x"} for i in range(n)]},
                }
            )
            for name, n in (("a", 3), ("b", 1), ("c", 2))
        ]
    )
    order = [r.key for r in _round_robin(list(desired.of_kind("file")))]
    assert order == ["/a0", "/b0", "/c0", "/a1", "/c1", "/a2"]


def test_names_read_never_parses_and_its_cache_is_bounded():
    """Names come from words and, for short templates, Jinja's lexer: a template that breaks
    the parser costs nothing here, a literal 'nodes:' is not a read, a long template is judged
    by its words, and the cache holds digests, not texts (issue 37: 300 templates of 1.1 MB
    once took the agent from 26 to 357 MB)."""
    nested = "{{ " + "(" * 5000 + "nodes" + ")" * 5000 + " }}"
    assert names_read(nested) == frozenset({"nodes"})
    assert names_read("nodes: 3\n{{ node.name }}\n") == frozenset({"node"})
    assert names_read("{{ 'nodes' }}") == frozenset()
    assert names_read("{# nodes #}x") == frozenset()
    assert names_read("{{ nodes | length }") == frozenset({"nodes"})  # does not lex: the words
    assert names_read("x" * (templates.LEX_MAX + 1) + " nodes") == frozenset({"nodes"})
    assert names_read("{% for n in nodes %}{{ n.name }}{% endfor %}") == frozenset({"nodes"})
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    big = "{{ node.name }}" + "x" * (1 << 20)
    for i in range(300):
        assert names_read(big + str(i)) == frozenset({"node"})
    for i in range(templates._LEXED_MAX + 100):
        names_read(f"{{{{ node.name }}}}{i}")
    assert len(templates._lexed) <= templates._LEXED_MAX
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 32, f"names_read kept {grown_mb:.0f} MB"


def test_lexing_has_a_time_budget(monkeypatch):
    """Past the budget a template is judged by its words, and lexed once the window turned."""
    monkeypatch.setattr(templates, "_lex_window", [0.0, 0.0])
    monkeypatch.setattr(templates, "LEX_BUDGET", 0.0)
    text = "nodes: 3 {{ node.name }} # budget"
    assert names_read(text) == frozenset({"node", "nodes"})  # no budget left: the words
    monkeypatch.setattr(templates, "LEX_BUDGET", 10.0)
    assert names_read(text) == frozenset({"node"})  # lexed: "nodes:" is literal text
