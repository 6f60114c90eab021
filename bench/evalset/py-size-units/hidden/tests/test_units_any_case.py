import pytest

from sizes import parse_size


@pytest.mark.parametrize("text,want", [("3", 3), ("3 b", 3), ("2kb", 2000), ("2Kb", 2000),
                                       ("1.5 GiB", 1536 * 1024**2), ("1gb", 10**9), ("4 mib", 4 * 1024**2)])
def test_units_in_any_case(text, want):
    assert parse_size(text) == want


def test_unknown_unit_is_refused():
    with pytest.raises(ValueError):
        parse_size("3 parsecs")
