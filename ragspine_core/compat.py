"""Old module names that keep importing, with a deprecation warning, for one release.

The packages were reorganised into floors (``ragspine_core``, ``ragspine_index``,
``ragspine_dagster``, ``ragspine_query``, ``ragspine_tools``; docs/architecture.md). A
package that gave up modules installs a :class:`ModuleAliasFinder` with the old dotted
names and their new homes; ``import ragspine_assets.ingest`` then returns the module
``ragspine_dagster.ingest`` itself (one module object under two names, so classes pickled
under the old path load) and warns once per name. The finder knows names only: it
imports nothing until an old name is asked for.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType
from typing import Mapping


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new
        self._spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(f"{self.old} is now {self.new}; the old name is deprecated and goes in the next release",
                      DeprecationWarning, stacklevel=2)
        module = importlib.import_module(self.new)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the import system stamped the alias's spec on the real module: give it back its own
        module.__spec__ = self._spec


class ModuleAliasFinder(importlib.abc.MetaPathFinder):
    """Resolve ``old.dotted.name`` (or anything under it) to its new module, by longest prefix."""

    def __init__(self, aliases: Mapping[str, str]) -> None:
        self.aliases = dict(aliases)

    def target(self, fullname: str) -> str | None:
        parts = fullname.split(".")
        for i in range(len(parts), 0, -1):
            head = ".".join(parts[:i])
            if head in self.aliases:
                return ".".join([self.aliases[head], *parts[i:]])
        return None

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        new = self.target(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(fullname, new))


def install_aliases(aliases: Mapping[str, str]) -> ModuleAliasFinder:
    """Put a finder for ``aliases`` first on ``sys.meta_path`` (once per mapping)."""
    for finder in sys.meta_path:
        if isinstance(finder, ModuleAliasFinder) and finder.aliases == dict(aliases):
            return finder
    finder = ModuleAliasFinder(aliases)
    sys.meta_path.insert(0, finder)
    return finder


__all__ = ["ModuleAliasFinder", "install_aliases"]
