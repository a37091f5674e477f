"""Facts about the process a replica runs in (its Ray node, its Serve replica id, its memory): torch-free, so the
gateway reports its own with the same code an engine replica uses."""

from __future__ import annotations

import os


def ray_node() -> str | None:
    """The id of the Ray node this process runs on (None outside Ray)."""
    try:
        import ray

        return ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
    except Exception:
        return None


def replica_name() -> str | None:
    """This Serve replica's Ray actor name (None outside Serve)."""
    try:
        from ray import serve

        return serve.get_replica_context().replica_id.to_full_id_str()
    except Exception:
        return None


def rss_mb() -> float | None:
    """Resident memory of this process in MiB (Linux /proc; None elsewhere), for /admin/stats."""
    try:
        with open("/proc/self/statm") as fh:
            return round(int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)
    except (OSError, ValueError, IndexError):
        return None
