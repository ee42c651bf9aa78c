"""Who may read what: API keys, stored hashed, each mapped to libraries and a sensitivity ceiling.

A key file (TOML, ``--keys FILE`` or ``RAGSPINE_API_KEYS_FILE``) or the environment
(``RAGSPINE_API_KEYS``: the same entries as a JSON list) holds one entry per key::

    [[key]]
    name = "support-bot"                 # shown in logs and metrics instead of the key
    sha256 = "<hex sha256 of the key>"   # never the key itself
    libraries = ["sample"]               # or ["*"]: every library the service serves
    max_sensitivity = "PUBLIC"           # PUBLIC | INTERNAL (RESTRICTED is never served)

``ragspine serve --new-key NAME`` prints a fresh random key once and the entry to store.
Keys are compared by their hash (:func:`hashlib.sha256`, :func:`hmac.compare_digest`);
neither the key nor its hash appears in an error, a log line or a metric.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import secrets
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from ragspine_core.errors import ConfigError

#: the ceilings a caller may hold, lowest first (RESTRICTED is never served to anyone)
CEILINGS = ("PUBLIC", "INTERNAL")


@dataclass(frozen=True, slots=True)
class Caller:
    """One authenticated caller: a name, the libraries it may read (``*`` = all), its ceiling."""

    name: str
    libraries: frozenset[str]
    max_sensitivity: str

    def may_read(self, library_id: str) -> bool:
        return "*" in self.libraries or library_id in self.libraries


#: the caller of a service that has no keys (allowed on loopback only, or when explicitly allowed)
ANONYMOUS = Caller("anonymous", frozenset({"*"}), "INTERNAL")


class AccessDenied(Exception):
    """``status`` (401: no or unknown key; 403: a library or feature the key may not use) and a safe message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def new_key() -> str:
    """A fresh random API key (256 bits, URL-safe)."""
    return "rsk_" + secrets.token_urlsafe(32)


def _entry(raw: Mapping[str, Any], where: str, i: int) -> tuple[str, Caller]:
    at = f"{where}: key entry {i + 1}"
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{at} must be a table with name, sha256, libraries, max_sensitivity")
    unknown = set(raw) - {"name", "sha256", "libraries", "max_sensitivity"}
    if unknown:
        raise ConfigError(f"{at} has unknown field(s) {', '.join(sorted(unknown))}; "
                          "allowed: name, sha256, libraries, max_sensitivity")
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{at}: 'name' must be a non-empty string (it names the caller in logs and metrics)")
    digest = str(raw.get("sha256", "")).strip().lower()
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise ConfigError(f"{at} ({name!r}): 'sha256' must be the 64 hex digits of the key's sha256, "
                          "not the key itself (`ragspine serve --new-key NAME` prints both)")
    libs = raw.get("libraries")
    if not isinstance(libs, list) or not libs or not all(isinstance(x, str) and x for x in libs):
        raise ConfigError(f"{at} ({name!r}): 'libraries' must be a non-empty list of library ids, or [\"*\"]")
    level = str(raw.get("max_sensitivity", "")).strip().upper()
    if level not in CEILINGS:
        raise ConfigError(f"{at} ({name!r}): 'max_sensitivity' must be PUBLIC or INTERNAL "
                          f"(RESTRICTED is never served), got {raw.get('max_sensitivity')!r}")
    return digest, Caller(name.strip(), frozenset(libs), level)


@dataclass(frozen=True)
class KeyStore:
    """The configured keys, by hash. Empty: no keys (anonymous access, loopback only)."""

    by_hash: Mapping[str, Caller]

    @classmethod
    def from_entries(cls, entries: Iterable[Mapping[str, Any]], where: str) -> "KeyStore":
        out: dict[str, Caller] = {}
        for i, raw in enumerate(entries):
            digest, caller = _entry(raw, where, i)
            if digest in out:
                raise ConfigError(f"{where}: key entry {i + 1} ({caller.name!r}) repeats the hash of {out[digest].name!r}")
            out[digest] = caller
        return cls(out)

    @classmethod
    def load(cls, path: str | Path | None = None, env_json: str | None = None) -> "KeyStore":
        """Keys from a TOML file (``[[key]]`` tables) and/or a JSON list (``RAGSPINE_API_KEYS``)."""
        entries: list[tuple[str, list]] = []
        if path:
            p = Path(path)
            try:
                data = tomllib.loads(p.read_text(encoding="utf-8"))
            except OSError as exc:
                raise ConfigError(f"cannot read the key file {p}: {exc.strerror or exc}") from None
            except tomllib.TOMLDecodeError as exc:
                raise ConfigError(f"the key file {p} is not valid TOML: {exc}") from None
            keys = data.get("key", [])
            if not isinstance(keys, list):
                raise ConfigError(f"the key file {p}: write each key as a [[key]] table")
            entries.append((str(p), keys))
        if env_json:
            try:
                keys = json.loads(env_json)
            except ValueError as exc:
                raise ConfigError(f"RAGSPINE_API_KEYS is not a JSON list of key entries: {exc}") from None
            if not isinstance(keys, list):
                raise ConfigError("RAGSPINE_API_KEYS must be a JSON list of {name, sha256, libraries, max_sensitivity}")
            entries.append(("RAGSPINE_API_KEYS", keys))
        merged: dict[str, Caller] = {}
        for where, keys in entries:
            for digest, caller in cls.from_entries(keys, where).by_hash.items():
                if digest in merged:
                    raise ConfigError(f"{where}: the key of {caller.name!r} is configured twice")
                merged[digest] = caller
        return cls(merged)

    @property
    def enabled(self) -> bool:
        return bool(self.by_hash)

    def authenticate(self, key: str | None) -> Caller:
        """The caller of ``key``; :class:`AccessDenied` (401) when keys are on and it is missing or unknown."""
        if not self.enabled:
            return ANONYMOUS
        if not key:
            raise AccessDenied(401, "an API key is required: send 'Authorization: Bearer <key>' (or X-API-Key)")
        digest = hash_key(key)
        for known, caller in self.by_hash.items():  # constant time per comparison
            if hmac.compare_digest(known, digest):
                return caller
        raise AccessDenied(401, "unknown API key")


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, keys: KeyStore, allow_anonymous: bool) -> None:
    """Refuse to serve beyond loopback without keys unless explicitly allowed."""
    if not keys.enabled and not is_loopback(host) and not allow_anonymous:
        raise ConfigError(f"refusing to bind {host!r} without API keys: anyone who can reach it could read every "
                          "PUBLIC and INTERNAL chunk. Configure keys (--keys FILE or RAGSPINE_API_KEYS), bind "
                          "127.0.0.1, or pass --allow-anonymous to accept that")
