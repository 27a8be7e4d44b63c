"""A store or cache spec whose scheme is misspelt is refused naming the spec meant and
the valid forms (never read as a relative path), its credentials masked; real paths
keep working."""

from __future__ import annotations

import pytest

import ctxfold
from ctxfold import ConfigurationError, SQLiteStore
from ctxfold.storage import get_cache, get_store

MISSPELT = [
    ("sqlite//x.db", "sqlite:///x.db"),
    ("sqlit:///x.db", "sqlite:///x.db"),
    ("sqlte:////var/x.db", "sqlite:////var/x.db"),
    ("redis//127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
    ("rediss:/cache.example:6380", "rediss://cache.example:6380"),
    ("reddis://127.0.0.1/0", "redis://127.0.0.1/0"),
    ("unix:/run/redis.sock", "unix:///run/redis.sock"),
    ("memory:", "memory"),
    ("memroy", "memory"),
]


@pytest.mark.parametrize(("spec", "meant"), MISSPELT)
def test_a_misspelt_scheme_names_the_spec_meant(spec: str, meant: str, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for what, make in (("store", get_store), ("cache", get_cache)):
        with pytest.raises(ConfigurationError) as err:
            make(spec)
        message = str(err.value)
        assert message.startswith(f"unknown {what} spec {spec!r} (did you mean {meant!r}?)")
        assert "'sqlite:///relative.db'" in message and "redis://" in message
    with pytest.raises(ConfigurationError, match="did you mean"):
        ctxfold.Session(budget=100, store=spec)
    assert list(tmp_path.iterdir()) == []  # no directory or file made
    for path in ("data/x.db", "x.db", "sqlite_dir/x.sqlite3", "memo.db"):  # real paths
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        store = get_store(path)
        assert isinstance(store, SQLiteStore) and store.path == path
        store.close()
        assert (tmp_path / path).exists()


def test_a_password_in_a_misspelt_spec_stays_masked() -> None:
    with pytest.raises(ConfigurationError) as err:
        get_store("rediss//app:Sup3r-Secret@cache.example:6380/0")
    message = str(err.value)
    assert "Sup3r" not in message and "Secret" not in message
    assert "(did you mean 'rediss://app:***@cache.example:6380/0'?)" in message
