from memo import memoize


def counted():
    calls = []

    @memoize
    def area(width, height=1, depth=1):
        calls.append((width, height, depth))
        return width * height * depth

    return area, calls


def test_same_arguments_computed_once():
    area, calls = counted()
    assert area(2, 3) == 6
    assert area(2, 3) == 6
    assert len(calls) == 1


def test_keyword_order_does_not_matter():
    area, calls = counted()
    assert area(2, height=3, depth=4) == 24
    assert area(2, depth=4, height=3) == 24
    assert len(calls) == 1
