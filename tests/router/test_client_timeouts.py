"""A client's own deadline (`x-tandem-timeout-s`): honoured only where the app turns
`client_timeouts` on, and then only to shorten request_timeout_s. tests/hardening/test_cancellation.py
shows it end to end (a 503 at the deadline, the engine row freed)."""

from __future__ import annotations

import pytest

from engines.errors import InvalidRequestError
from policies.stores import DEFAULT_POLICY_PATH
from router.gateway.calls import TIMEOUT_HEADER, client_timeout

APP_TIMEOUT_S = 8.0  # the app's request_timeout_s in these tests


def gateway(client_timeouts: bool):
    from router.gateway.orchestration import Gateway

    return Gateway(None, None, policy_source=str(DEFAULT_POLICY_PATH), request_timeout_s=APP_TIMEOUT_S, client_timeouts=client_timeouts)


def test_the_header_reads_as_seconds_and_anything_else_is_a_400_naming_it():
    assert client_timeout({}) is None
    assert client_timeout({TIMEOUT_HEADER: "1.5"}) == 1.5
    for bad in ("", "soon", "0", "-1", "nan", "inf", "1e999"):
        with pytest.raises(InvalidRequestError) as refused:
            client_timeout({TIMEOUT_HEADER: bad})
        assert refused.value.status == 400 and refused.value.param == TIMEOUT_HEADER, bad


def test_a_client_may_shorten_its_deadline_only_where_the_app_allows_it():
    on, off = gateway(client_timeouts=True), gateway(client_timeouts=False)
    assert on._timeout({TIMEOUT_HEADER: "0.25"}) == 0.25
    assert on._timeout({TIMEOUT_HEADER: str(10 * APP_TIMEOUT_S)}) == APP_TIMEOUT_S  # never longer than the app's
    assert on._timeout({}) == APP_TIMEOUT_S
    with pytest.raises(InvalidRequestError):
        on._timeout({TIMEOUT_HEADER: "soon"})
    # off (the default): the header is one more unknown header, whatever it holds
    assert off._timeout({TIMEOUT_HEADER: "0.25"}) == off._timeout({TIMEOUT_HEADER: "soon"}) == APP_TIMEOUT_S
