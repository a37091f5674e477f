"""The application builder (router.app): its arguments are typed and checked with the valid values
named, and the layout decides which engine deployments the Gateway is bound to. Nothing is
started: binding a Ray Serve application starts no cluster."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from router.app import AppArgs, EngineArgs, build_app


def bound(app):
    return app._bound_deployment  # Ray Serve's Application keeps its root deployment here (no public accessor)


def test_every_argument_is_described_and_unknown_ones_are_refused():
    for model in (AppArgs, EngineArgs):
        for name, f in model.model_fields.items():
            assert f.description, f"{model.__name__}.{name}"
    with pytest.raises(ValidationError, match="layuot"):
        AppArgs.model_validate({"layuot": "shared"})
    with pytest.raises(ValidationError, match="'split' or 'shared'"):
        AppArgs.model_validate({"layout": "single"})
    with pytest.raises(ValidationError, match="compile"):
        AppArgs.model_validate({"engine": {"compile": "maybe"}})


def test_the_split_layout_binds_a_block_and_an_ar_engine_to_the_gateway():
    gateway = bound(build_app({"request_timeout_s": 9, "engine": {"max_batch_size": 4}}))
    assert gateway.name == "Gateway"
    block, ar = (bound(engine) for engine in gateway.init_args)
    assert (block.name, ar.name) == ("BlockEngine", "AREngine")
    assert block.init_kwargs["modes"] == ("block", "verified") and ar.init_kwargs["modes"] == ("ar",)
    assert block.init_kwargs["max_batch_size"] == 4 and gateway.init_kwargs["request_timeout_s"] == 9


def test_the_shared_layout_binds_one_engine_serving_every_mode():
    gateway = bound(build_app({"layout": "shared"}))
    assert gateway.init_args == (None, None)
    shared = bound(gateway.init_kwargs["shared_engine"])
    assert shared.name == "SharedEngine" and set(shared.init_kwargs["modes"]) == {"block", "verified", "ar"}


def test_bad_arguments_fail_when_the_app_is_built_not_when_it_is_deployed():
    with pytest.raises(ValidationError, match="request_timeout_s"):
        build_app({"request_timeout_s": 0})
