"""The one registration style (ragspine_core.registry)."""

import pytest

from ragspine_core.errors import ConfigError
from ragspine_core.registry import PLUGIN_ORDER, Registry


def test_order_is_by_order_then_name_not_registration_order():
    reg: Registry[int] = Registry("thing")
    reg.register("zeta", 1)
    reg.register("alpha", 2)
    reg.register("core", 3, order=0, builtin=True)
    reg.register("beta", 4, order=5)
    assert reg.names() == ("core", "beta", "alpha", "zeta")
    assert list(reg) == [3, 4, 2, 1]
    assert reg.entries()[-1].order == PLUGIN_ORDER


def test_duplicate_unknown_and_builtin_errors_name_the_value():
    reg: Registry[str] = Registry("channel")
    reg.register("bm25", "b", order=0, builtin=True)
    with pytest.raises(ConfigError, match="channel 'bm25' is already registered"):
        reg.register("bm25", "x")
    with pytest.raises(ConfigError, match=r"unknown channel 'nope'; choose one of: bm25"):
        reg.get("nope")
    with pytest.raises(ConfigError, match="built-in channel 'bm25' cannot be removed"):
        reg.unregister("bm25")
    reg.register("bm25", "b2", replace=True)  # replacing keeps its place and protection
    assert reg.entries()[0].order == 0 and reg.entries()[0].builtin and reg.get("bm25") == "b2"
    reg.register("extra", "e")
    reg.unregister("extra")
    reg.unregister("extra")  # absent: no-op
    assert "extra" not in reg and len(reg) == 1


def test_check_and_decorator():
    def must_be_callable(name, item):
        if not callable(item):
            raise TypeError(f"transform {name!r} must be callable")

    reg: Registry = Registry("transform", check=must_be_callable)

    @reg.entry("upper")
    def upper(xs):
        return [x.upper() for x in xs]

    assert reg.get("upper") is upper
    with pytest.raises(TypeError, match="must be callable"):
        reg.register("bad", 3)
    with pytest.raises(ConfigError, match="non-empty name"):
        reg.register("", upper)
