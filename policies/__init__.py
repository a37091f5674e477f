"""Routing policies: the typed schema, its validation, and the stores (YAML file, Redis) that
serve, version, hot-reload and roll back the live policy. Names load on first use."""

from __future__ import annotations

from engines.lazy_exports import lazy_exports

_EXPORTS = {
    "Policy": "policies.schema",
    "KeyOverride": "policies.schema",
    "MODES": "policies.schema",
    "TASKS": "policies.schema",
    "PolicyStore": "policies.stores",
    "FileStore": "policies.stores",
    "MemoryStore": "policies.stores",
    "RedisStore": "policies.stores",
    "STORES": "policies.stores",
    "load_store": "policies.stores",
    "is_redis_source": "policies.stores",
    "validate_policy": "policies.stores",
    "default_policy": "policies.stores",
    "PolicyError": "policies.errors",
    "PolicyValidationError": "policies.errors",
    "StaleVersionError": "policies.errors",
    "PolicyNotFoundError": "policies.errors",
    "PolicyStoreUnavailableError": "policies.errors",
}

__all__, __getattr__ = lazy_exports(__name__, _EXPORTS)
