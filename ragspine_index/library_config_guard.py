"""Reading ``_library.toml`` safely (issue 28 item 9).

* The file is never read through a symbolic link (``O_NOFOLLOW``): a link could point
  out of the library (another library's RESTRICTED document, any file on the machine).
* Errors never echo text the file holds: an unknown key is shown only when it is a short
  identifier (a typo such as ``sumarizer``), otherwise described; a string value is
  described by its length, never quoted (numbers and booleans are shown).
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path
from typing import Any, Iterable, Mapping

from ragspine_core.errors import ConfigError

#: The largest ``_library.toml`` read (a config file, not a document).
MAX_CONFIG_BYTES = 1 << 20
_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_\-]{0,39}")


def read_config_bytes(path: Path) -> bytes | None:
    """The bytes of ``path``, or None when it does not exist.

    Raises:
        ConfigError: ``path`` is a symbolic link or not a regular file, or cannot be read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        if os.path.islink(path):
            raise ConfigError(f"{path} is a symbolic link; the library config is never read through a link: "
                              "replace it with a regular file") from None
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP or os.path.islink(path):
            raise ConfigError(f"{path} is a symbolic link; the library config is never read through a link: "
                              "replace it with a regular file") from None
        raise ConfigError(f"{path}: cannot read the library config ({exc.strerror}); check its permissions") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"{path} is not a regular file; make the library config a plain TOML file")
        if info.st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path} is {info.st_size} bytes; a library config is at most {MAX_CONFIG_BYTES} bytes")
        chunks = []
        while True:
            part = os.read(fd, 65536)
            if not part:
                break
            chunks.append(part)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _describe(value: Any) -> str:
    if isinstance(value, str):
        return f"a string of {len(value)} characters"
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value)} items"
    if isinstance(value, dict):
        return f"a table of {len(value)} keys"
    return f"a {type(value).__name__}"


def describe_keys(keys: Iterable[str]) -> str:
    """Unknown keys for an error: short identifiers as they are, anything else described."""
    return ", ".join(repr(k) if _IDENTIFIER.fullmatch(k) else f"<a key of {len(k)} characters>" for k in keys)


def scrub_values(message: str, raw: bytes, data: Mapping[str, Any] | None = None) -> str:
    """``message`` without any value of ``data`` (nor a quoted run of the file's text)."""
    for key, value in (data or {}).items():
        items = value if isinstance(value, (list, tuple)) else [value]
        for item in items:
            if not isinstance(item, str):
                continue  # numbers and booleans are settings, not text: they stay in the message
            forms = [repr(item), f'"{item}"'] + ([item] if len(item) >= 4 else [])
            for shown in forms:
                if shown in message:
                    message = message.replace(shown, f"<{_describe(item)}>")
        if isinstance(value, (list, tuple, dict)) and repr(value) in message:
            message = message.replace(repr(value), f"<{_describe(value)}>")
    return message


__all__ = ["MAX_CONFIG_BYTES", "describe_keys", "read_config_bytes", "scrub_values"]
