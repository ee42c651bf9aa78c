"""Walk a library folder: which files are read, and the symbolic-link policy.

Every file below the library folder is listed in sorted relative-path order. Names
starting with ``.`` or ``_`` are ignored at any depth (``_library.toml`` holds the
library config).

Symbolic links: a link to a file is followed only when its target is a visible (no
``.``/``_`` part) regular file inside the library folder; a link that leads outside the
library, to a hidden path, or nowhere is an error for the link's own path (the target is
never named). Links to folders are never followed: one that stays inside the library is
listed in ``skipped`` (as ``name/``), one that leads outside is an error. A file is
opened without following a link and must be the regular file the walk saw.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ragspine_core.errors import DocumentError

_LINK_LEAVES = (
    "is a symbolic link to a location outside the library; symlinks that leave the library are not followed"
)


@dataclass(frozen=True, slots=True)
class _Entry:
    """One walked path: a file to read (``path``), a folder link (no ``path``) or a ``problem``."""

    rel: str
    path: Path | None = None
    #: ``(st_dev, st_ino)`` seen by the walk; the opened file must be the same one.
    identity: tuple[int, int] | None = None
    problem: str = ""
    hint: str = ""


def _hidden(name: str) -> bool:
    return name.startswith((".", "_"))


def library_files(root: Path) -> list[_Entry]:
    """Every non-hidden regular file and symbolic link under ``root``, sorted by path.

    Folder links are never descended into; file links are followed only to a visible
    regular file inside the library (see the module docstring).
    """
    real_root = Path(os.path.realpath(root))
    found: list[_Entry] = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        descend = []
        for name in sorted(dirnames):
            if _hidden(name):
                continue
            path = here / name
            if not path.is_symlink():
                descend.append(name)
                continue
            rel = path.relative_to(root).as_posix()
            if _inside(Path(os.path.realpath(path)), real_root) is None:
                found.append(_Entry(rel, problem=_LINK_LEAVES, hint="copy the folder into the library instead"))
            else:
                found.append(_Entry(rel))
        dirnames[:] = descend
        for name in filenames:
            if _hidden(name):
                continue
            path = here / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                found.append(_link_entry(path, rel, real_root))
                continue
            try:
                info = os.lstat(path)
            except OSError:
                continue  # vanished during the walk
            if stat.S_ISREG(info.st_mode):
                found.append(_Entry(rel, path, (info.st_dev, info.st_ino)))
    return sorted(found, key=lambda entry: entry.rel)


def _inside(target: Path, real_root: Path) -> Path | None:
    """``target`` relative to ``real_root``, or ``None`` when it is not below it."""
    try:
        return target.relative_to(real_root)
    except ValueError:
        return None


def _link_entry(path: Path, rel: str, real_root: Path) -> _Entry:
    target = Path(os.path.realpath(path))
    inside = _inside(target, real_root)
    if inside is None:
        return _Entry(rel, problem=_LINK_LEAVES, hint="copy the file into the library instead")
    if any(_hidden(part) for part in inside.parts):
        problem = "is a symbolic link to a hidden ('.' or '_') path inside the library; such links are not followed"
        return _Entry(rel, problem=problem, hint="link to a visible file, or copy the file here")
    try:
        info = os.stat(target)
    except OSError:
        return _Entry(rel, problem="is a symbolic link whose target does not exist", hint="fix or delete the link")
    if not stat.S_ISREG(info.st_mode):
        return _Entry(rel, problem="is a symbolic link to something that is not a regular file", hint="delete the link")
    return _Entry(rel, target, (info.st_dev, info.st_ino))


def read_entry(entry: _Entry, shown: str) -> bytes | DocumentError:
    """The bytes of ``entry``, opened without following a link and checked to be the
    regular file the walk saw (a path swapped for a link meanwhile is refused)."""
    assert entry.path is not None
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(entry.path, flags)
    except OSError as exc:
        problem = f"cannot be read ({exc.strerror or type(exc).__name__})"
        return DocumentError(shown, problem, field="content", hint="check the file's permissions")
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or (
            entry.identity is not None and (info.st_dev, info.st_ino) != entry.identity
        ):
            problem = "changed while the library was being read (it is no longer the same regular file)"
            return DocumentError(shown, problem, field="content", hint="run the build again")
        try:
            return handle.read()
        except OSError as exc:
            problem = f"cannot be read ({exc.strerror or type(exc).__name__})"
            return DocumentError(shown, problem, field="content", hint="check the file")
