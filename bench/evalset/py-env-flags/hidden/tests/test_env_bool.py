import pytest

from svc.env import get_bool


@pytest.mark.parametrize("raw,want", [("1", True), ("true", True), ("Yes", True), ("ON", True),
                                      ("0", False), ("False", False), ("no", False), ("off", False)])
def test_bool_spellings(raw, want):
    assert get_bool("X", not want, {"X": raw}) is want


def test_bool_nonsense_refused():
    with pytest.raises(ValueError):
        get_bool("X", False, {"X": "maybe"})
