"""Tandem's own log lines in the replica's Serve log.

Ray Serve writes a replica's lines (its access lines, with the request id of the request being
handled) through the handlers it gives the `ray.serve` logger: logs/serve/replica_<app>_<deployment>_<id>.log.
A logger of Tandem's (`tandem.gateway`, ...) has no handler of its own, so Python's last-resort
handler printed its warnings and dropped every line below WARNING: an operator never saw the
INFO lines (a client that went away mid-stream, a body that never arrived). `to_replica_log()`
hands the `tandem` loggers Serve's handlers at INFO; outside a replica (no Serve handlers) it
changes nothing.
"""

from __future__ import annotations

import logging

SERVE_LOGGER = "ray.serve"  # Ray Serve's documented logger for a deployment's own lines


def to_replica_log(name: str = "tandem", level: int = logging.INFO) -> logging.Logger:
    """Send `name`'s records (and its children's) to the `ray.serve` logger's handlers at `level`;
    idempotent. Without Serve's handlers (not in a replica) the logger is left as it was."""
    logger, serve = logging.getLogger(name), logging.getLogger(SERVE_LOGGER)
    if not serve.handlers:
        return logger
    for handler in serve.handlers:
        if handler not in logger.handlers:
            logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False  # Serve's handlers write it once; the root's would print it again
    return logger
