from shop.cart import Cart


def test_new_carts_start_empty():
    a = Cart("a").add("x")
    b = Cart("b")
    assert a.count() == 1 and b.count() == 0


def test_given_items_are_kept():
    assert Cart("c", [("y", 3)]).count() == 3
