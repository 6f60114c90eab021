"""Shopping carts."""


class Cart:
    def __init__(self, owner, items=[]):
        self.owner = owner
        self.items = items

    def add(self, sku, qty=1):
        self.items.append((sku, qty))
        return self

    def count(self):
        return sum(q for _, q in self.items)
