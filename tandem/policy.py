"""`tandem policy show | validate FILE [--patch] | apply FILE [--patch] [--expect-version N] | history |
rollback VERSION`.

FILE is a full policy, which must state every field (an empty or partial file is refused with
the missing fields listed), or with `--patch` the fields to change, laid over the current policy
as a JSON merge patch (a mapping merges, null removes, anything else replaces). `--source` names the store: a YAML path or a redis:// URL (default: $TANDEM_POLICY_SOURCE, else
policies/default.yaml); `--prefix` sets the Redis key prefix. Refusals (invalid policy, stale
version, unknown version, unreachable store) print their reasons and exit 2."""

from __future__ import annotations

import argparse
import json
import sys


def _store(args: argparse.Namespace):
    from policies.stores import load_store, store_kind

    source = args.source
    kw = {}
    import os

    if store_kind(str(source or os.environ.get("TANDEM_POLICY_SOURCE") or "")) == "redis":
        kw = {"watch": False, "prefix": args.prefix}
    return load_store(source, **kw)


def _run(fn):
    def run(args: argparse.Namespace) -> int:
        from policies.errors import PolicyError

        try:
            return fn(args)
        except PolicyError as exc:
            print(f"tandem: {exc.message}", file=sys.stderr)
            return 2

    return run


@_run
def cmd_show(args: argparse.Namespace) -> int:
    import yaml

    with _store(args) as store:
        policy = store.current()
        status = store.status()
    if args.json:
        print(json.dumps({"policy": policy.model_dump(mode="json"), "status": status}, indent=2))
    else:
        print(f"# {status['source']}  version {policy.version}  healthy={status.get('healthy')}")
        if status.get("last_error"):
            print(f"# last error: {status['last_error']}")
        print(yaml.safe_dump(policy.model_dump(mode="json"), sort_keys=False), end="")
    return 0


def _checked(args: argparse.Namespace):
    """FILE as a write: a complete, valid Policy, or (--patch) a checked patch."""
    from policies.stores import check_write, read_text

    return check_write(read_text(args.file), args.patch, args.file)


@_run
def cmd_validate(args: argparse.Namespace) -> int:
    from policies.stores import resolve_write

    checked = _checked(args)
    if args.patch:  # valid only as laid over the current policy
        with _store(args) as store:
            base = store.current()
            resolve_write(checked, base, args.file)
        print(f"{args.file}: valid patch over version {base.version} ({', '.join(sorted(checked))})")
        return 0
    print(f"{args.file}: valid policy ({len(checked.task_modes)} task modes, canvases {checked.canvas_sizes})")
    return 0


@_run
def cmd_apply(args: argparse.Namespace) -> int:
    checked = _checked(args)  # validated before the store is even opened
    what = f"the patch in {args.file}" if args.patch else args.file
    with _store(args) as store:
        stored = store.apply(checked, expect_version=args.expect_version, note=args.note or f"applied from {args.file}",
                             patch=args.patch)
        print(f"applied {what} as version {stored.version} to {store.describe()}")
    return 0


@_run
def cmd_history(args: argparse.Namespace) -> int:
    import time

    with _store(args) as store:
        recs = store.history()
        current = store.current().version
    for r in recs:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.applied_at)) if r.applied_at else "-"
        mark = "*" if r.version == current else " "
        print(f"{mark} v{r.version:<4} {when}  {r.note or ''}  {r.policy.get('description', '')[:60]}")
    return 0


@_run
def cmd_rollback(args: argparse.Namespace) -> int:
    with _store(args) as store:
        stored = store.rollback(args.version, expect_version=args.expect_version)
        print(f"rolled back to the content of version {args.version}: now version {stored.version}")
    return 0


def register(commands, bench_commands) -> None:
    policy = commands.add_parser("policy", help="show, validate, apply, list and roll back routing policies")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--source", default=None, help="YAML path or redis:// URL (default: $TANDEM_POLICY_SOURCE or policies/default.yaml)")
    common.add_argument("--prefix", default="tandem:", help="Redis key prefix (default: tandem:)")
    sub = policy.add_subparsers(dest="policy_command", required=True, metavar="ACTION")

    p = sub.add_parser("show", parents=[common], help="print the current policy and the store's health")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_show)

    patch_help = "FILE holds only the fields to change, laid over the current policy (a JSON merge patch)"
    p = sub.add_parser("validate", parents=[common], help="check a policy file; list every invalid or missing field")
    p.add_argument("file")
    p.add_argument("--patch", action="store_true", help=patch_help + "; checked against --source's current policy")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("apply", parents=[common], help="validate FILE (a full policy, or --patch) and write it as the next version")
    p.add_argument("file")
    p.add_argument("--patch", action="store_true", help=patch_help)
    p.add_argument("--expect-version", type=int, default=None, help="refuse unless this is still the current version")
    p.add_argument("--note", default=None)
    p.set_defaults(func=cmd_apply)

    p = sub.add_parser("history", parents=[common], help="list stored versions (* = current)")
    p.set_defaults(func=cmd_history)

    p = sub.add_parser("rollback", parents=[common], help="write an earlier version's content as a new version")
    p.add_argument("version", type=int)
    p.add_argument("--expect-version", type=int, default=None)
    p.set_defaults(func=cmd_rollback)
