"""Long double-quoted scalars read apart (agent/largeyaml.py) give exactly what libyaml gives for
the whole file: generated texts dumped as yaml.dump writes them, read with pieces of a few bytes
so every cut (folded line break, escaped line break, inside a line) happens many times."""

from __future__ import annotations

import random

import pytest
import yaml

from nodemanager.agent import largeyaml
from nodemanager.agent.sources import _documents_of, _UniqueKeyLoader

ALPHABET = (
    list("abcdefghij ABC 0123 ") * 4
    + [" ", "  ", "\n", "\n\n", " \n", "\t", "\\", '"', "'", "#", ": ", "- ", "{{ x }}"]
    + ["ü", "é", "€", "\U0001f600", "\x85", "\u2028", "\x00", "\x1b", "\r", "\ufeff"]
)


@pytest.fixture
def tiny(monkeypatch):
    """Every scalar is long and every piece a few bytes: the cuts happen everywhere."""

    def set_piece(size):
        monkeypatch.setattr(largeyaml, "FILE_MIN", 0)
        monkeypatch.setattr(largeyaml, "LONG", 1)
        monkeypatch.setattr(largeyaml, "PIECE", size)
        monkeypatch.setattr(largeyaml, "LINE", 48)  # lines of the file read in parts too

    return set_piece


def both_ways(path):
    whole = list(yaml.load_all(path.read_bytes(), Loader=_UniqueKeyLoader))
    return largeyaml.load_all(path, _UniqueKeyLoader), whole


def configset(content, path="/etc/big"):
    return {
        "apiVersion": "common.nodemanager/v1",
        "kind": "ConfigSet",
        "metadata": {"name": "big"},
        "spec": {"selector": {}, "files": [{"path": path, "content": content, "mode": "0644"}]},
    }


@pytest.mark.parametrize("seed", range(60))
def test_generated_texts_read_apart_as_libyaml_reads_them(tmp_path, tiny, seed):
    rng = random.Random(seed)
    tiny(rng.choice([3, 7, 16, 61, 256]))
    texts = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 400))) for _ in range(2)]
    docs = [configset(texts[0]), configset(texts[1], path="/etc/other")]
    path = tmp_path / "cs.yaml"
    path.write_text(
        yaml.dump_all(
            docs,
            Dumper=rng.choice([yaml.SafeDumper, yaml.CSafeDumper]),
            width=rng.choice([10, 20, 80, 1000]),
            allow_unicode=rng.choice([True, False]),
            default_style=rng.choice([None, '"']),
        ),
        encoding="utf-8",
    )
    apart, whole = both_ways(path)
    assert whole == docs
    assert apart is None or apart == whole
    if all(len(t) > 40 and "\r" not in t for t in texts) and seed % 2:
        assert apart is not None  # the shape yaml.dump writes is read apart


@pytest.mark.parametrize(
    "text",
    [
        'content: "a \\\n  b\\ \n  c  \n\n  d\\\t\n  \\ e"\n',  # escaped breaks and blanks
        'content: "one\r\n  two\r\n\r\n  three"\r\n',  # CRLF
        'content: |\n  x: "inside a block\n  scalar"\nother: "y"\n',  # not a value: whole file
        '# content: "in a comment\ncontent: "after it"\n',
        'a: "x" # "y"\nb:\n- "z\n  w"\n- c: "q"\n',
        'content: "\\x41\\u00e9\\U0001F600\\N\\_\\L\\P\\/\\0\\e"\n',
        'content: "bad \\q escape"\n',  # libyaml's error, not ours
        'content: "x"\ncontent: "y"\n',  # duplicate key, reported by the loader
        'content: "x\n---\n  y"\n',  # a document marker inside: libyaml's error
    ],
)
@pytest.mark.parametrize("piece", [2, 5, 64])
def test_hand_written_shapes(tmp_path, tiny, text, piece):
    tiny(piece)
    path = tmp_path / "cs.yaml"
    path.write_bytes(text.encode())
    try:
        whole = list(yaml.load_all(path.read_bytes(), Loader=_UniqueKeyLoader))
    except yaml.YAMLError:
        assert largeyaml.load_all(path, _UniqueKeyLoader) is None  # whole file: its error
        with pytest.raises(yaml.YAMLError):
            _documents_of(path)
        return
    apart = largeyaml.load_all(path, _UniqueKeyLoader)
    assert apart is None or apart == whole
    assert _documents_of(path) == whole


def test_a_long_content_is_read_apart_with_real_sizes(tmp_path):
    line = "0123456789 abcdefghij ABCDEFGHIJ ünïcödé {{ not a template }}\n"
    content = line * ((6 << 20) // len(line))
    path = tmp_path / "big.yaml"
    path.write_text(yaml.dump(configset(content), Dumper=yaml.CSafeDumper, width=1000))
    apart = largeyaml.load_all(path, _UniqueKeyLoader)
    assert apart is not None and apart[0]["spec"]["files"][0]["content"] == content
    assert apart == [configset(content)]
