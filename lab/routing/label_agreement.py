"""`tandem router label-agreement`: label the routing data with whether block mode answers as well as AR.

The router's agreement head (router/decision/classifier.py) learns where block's answer is as good as
AR's. From traffic its labels are logged shadow verifications (lab/routing/decisions.py);
before any traffic, this labels the shipped data set by running the checkpoint itself. Each
request of the model's own task suite, and each request that the data set's labeling policy or
the shipped serving policy routes to block, is answered in AR and in block mode (greedy, seeded,
the policy's canvas and steps): `block_agrees` is, for a suite request, whether block's answer
scores at least as AR's does against the suite's reference (what `tandem bench serve`'s oracle
asks), and for any other request, whether block writes AR's tokens (up to `--max-tokens`; there is
no reference to score against). Measured on the shipped model: its own suite's requests mostly
agree, natural requests (what real traffic looks like) almost never do, which keeps the router
from sending unfamiliar prompts to block.

A request whose answer has a fixed skeleton (a `json_schema`, a tool call: the policy's `skeleton`
rule decides between block and AR for it by this head) is built as the gateway builds it and
answered in constrained AR and in skeleton-seeded block: `block_agrees` is whether both answers
mean the same (equal JSON values; the same calls with equal arguments).

Labels go to `lab/routing/data/block_agreement.jsonl` (`_test.jsonl` for the held-out split;
one `{"id", "block_agrees"}` per line, with the checkpoint they came from in the first line);
`tandem router train` joins them to the data set by id and reports the head on the held-out
labels. The file is appended to and a rerun skips ids it holds, so a long run resumes.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from lab.routing.dataset import TEST_PATH, TRAIN_PATH, load_jsonl

LABELS_PATH = TRAIN_PATH.parent / "block_agreement.jsonl"
TEST_LABELS_PATH = TRAIN_PATH.parent / "block_agreement_test.jsonl"
MAX_TOKENS = 64
DATASET_SEED = 20260  # the seed `lab.routing.dataset.build` writes the shipped files with


def wanted(record: dict, policies) -> bool:
    """Whether the agreement head decides for the record: one whose answer has a fixed skeleton
    (the `skeleton` rule asks the head), a request without a grammar that one of `policies` (the
    data set's labeling policy, the shipped serving policy) routes to block, or one of the model's
    own suite (cost-aware routing may move any of its tasks to block)."""
    if not record.get("task") or not record.get("output_tokens"):
        return False
    if record.get("tools") or record.get("response_format"):
        return structured_call(record) is not None
    return record.get("style") == "task_suite" or any(p.route_for(record["task"], record["output_tokens"])[0] == "block" for p in policies)


def structured_call(record: dict, max_tokens: int = 256):
    """The engine request the gateway builds for a record with tools or a response format, when its
    answer has a fixed skeleton (block can seed it); None otherwise, or when the gateway refuses it."""
    from engines.errors import TandemError
    from router.gateway.calls import chat_call
    from router.gateway.openai_api import ChatCompletionRequest
    from router.gateway.structured import output_spec

    body = {"model": "tandem", "messages": record["messages"], "max_tokens": min(record.get("max_tokens") or max_tokens, max_tokens)}
    body |= {k: record[k] for k in ("response_format", "tools", "tool_choice", "stop") if record.get(k) is not None}
    try:
        req = ChatCompletionRequest.model_validate(body)
        gen = chat_call(req, {}, output_spec(req)).gen
    except (TandemError, ValueError):
        return None
    return gen if gen.skeleton is not None else None


def same_answer(ar_text: str, block_text: str, tools: bool) -> bool:
    """Whether two answers under the same schema or tools mean the same: equal JSON values, or
    the same calls (names and JSON arguments, in order) and the same content."""
    from router.gateway.tool_calls import read_answer

    def meaning(text: str):
        content, calls = read_answer(text, tools)
        try:
            return (json.loads(content) if content is not None and not tools else content,
                    [(c.name, json.loads(c.arguments)) for c in calls])
        except json.JSONDecodeError:
            return None

    ar = meaning(ar_text)
    return ar is not None and ar == meaning(block_text)


def block_policies() -> list:
    """The policies whose block decisions the labels are for: the data set's labeling policy and
    the shipped serving policy (policies/default.yaml), which differ in their task modes."""
    from policies.stores import load_store
    from lab.routing.dataset import labeling_policy

    store = load_store(None)
    try:
        return [labeling_policy(), store.current()]
    finally:
        store.close()


def labels_for(data: str | Path) -> Path:
    """Where a data file's agreement labels live: block_agreement.jsonl for the shipped train split,
    block_agreement_test.jsonl for the held-out one, else DATA.agreement.jsonl beside it."""
    data = Path(data)
    if data.resolve() == TRAIN_PATH.resolve():
        return LABELS_PATH
    if data.resolve() == TEST_PATH.resolve():
        return TEST_LABELS_PATH
    return data.with_suffix(".agreement.jsonl")


def load_labels(path: Path = LABELS_PATH) -> dict[str, bool]:
    """id -> block_agrees, from a labels file (empty when there is none)."""
    if not path.exists():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        row = json.loads(line) if line.strip() else {}
        if "id" in row:
            out[row["id"]] = bool(row["block_agrees"])
    return out


def with_labels(records: list[dict], labels: dict[str, bool]) -> list[dict]:
    """The records, each with its `block_agrees` label where `labels` has one (logged labels win)."""
    return [{**r, "block_agrees": labels[r["id"]]} if r.get("id") in labels and r.get("block_agrees") is None else r for r in records]


def suite_references() -> dict[str, object]:
    """The task-suite items behind the data set's `task_suite` requests (both splits), by their
    messages: their reference answers score block's and AR's."""
    from lab.model.tasks import TASK_FAMILIES, generate_suite

    items = generate_suite(60, split="train", seed=DATASET_SEED, families=TASK_FAMILIES)
    items += generate_suite(20, split="test", seed=DATASET_SEED, families=TASK_FAMILIES)
    return {json.dumps(it.messages, sort_keys=True): it for it in items}


def label(engine, record: dict, policy, max_tokens: int = MAX_TOKENS, reference=None) -> bool:
    """Whether block mode, on the canvas and steps the policy gives the record, answers as well as
    AR: on a request of the model's own suite (`reference`, its TaskItem), whether block's whole
    answer scores at least as AR's does against the reference (exact match and the family's
    partial credit, as `tandem bench serve`'s oracle judges); on any other request, whether block
    writes AR's tokens, up to `max_tokens`; on a request with a fixed skeleton, whether constrained AR
    and skeleton-seeded block mean the same (`same_answer`)."""
    from dataclasses import replace

    from lab.model.tasks import score
    from engines.types import GenerationRequest

    structured = structured_call(record) if record.get("tools") or record.get("response_format") else None
    if structured is not None:
        ar = engine.generate(replace(structured, mode="ar", temperature=0.0))
        block = engine.generate(replace(structured, mode="block", seed=0, canvas=policy.canvas_for(record["output_tokens"]),
                                        max_denoising_steps=policy.steps_for(record["task"])))
        return same_answer(ar.text, block.text, bool(structured.tools))
    budget = min(record.get("max_tokens") or 10**6, record["output_tokens"] + 16) if reference is not None else \
        min(record.get("max_tokens") or max_tokens, max_tokens)
    common = {"messages": record["messages"], "max_new_tokens": budget, "stop": record.get("stop") or []}
    ar = engine.generate(GenerationRequest(mode="ar", **common))
    block = engine.generate(GenerationRequest(mode="block", seed=0, canvas=policy.canvas_for(record["output_tokens"]),
                                              max_denoising_steps=policy.steps_for(record["task"]), **common))
    if reference is None:
        return ar.token_ids == block.token_ids
    a, b = score(reference, ar.text), score(reference, block.text)
    return b.exact >= a.exact and b.family_score >= a.family_score - 1e-9


def order(records: list[dict]) -> list[dict]:
    """Suite-format requests first, then the rest interleaved by task: a partial run is balanced."""
    suite = [r for r in records if r.get("style") != "natural"]
    rest = sorted((r for r in records if r.get("style") == "natural"), key=lambda r: r["id"])
    by_task: dict[str, list[dict]] = {}
    for r in rest:
        by_task.setdefault(r.get("task"), []).append(r)
    mixed = [r for group in zip(*by_task.values()) for r in group]
    seen = {r["id"] for r in mixed}
    return suite + mixed + [r for r in rest if r["id"] not in seen]


def main(args) -> int:
    import torch

    from engines import DiffusionEngine
    from engines.defaults import default_checkpoint

    torch.set_num_threads(args.threads)
    data = Path(args.data) if args.data else TRAIN_PATH
    out = Path(args.out) if args.out else labels_for(data)
    checkpoint = args.checkpoint or default_checkpoint()
    if not data.is_file():
        raise FileNotFoundError(f"no such data file: {data}")
    if args.checkpoint and not (Path(args.checkpoint) / "config.json").is_file():
        raise FileNotFoundError(f"not a checkpoint directory (no config.json): {args.checkpoint}")
    done, policies = load_labels(out), block_policies()
    todo = [r for r in order([r for r in load_jsonl(data) if wanted(r, policies)]) if r["id"] not in done][: args.limit or None]
    print(f"{len(done)} labeled in {out}; {len(todo)} to label with {checkpoint}, max_tokens {args.max_tokens}")
    engine, policy = DiffusionEngine.from_checkpoint(checkpoint), policies[0]
    t0 = time.time()
    with out.open("a") as f:
        if not done:
            f.write(json.dumps({"checkpoint": engine.path.name, "max_tokens": args.max_tokens}) + "\n")  # a name resolved
        references = suite_references()
        for i, record in enumerate(todo, 1):
            reference = references.get(json.dumps(record["messages"], sort_keys=True)) if record.get("style") == "task_suite" else None
            agrees = label(engine, record, policy, args.max_tokens, reference)
            f.write(json.dumps({"id": record["id"], "block_agrees": agrees}) + "\n")
            f.flush()
            if i % 100 == 0:
                print(f"  {i}/{len(todo)} in {time.time() - t0:.0f} s", flush=True)
    labels = load_labels(out)
    print(f"{len(labels)} labels, {sum(labels.values())} agree; wrote {out}")
    return 0


__all__ = ["LABELS_PATH", "TEST_LABELS_PATH", "labels_for", "load_labels", "with_labels", "main"]
