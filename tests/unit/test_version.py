"""nodemanager/version.py: `git describe` output as the PEP 440 version the wheel carries."""

import pytest

from nodemanager.version import pep440


@pytest.mark.parametrize(
    ("described", "version"),
    [
        ("v1.2.0", "1.2.0"),
        ("v1.2.0-3-gabc1234", "1.2.0+3.gabc1234"),
        ("v1.2.0-dirty", "1.2.0+dirty"),
        ("v1.2.0rc1-3-gabc1234-dirty", "1.2.0rc1+3.gabc1234.dirty"),
    ],
)
def test_describe_output_becomes_a_pep440_version(described, version):
    assert pep440(described) == version
