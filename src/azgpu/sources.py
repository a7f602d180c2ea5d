"""The sources every profile fact cites (profiles/sources.toml), and how a person reads them."""

from __future__ import annotations

from functools import cache

from msgspec import Struct

from .errors import ProfileError
from .shipped_data import data_dir, read_toml


class Source(Struct, frozen=True):
    key: str
    title: str
    url: str


@cache
def sources() -> dict[str, Source]:
    try:
        raw = read_toml(data_dir("profiles") / "sources.toml")
    except ValueError as exc:  # tomllib.TOMLDecodeError, loaded only when the file is parsed
        raise ProfileError(f"sources.toml: not valid TOML: {exc}") from None
    out = {}
    for key, entry in raw.items():
        if not isinstance(entry, dict) or "title" not in entry or "url" not in entry:
            raise ProfileError(f"sources.toml: [{key}] needs 'title' and 'url'")
        out[key] = Source(key, entry["title"], entry["url"])
    return out


@cache
def seeds() -> dict[str, dict[str, str]]:
    """The seed documents (profiles/seeds.toml): file name -> title and role."""
    try:
        raw = read_toml(data_dir("profiles") / "seeds.toml")
    except ValueError as exc:  # tomllib.TOMLDecodeError
        raise ProfileError(f"seeds.toml: not valid TOML: {exc}") from None
    for name, entry in raw.items():
        if not isinstance(entry, dict) or not entry.get("title") or not entry.get("role"):
            raise ProfileError(f"seeds.toml: [\"{name}\"] needs 'title' and 'role'")
    return raw


def seed_title(name: str) -> str:
    """A seed document by its title (its file name means nothing to a user, who cannot open it)."""
    entry = seeds().get(name)
    return entry["title"] if entry else name


def describe_seed(name: str) -> str:
    entry = seeds().get(name)
    # Named by what it is (its title and role), never as a "seed document": a user has no seeds.
    return f"'{entry['title']}' ({entry['role']})" if entry else f"the document {name}"


def describe_source(key: str) -> str:
    """A source key as a person reads it: title and address."""
    if key.startswith("seed:"):
        return describe_seed(key[5:])
    src = sources().get(key)
    return f"{src.title} <{src.url}>" if src else key


def cite(keys: tuple[str, ...] | list[str]) -> str:
    return "; ".join(describe_source(k) for k in keys)


def known_source(key: str) -> bool:
    return key[5:] in seeds() if key.startswith("seed:") else key in sources()

