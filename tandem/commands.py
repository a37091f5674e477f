"""Router subcommands of `tandem`: `router train|evaluate|dataset|label-agreement`, `route`, `bench router`.
`register` only declares arguments; each command imports its modules when it runs."""

from __future__ import annotations

import argparse
import json
import sys


def _errors_as_messages(fn):
    """Expected failures (refused requests, bad policies, missing models) print one line, exit 2."""

    def run(args: argparse.Namespace) -> int:
        from policies.errors import PolicyError
        from router.decision.errors import RouterError
        from router.decision.classifier import ModelError

        try:
            return fn(args)
        except (RouterError, PolicyError) as exc:
            print(f"tandem: {exc.message}", file=sys.stderr)
            return 2
        except (ModelError, FileNotFoundError, ValueError) as exc:
            print(f"tandem: {exc}", file=sys.stderr)
            return 2

    return run


@_errors_as_messages
def cmd_train(args: argparse.Namespace) -> int:
    from lab.routing.train import MIN_AGREEMENT_LABELS, format_report, train

    model, report, path = train(
        data=args.data, out=args.out, test=args.test, from_redis=args.from_redis, redis_stream=args.stream, base=not args.no_base, seed=args.seed,
        agreement_labels=not args.no_agreement_labels,
    )
    print(f"trained on {model.meta['n_train']} examples ({model.meta['n_from_redis']} from Redis); saved {path}")
    seen = model.meta.get("redis_entries")
    if seen and seen["no_text"]:
        print(f"skipped {seen['no_text']} of {seen['entries']} logged decisions: they carry no prompt text "
              "(retraining needs the gateway's decisions_log.store_text: true)")
    if seen and seen["unlabeled"]:
        print(f"skipped {seen['unlabeled']} of {seen['entries']} logged decisions: no task (reviewed or confident), length or shadow-verification label")
    if seen and seen["entries"] > seen["no_text"] + seen["unlabeled"]:
        print(f"labels from the log: {seen['task']} task, {seen['length']} length, {seen['agreement']} block agreement")
    agree = model.meta.get("agreement_labels", {})
    if agree.get("n"):
        state = "fitted" if agree["fitted"] else f"not fitted: needs {MIN_AGREEMENT_LABELS} labels with both outcomes"
        print(f"block agreement model: {agree['agree']} of {agree['n']} labeled block answers were AR's "
              f"(the data's labels and logged shadow verification); {state}")
    if report:
        print(format_report(report))
    return 0


@_errors_as_messages
def cmd_evaluate(args: argparse.Namespace) -> int:
    from policies.stores import load_store
    from lab.routing.dataset import load_jsonl
    from router.decision.classifier import load_model
    from lab.routing.train import evaluate, format_report

    from lab.routing.label_agreement import labels_for, load_labels, with_labels

    model = load_model(args.model)
    policy = load_store(args.policy).current() if args.policy else None
    report = evaluate(model, with_labels(load_jsonl(args.data), load_labels(labels_for(args.data))), policy)
    print(format_report(report))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=2)
        print(f"wrote {args.json}")
    if args.min_accuracy is not None and report.get("accuracy", 0.0) < args.min_accuracy:
        print(f"tandem: accuracy {report.get('accuracy', 0.0):.4f} < {args.min_accuracy}", file=sys.stderr)
        return 1
    return 0


@_errors_as_messages
@_errors_as_messages
def _lazy_label_agreement(args: argparse.Namespace) -> int:
    from lab.routing.label_agreement import main

    return main(args)


def _count(low: int):
    """argparse type: an int >= `low`."""
    def parse(text: str) -> int:
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        return value
    return parse


def cmd_dataset(args: argparse.Namespace) -> int:
    from lab.routing.dataset import build

    train, test = build(args.n, seed=args.seed, out_dir=args.out) if args.out else build(args.n, seed=args.seed)
    print(f"wrote {train} and {test}")
    return 0


@_errors_as_messages
def cmd_route(args: argparse.Namespace) -> int:
    headers = {}
    for h in args.header or []:
        if "=" not in h and ":" not in h:
            raise ValueError(f"--header takes NAME=VALUE, got {h!r}")
        k, v = h.split("=", 1) if "=" in h else h.split(":", 1)
        headers[k.strip()] = v.strip()
    prompt = args.prompt if args.prompt != "-" else sys.stdin.read()
    if args.url:
        print(json.dumps(_route_on_server(args, prompt, headers), indent=2))
        return 0

    from router.decision.decide import Router
    from policies.stores import is_redis_source
    from router.decision.types import RouteRequest

    kw = {"model": args.model, "max_tokens": args.max_tokens, "headers": headers, "api_key": args.api_key}
    if args.json_mode:
        kw["response_format"] = {"type": "json_object"}
    if args.request_id:
        kw["request_id"] = args.request_id
    router = Router(model_path=args.model_path, policy_source=args.policy, **({"watch": False} if is_redis_source(args.policy) else {}))
    try:
        decision = router.decide(RouteRequest.from_prompt(prompt, system=args.system, **kw))
    finally:
        router.close()
    note = "decided here, with no view of the engines' load: the load-aware step was not applied (--url asks a running server)"
    print(json.dumps(decision.model_dump(mode="json") | {"load_aware": False, "note": note}, indent=2))
    return 0


def _route_on_server(args: argparse.Namespace, prompt: str, headers: dict[str, str]) -> dict:
    """The running server's decision for the prompt now (POST /admin/route with the admin token)."""
    import os

    import httpx

    token = args.admin_token or os.environ.get("TANDEM_ADMIN_TOKEN")
    if not token:
        raise ValueError("--url needs the server's admin token: --admin-token or $TANDEM_ADMIN_TOKEN")
    messages = ([{"role": "system", "content": args.system}] if args.system else []) + [{"role": "user", "content": prompt}]
    body = {"model": args.model, "messages": messages}
    if args.max_tokens:
        body["max_tokens"] = args.max_tokens
    if args.json_mode:
        body["response_format"] = {"type": "json_object"}
    headers = headers | {"authorization": f"Bearer {token}"}
    if args.api_key:
        headers["x-tandem-route-api-key"] = args.api_key
    if args.request_id:
        headers["x-request-id"] = args.request_id
    url = args.url.rstrip("/").removesuffix("/v1") + "/admin/route"
    try:
        reply = httpx.post(url, json=body, headers=headers, timeout=30)
    except httpx.HTTPError as exc:
        raise ValueError(f"cannot reach {url}: {type(exc).__name__}: {exc}") from None
    if reply.status_code != 200:
        try:
            message = reply.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = reply.text[:200]
        raise ValueError(f"{url} answered {reply.status_code}: {message}")
    return reply.json()


def cmd_bench(args: argparse.Namespace) -> int:
    from tandem.bench.router import main

    return main(args)


def register(commands, bench_commands) -> None:
    router = commands.add_parser("router", help="train, evaluate and inspect the learned router")
    sub = router.add_subparsers(dest="router_command", required=True, metavar="ACTION")

    p = sub.add_parser("train", help="fit the task classifier and length predictor; save model + metadata")
    p.add_argument("--data", default=None, help="training JSONL (default: lab/routing/data/routing.jsonl)")
    p.add_argument("--out", default=None, help="output directory or .skops path (default: router/decision/models/default.skops)")
    p.add_argument("--test", default=None, help="held-out JSONL to report on (default: lab/routing/data/routing_test.jsonl)")
    p.add_argument("--from-redis", default=None, metavar="URL",
                   help="also train on decisions logged in this Redis (those logged with prompt text: decisions_log.store_text)")
    p.add_argument("--stream", default=None, help="decisions stream (default: tandem:decisions)")
    p.add_argument("--no-base", action="store_true", help="with --from-redis: train on the logged decisions only")
    p.add_argument("--no-agreement-labels", action="store_true",
                   help="leave out the data's block-agreement labels (router label-agreement): an agreement head only from logged traffic")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("evaluate", help="accuracy, per-class report, confusion matrix and mode agreement on a JSONL file")
    p.add_argument("--data", required=True, help="JSONL; each line has messages and optional task / mode / output_tokens labels")
    p.add_argument("--model", default=None, help="model .skops (default: the shipped one)")
    p.add_argument("--policy", default=None, help="policy source deciding the modes (default: the one the data set's mode labels follow, the schema's product defaults)")
    p.add_argument("--json", default=None, metavar="PATH", help="also write the report as JSON")
    p.add_argument("--min-accuracy", type=float, default=None, help="exit 1 below this task accuracy")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("label-agreement", help="label the data set's block requests with whether the checkpoint's block answer is AR's (resumable)")
    p.add_argument("--data", default=None, help="JSONL to label (default: the shipped train split)")
    p.add_argument("--out", default=None, help="labels JSONL (default: lab/routing/data/block_agreement.jsonl for the train split)")
    p.add_argument("--checkpoint", default=None, help="checkpoint directory (default: $TANDEM_CHECKPOINT, else the shipped model)")
    p.add_argument("--max-tokens", type=_count(1), default=64, help="answer tokens compared per request")
    p.add_argument("--limit", type=_count(0), default=0, help="label at most this many more requests (0: all)")
    p.add_argument("--threads", type=_count(1), default=1, help="torch threads")
    p.set_defaults(func=_lazy_label_agreement)

    p = sub.add_parser("dataset", help="regenerate the labeled routing data set (seeded, deterministic)")
    p.add_argument("--n", type=int, default=4000)
    p.add_argument("--seed", type=int, default=20260)
    p.add_argument("--out", default=None, help="directory (default: router/data)")
    p.set_defaults(func=cmd_dataset)

    p = commands.add_parser("route", help="print the routing decision for a prompt as JSON (--url: the running server's, load included)")
    p.add_argument("prompt", help="the user message ('-' reads stdin)")
    p.add_argument("--url", default=None, help="ask the server at this URL (its admin API) for the decision it would make now")
    p.add_argument("--admin-token", default=None, help="with --url: the server's admin token (default: $TANDEM_ADMIN_TOKEN)")
    p.add_argument("--system", default=None, help="a system prompt")
    p.add_argument("--model", default="tandem", help="model alias (tandem, tandem-block, tandem-verified, tandem-ar)")
    p.add_argument("--max-tokens", type=int, default=None)
    p.add_argument("--json-mode", action="store_true", help="response_format json_object")
    p.add_argument("--header", action="append", metavar="NAME=VALUE", help="a request header, e.g. x-tandem-mode=ar")
    p.add_argument("--api-key", default=None)
    p.add_argument("--request-id", default=None)
    p.add_argument("--policy", default=None, help="policy source: YAML path or redis:// URL (default: $TANDEM_POLICY_SOURCE or policies/default.yaml)")
    p.add_argument("--model-path", default=None, help="router model .skops (default: the shipped one)")
    p.set_defaults(func=cmd_route)

    p = bench_commands.add_parser("router", help="decide() latency per request: p50/p99, with its parts")
    p.add_argument("--n", type=int, default=800, help="held-out requests to route")
    p.add_argument("--repeat", type=int, default=3, help="passes over them for the main row")
    p.add_argument("--model", default=None, help="router model .skops (default: the shipped one)")
    p.add_argument("--json", default=None, metavar="PATH", help="write the results here")
    p.set_defaults(func=cmd_bench)
