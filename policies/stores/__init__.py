"""Policy stores: where the live routing policy comes from, and how it changes.

A name->class registry (`STORES`) picks the store a source string names (`store_kind`), and
`load_store` builds it; the default source is $TANDEM_POLICY_SOURCE, else the shipped
policies/default.yaml. One module per concern:

- `base`          validation (`validate_policy`, `default_policy`), `PolicyRecord`, the
                  `PolicyStore` contract; imports no store, so nothing here forms a cycle
- `file_store`    `file`  (a path): a YAML file, reloaded when it changes, written under `flock`
- `redis_store`   `redis` (a redis:// URL): shared by every replica, hot-reloaded over pub/sub
- `redis_versions` the Redis keys behind it: compare-and-set writes, history, the version mark
- `memory_store`  `memory` (`memory:`): this process only

Every write is validated first and changes nothing when refused; it is a full policy (every
field stated) or an explicit patch laid over the current policy; a rollback writes the old
content as a new version, so history and versions only grow. `current()` is the hot path. This package
imports each store module (cheap: the `redis` library loads only when a Redis store is built)
and re-exports their names: callers import every name from `policies.stores`, never a module
below it.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from policies.errors import PolicyError
from policies.stores.base import (
    DEFAULT_POLICY_PATH,
    PolicyRecord,
    PolicyStore,
    check_write,
    default_policy,
    merge_patch,
    read_policy_file,
    read_text,
    redact,
    resolve_write,
    validate_policy,
)
from policies.stores.file_store import FileStore
from policies.stores.memory_store import MemoryStore
from policies.stores.redis_store import RedisStore

__all__ = [
    "DEFAULT_POLICY_PATH",
    "SOURCE_ENV",
    "STORES",
    "FileStore",
    "MemoryStore",
    "PolicyRecord",
    "PolicyStore",
    "RedisStore",
    "check_write",
    "default_policy",
    "load_store",
    "merge_patch",
    "read_policy_file",
    "read_text",
    "redact",
    "register_store",
    "resolve_write",
    "store_kind",
    "is_redis_source",
    "validate_policy",
]

SOURCE_ENV = "TANDEM_POLICY_SOURCE"  # the environment variable naming the default source


# --- the registry --------------------------------------------------------------------------------

STORES: dict[str, type[PolicyStore]] = {cls.name: cls for cls in (FileStore, RedisStore, MemoryStore)}


def register_store(name: str) -> Callable[[type[PolicyStore]], type[PolicyStore]]:
    """A class decorator that adds a further store to `STORES` under `name`."""

    def deco(cls: type[PolicyStore]) -> type[PolicyStore]:
        cls.name = name
        STORES[name] = cls
        return cls

    return deco


REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def is_redis_source(source: str | None) -> bool:
    """Whether a policy source names Redis (None: $TANDEM_POLICY_SOURCE, as `load_store` reads it)."""
    return str(source or os.environ.get(SOURCE_ENV) or "").startswith(REDIS_SCHEMES)


def store_kind(source: str) -> str:
    """Which registered store a source string names: redis:// URLs -> redis, `memory:` -> memory, paths -> file."""
    if is_redis_source(source):
        return "redis"
    if source.startswith("memory:"):
        return "memory"
    return "file"


def load_store(source: str | os.PathLike | None = None, **kwargs) -> PolicyStore:
    """A store for `source` (a YAML path or a redis:// URL); default from $TANDEM_POLICY_SOURCE,
    else the shipped policies/default.yaml. Extra keyword arguments go to the store class."""
    source = str(source or os.environ.get(SOURCE_ENV) or DEFAULT_POLICY_PATH)
    kind = store_kind(source)
    if kind not in STORES:
        raise PolicyError(f"no policy store named {kind!r}; registered: {', '.join(sorted(STORES))}")
    if source.startswith("file://"):
        source = source[len("file://") :]
    if kind == "memory":
        return STORES[kind](kwargs.pop("policy", None), **kwargs)
    return STORES[kind](source, **kwargs)


# --- what operators see --------------------------------------------------------------------------

