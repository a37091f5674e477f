"""Which store a policy source names: one rule (`is_redis_source`) for the stores, the CLI and doctor."""

from policies.stores import SOURCE_ENV, is_redis_source, store_kind


def test_redis_urls_and_sockets_name_redis_and_paths_name_files(monkeypatch):
    monkeypatch.delenv(SOURCE_ENV, raising=False)
    for source in ("redis://h:6379/0", "rediss://:pw@h/1", "unix:///tmp/redis.sock"):
        assert is_redis_source(source) and store_kind(source) == "redis"
    for source in ("policies/default.yaml", "/etc/tandem/redis://.yaml", ""):
        assert not is_redis_source(source)
    assert store_kind("memory:") == "memory" and store_kind("policy.yaml") == "file"


def test_no_source_reads_the_environment_as_the_stores_do(monkeypatch):
    monkeypatch.setenv(SOURCE_ENV, "redis://127.0.0.1:6379/0")
    assert is_redis_source(None)
    monkeypatch.setenv(SOURCE_ENV, "policy.yaml")
    assert not is_redis_source(None)
