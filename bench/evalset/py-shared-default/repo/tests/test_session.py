from shop.session import open_sessions


def test_each_visitor_has_their_own_cart():
    s = open_sessions(["ann", "ben"])
    s["ann"].cart.add("apple", 2)
    s["ben"].cart.add("pear")
    assert s["ann"].cart.count() == 2
    assert s["ben"].cart.count() == 1
