"""The shipped Serve configs are valid: their `args` pass AppArgs, the deployment names are the ones
build_app makes for the config's layout (split or shared), and the GPU variant puts each engine
replica on a GPU in bf16."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ray.serve.schema import ServeDeploySchema

from router.app import AppArgs
from router.decision.layouts import LAYOUTS

REPO = Path(__file__).resolve().parents[2]
CONFIGS = ["serve_config.yaml", "serve_config.shared.yaml", "serve_config.gpu.yaml"]


@pytest.mark.parametrize("name", CONFIGS)
def test_config_is_valid(name):
    config = yaml.safe_load((REPO / name).read_text())
    (app,) = config["applications"]
    assert app["import_path"] == "router.app:build_app"
    args = AppArgs.model_validate(app["args"])
    ServeDeploySchema.model_validate(config)  # what `serve deploy` checks
    assert {d["name"] for d in app["deployments"]} == {"Gateway", *LAYOUTS[args.layout].deployments.values()}
    gateway = next(d for d in app["deployments"] if d["name"] == "Gateway")
    replicas = gateway.get("num_replicas") or gateway["autoscaling_config"]["min_replicas"]
    assert replicas >= 2, "one Gateway replica: when it dies, every new request waits out its restart"


def test_the_shared_config_serves_every_mode_from_one_engine_deployment():
    app = yaml.safe_load((REPO / "serve_config.shared.yaml").read_text())["applications"][0]
    assert AppArgs.model_validate(app["args"]).layout == "shared"
    assert [d["name"] for d in app["deployments"] if d["name"] != "Gateway"] == ["SharedEngine"]
    assert LAYOUTS["shared"].modes("shared") == ["block", "verified", "ar"]


@pytest.mark.parametrize("name", CONFIGS)
def test_serve_run_can_build_the_app_from_the_config(name):
    """What `serve run` does with the config's import_path and args, by Ray's own function (a
    builder with a second parameter once broke `serve run serve_config.yaml` with nothing else failing)."""
    import importlib

    from ray.serve._private.api import call_user_app_builder_with_args_if_necessary
    from ray.serve.deployment import Application

    app = yaml.safe_load((REPO / name).read_text())["applications"][0]
    module, _, attr = app["import_path"].partition(":")
    builder = getattr(importlib.import_module(module), attr)
    assert isinstance(call_user_app_builder_with_args_if_necessary(builder, app["args"]), Application)


def test_gpu_config_puts_engines_on_gpus():
    app = yaml.safe_load((REPO / "serve_config.gpu.yaml").read_text())["applications"][0]
    args = AppArgs.model_validate(app["args"])
    assert (args.engine.dtype, args.engine.device) == ("bfloat16", "cuda")
    by_name = {d["name"]: d for d in app["deployments"]}
    for engine in ("BlockEngine", "AREngine"):
        assert by_name[engine]["ray_actor_options"]["num_gpus"] == 1
        scaling = by_name[engine]["autoscaling_config"]
        assert 1 <= scaling["min_replicas"] <= scaling["max_replicas"]
        assert by_name[engine]["max_ongoing_requests"] >= args.engine.max_batch_size + args.engine.max_queue
    assert "num_gpus" not in by_name["Gateway"]["ray_actor_options"]
