"""router/gateway/replica_logs.py: Tandem's loggers write through the handlers Ray Serve gives the
`ray.serve` logger in a replica (here a real handler on that logger, as Serve adds its own), INFO
included, once; outside a replica nothing changes."""

from __future__ import annotations

import io
import logging

import pytest

from router.gateway.replica_logs import SERVE_LOGGER, to_replica_log


@pytest.fixture
def fresh_loggers():
    """A `tandem` logger and a `ray.serve` logger put back as they were after the test."""
    tandem, serve = logging.getLogger("tandem-test"), logging.getLogger(SERVE_LOGGER)
    saved = [(lg, list(lg.handlers), lg.level, lg.propagate) for lg in (tandem, serve)]
    yield tandem, serve
    for lg, handlers, level, propagate in saved:
        lg.handlers[:] = handlers
        lg.setLevel(level)
        lg.propagate = propagate


def test_info_lines_reach_serves_handlers_once(fresh_loggers):
    tandem, serve = fresh_loggers
    out = io.StringIO()
    serve.handlers[:] = [logging.StreamHandler(out)]
    to_replica_log("tandem-test")
    to_replica_log("tandem-test")  # a second Gateway in the process adds nothing
    logging.getLogger("tandem-test.gateway").info("request r-1: the client went away mid-stream")
    assert out.getvalue().splitlines() == ["request r-1: the client went away mid-stream"]


def test_outside_a_replica_the_logger_is_left_alone(fresh_loggers):
    tandem, serve = fresh_loggers
    serve.handlers[:] = []
    level = tandem.level
    assert to_replica_log("tandem-test") is tandem
    assert tandem.handlers == [] and tandem.level == level and tandem.propagate
