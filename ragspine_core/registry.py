"""One registration style for every extension point.

Channels, query transforms, post-processors, rerankers, chunkers and embedding backends are
each a :class:`Registry`: a named table of entries, each with an ``order``. Iteration is
by ``(order, name)``, never by import order, so which modules happened to be imported
first cannot change a ranking. Built-ins declare their order where they are registered;
a plug-in that gives none lands after them (``order=PLUGIN_ORDER``), alphabetically.

    CHANNELS = Registry("channel")
    CHANNELS.register("bm25", bm25_factory, order=0, builtin=True)

    @CHANNELS.entry("my_channel")
    def my_channel(ctx): ...

``get`` of an unknown name raises :class:`~ragspine_core.errors.ConfigError` listing the
registered names; registering a name twice is an error unless ``replace=True``; a built-in
cannot be removed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Generic, Iterator, TypeVar

from ragspine_core.errors import ConfigError

T = TypeVar("T")

#: The order a plug-in gets when it names none: after every built-in.
PLUGIN_ORDER = 1000


@dataclass(frozen=True, slots=True)
class Entry(Generic[T]):
    """One registered item: its ``name``, the item itself, its ``order`` and whether it
    ships with RAGSpine (``builtin``: cannot be unregistered)."""

    name: str
    item: T
    order: int
    builtin: bool = False


class Registry(Generic[T]):
    """A named, deterministically ordered table of extension items of one ``kind``."""

    def __init__(self, kind: str, *, check: Callable[[str, T], None] | None = None) -> None:
        self.kind = kind
        self._check = check
        self._entries: dict[str, Entry[T]] = {}

    def register(self, name: str, item: T, *, order: int = PLUGIN_ORDER, replace: bool = False,
                 builtin: bool = False) -> T:
        """Add ``item`` under ``name`` and return it (so it can be used as a decorator's tail)."""
        if not isinstance(name, str) or not name:
            raise ConfigError(f"a {self.kind} needs a non-empty name, got {name!r}")
        if self._check is not None:
            self._check(name, item)
        old = self._entries.get(name)
        if old is not None and not replace:
            raise ConfigError(f"{self.kind} {name!r} is already registered; pass replace=True to replace it")
        if old is not None and old.builtin:
            builtin = True  # replacing a built-in keeps it unremovable and in its place
            order = old.order
        self._entries[name] = Entry(name, item, order, builtin)
        return item

    def entry(self, name: str, *, order: int = PLUGIN_ORDER, replace: bool = False) -> Callable[[T], T]:
        """Decorator form of :meth:`register`."""

        def deco(item: T) -> T:
            return self.register(name, item, order=order, replace=replace)

        return deco

    def unregister(self, name: str) -> None:
        """Remove ``name`` (a no-op when absent). Built-ins cannot be removed."""
        old = self._entries.get(name)
        if old is not None and old.builtin:
            raise ConfigError(f"the built-in {self.kind} {name!r} cannot be removed")
        self._entries.pop(name, None)

    def get(self, name: str) -> T:
        """The item registered as ``name``; a :class:`ConfigError` naming the choices if none."""
        try:
            return self._entries[name].item
        except KeyError:
            raise ConfigError(f"unknown {self.kind} {name!r}; choose one of: {', '.join(self.names()) or '(none registered)'}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> list[Entry[T]]:
        """Every entry, by ``(order, name)``."""
        return sorted(self._entries.values(), key=lambda e: (e.order, e.name))

    def names(self) -> tuple[str, ...]:
        """Registered names, by ``(order, name)``."""
        return tuple(e.name for e in self.entries())

    def items(self) -> list[tuple[str, T]]:
        """``(name, item)`` pairs, by ``(order, name)``."""
        return [(e.name, e.item) for e in self.entries()]

    def __iter__(self) -> Iterator[T]:
        return iter([e.item for e in self.entries()])

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {list(self.names())})"
