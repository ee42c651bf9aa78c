"""API keys: stored by hash, each entry checked with an error naming the entry and the field."""

from __future__ import annotations

import json

import pytest

from ragspine_core.errors import ConfigError
from ragspine_tools.serve.access import AccessDenied, KeyStore, check_bind, hash_key, new_key


def test_new_key_round_trips_through_the_printed_entry(tmp_path, capsys):
    from ragspine_tools.cli import main

    assert main(["serve", "--new-key", "support-bot", "--key-libraries", "sample,hr", "--key-max-sensitivity", "public"]) == 0
    out = capsys.readouterr()
    key = out.err.strip().splitlines()[-1].lstrip("# ").strip()
    assert key.startswith("rsk_") and key not in out.out  # the entry holds the hash, never the key
    (tmp_path / "keys.toml").write_text(out.out, encoding="utf-8")
    caller = KeyStore.load(tmp_path / "keys.toml").authenticate(key)
    assert caller.name == "support-bot" and caller.max_sensitivity == "PUBLIC"
    assert caller.may_read("hr") and not caller.may_read("finance")


def test_unknown_or_missing_keys_are_401_and_no_keys_is_anonymous():
    key = new_key()
    store = KeyStore.load(env_json=json.dumps([{"name": "a", "sha256": hash_key(key), "libraries": ["*"], "max_sensitivity": "INTERNAL"}]))
    assert store.authenticate(key).name == "a"
    for bad in (None, "", key + "x", hash_key(key)):  # the stored hash is not a key
        with pytest.raises(AccessDenied) as err:
            store.authenticate(bad)
        assert err.value.status == 401 and key not in err.value.message
    assert KeyStore.load().authenticate(None).name == "anonymous"


@pytest.mark.parametrize("entry, names", [
    ({"name": "a", "sha256": "rsk_plain-key", "libraries": ["*"], "max_sensitivity": "PUBLIC"}, "sha256"),
    ({"name": "a", "sha256": "0" * 64, "libraries": [], "max_sensitivity": "PUBLIC"}, "libraries"),
    ({"name": "a", "sha256": "0" * 64, "libraries": ["*"], "max_sensitivity": "RESTRICTED"}, "max_sensitivity"),
    ({"name": "", "sha256": "0" * 64, "libraries": ["*"], "max_sensitivity": "PUBLIC"}, "name"),
    ({"name": "a", "sha256": "0" * 64, "libraries": ["*"], "max_sensitivity": "PUBLIC", "role": "admin"}, "role"),
])
def test_bad_entries_name_the_entry_and_field(entry, names):
    with pytest.raises(ConfigError, match=names) as err:
        KeyStore.load(env_json=json.dumps([entry]))
    assert "RAGSPINE_API_KEYS: key entry 1" in str(err.value)


def test_a_repeated_key_and_a_bad_file_are_clear(tmp_path):
    entry = {"name": "a", "sha256": "0" * 64, "libraries": ["*"], "max_sensitivity": "PUBLIC"}
    with pytest.raises(ConfigError, match="repeats the hash"):
        KeyStore.load(env_json=json.dumps([entry, dict(entry, name="b")]))
    (tmp_path / "k.toml").write_text("[[key]\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid TOML"):
        KeyStore.load(tmp_path / "k.toml")
    with pytest.raises(ConfigError, match="cannot read the key file"):
        KeyStore.load(tmp_path / "missing.toml")


def test_binding_rules():
    no_keys = KeyStore.load()
    for host in ("127.0.0.1", "::1", "localhost"):
        check_bind(host, no_keys, allow_anonymous=False)
    for host in ("0.0.0.0", "10.0.0.5", "example.org", ""):
        with pytest.raises(ConfigError, match="without API keys"):
            check_bind(host, no_keys, allow_anonymous=False)
    check_bind("0.0.0.0", no_keys, allow_anonymous=True)
    keys = KeyStore.load(env_json=json.dumps([{"name": "a", "sha256": "0" * 64, "libraries": ["*"], "max_sensitivity": "PUBLIC"}]))
    check_bind("0.0.0.0", keys, allow_anonymous=False)
