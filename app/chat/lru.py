"""A bounded cache that drops what was used least recently."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LruCache(Generic[K, V]):
    """At most ``size`` entries; ``on_evict`` gets each value dropped to make room (one
    that holds a Qt object can delete it there)."""

    def __init__(self, size: int, on_evict: Callable[[V], None] | None = None) -> None:
        self._size = size
        self._on_evict = on_evict
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            _, old = self._items.popitem(last=False)
            if self._on_evict is not None:
                self._on_evict(old)

    def pop(self, key: K) -> V | None:
        return self._items.pop(key, None)

    def clear(self) -> None:
        self._items.clear()

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[K]:
        return iter(self._items)

    def values(self) -> list[V]:
        return list(self._items.values())
