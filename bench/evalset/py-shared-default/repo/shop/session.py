"""A visitor's session: one cart each."""
from shop.cart import Cart


class Session:
    def __init__(self, visitor):
        self.visitor = visitor
        self.cart = Cart(visitor)


def open_sessions(visitors):
    return {v: Session(v) for v in visitors}
