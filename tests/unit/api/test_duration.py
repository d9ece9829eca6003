import pytest

from nodemanager.api import parse_duration


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("30m", 1800),
        ("1h30m", 5400),
        ("1.5h", 5400),
        ("45s", 45),
        ("250ms", 0.25),
        ("8760h", 8760 * 3600),
    ],
)
def test_go_durations(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "30", "m", "1d", "5 m", "-5m", "1h 30m"])
def test_not_a_duration_names_the_text(text):
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration(text)
