"""A package with code and no tests at all."""


class Inventory:
    def __init__(self):
        self._items = {}

    def add(self, name, quantity=1):
        if quantity <= 0:
            raise ValueError("quantity must be positive")
        self._items[name] = self._items.get(name, 0) + quantity

    def remove(self, name, quantity=1):
        have = self._items.get(name, 0)
        if quantity > have:
            raise KeyError(f"only {have} of {name!r} in stock")
        if have == quantity:
            del self._items[name]
        else:
            self._items[name] = have - quantity

    def total(self):
        return sum(self._items.values())
