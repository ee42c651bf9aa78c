"""Resources: where data lives, and which embedding backend builds vectors.

Every path is configurable, so the same code location runs locally, under the
multiprocess executor, or on a distributed executor with shared storage.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from .indexing.artifacts import LIBRARY_ID_PATTERN, LibraryPaths, validate_library_id
from .indexing.publish import DEFAULT_KEEP_SNAPSHOTS


class RagspineConfig(dg.ConfigurableResource):
    """Roots of the raw documents, published artifacts and caches."""

    data_root: str = "data"
    raw_root: str = ""
    artifacts_root: str = ""
    cache_root: str = ""
    glossary_path: str = ""
    embedding: str = "auto"
    keep_snapshots: int = DEFAULT_KEEP_SNAPSHOTS

    def raw_dir(self) -> Path:
        return Path(self.raw_root) if self.raw_root else Path(self.data_root) / "raw"

    def artifacts_dir(self) -> Path:
        return Path(self.artifacts_root) if self.artifacts_root else Path(self.data_root) / "artifacts"

    def cache_dir(self) -> Path:
        return Path(self.cache_root) if self.cache_root else Path(self.data_root) / "cache"

    def glossary_file(self) -> Path:
        return Path(self.glossary_path) if self.glossary_path else Path(self.data_root) / "glossary.toml"

    def library_paths(self, library_id: str) -> LibraryPaths:
        """Paths of one library; raises ConfigError for a name that is not one safe folder name
        (so a partition key such as ``../../outside`` can never write outside the data root)."""
        validate_library_id(library_id)
        return LibraryPaths(library_id, self.raw_dir() / library_id, self.artifacts_dir() / library_id)

    def library_folders(self) -> tuple[list[str], list[str]]:
        """``(valid library names, other folder names)`` under the raw root, each sorted.

        Hidden (``.``/``_``) folders and symlinks are in neither list.
        """
        raw = self.raw_dir()
        if not raw.is_dir():
            return [], []
        names = sorted(p.name for p in raw.iterdir()
                       if p.is_dir() and not p.is_symlink() and not p.name.startswith((".", "_")))
        valid = [n for n in names if LIBRARY_ID_PATTERN.fullmatch(n) and not n.endswith(".")]
        return valid, [n for n in names if n not in valid]

    def libraries_on_disk(self) -> list[str]:
        return self.library_folders()[0]
