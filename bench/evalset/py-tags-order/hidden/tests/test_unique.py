from blog.util import unique


def test_unique_keeps_first_positions():
    assert unique([3, 1, 3, 2, 1]) == [3, 1, 2]
    assert unique(iter("banana")) == ["b", "a", "n"]
