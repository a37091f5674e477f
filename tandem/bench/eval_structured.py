"""`tandem eval structured`: the open-vocabulary structured families, decoded as the server decodes them.

Each test item of "schema", "toolcall" and "label" (`lab.model.open_tasks`) becomes the chat
request an agent framework would send: its messages without the schema turn, plus
`response_format: json_schema` (schema, label) or its `tools` with `tool_choice: required`
(toolcall). `router.gateway.structured.output_spec` and `router.gateway.calls.chat_call` turn it into the engine
request exactly as the gateway does (grammar, skeleton, the schema's system turn), and it is
decoded in:
- `ar`: constrained AR (the grammar's token mask at every step);
- `block+skeleton`: block mode with the skeleton seeded, only the value slots denoised;
- `block`: plain block mode, no grammar and no skeleton, on the smallest canvas holding the
  reference answer (what block mode did before);
- `verified`: constrained verified mode (greedy, so its answers equal AR's).
Per family and mode: validity (the answer parses and validates against the schema, or is a call
to a declared tool whose arguments validate), exact match per field and per item, model calls per
request, and median latency at batch 1; then requests per second at batch 8.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

# The heavy imports (engines, the API models) wait for the command to run: `tandem --help` stays instant.

FAMILIES = ("schema", "toolcall", "label")
MODES = ("ar", "block+skeleton", "block", "verified")
MAX_TOKENS = 160


def api_body(item) -> dict:
    """The request a client sends for `item` (a TaskItem; the gateway adds the schema turn itself)."""
    from engines.skeleton import SCHEMA_INSTRUCTION

    messages = [m for m in item.messages if not (m["role"] == "system" and m["content"].startswith(SCHEMA_INSTRUCTION))]
    body = {"model": "tandem", "messages": messages, "max_tokens": MAX_TOKENS}
    if item.family == "toolcall":
        body |= {"tools": [{"type": "function", "function": t} for t in item.tools], "tool_choice": "required"}
    else:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "answer", "schema": item.meta["schema"]}}
    return body


def engine_request(item, mode: str, seed: int, steps: int | None = None, tokenizer=None):
    """The engine's GenerationRequest for `item` in `mode`, built as the gateway builds it."""
    from router.gateway.calls import chat_call
    from router.gateway.openai_api import ChatCompletionRequest
    from router.gateway.structured import output_spec

    req = ChatCompletionRequest.model_validate(api_body(item))
    gen = chat_call(req, {}, output_spec(req)).gen
    if mode == "block":  # plain block on a right-sized canvas (as `tandem eval model` sizes it): the skeleton's baseline
        from lab.model.train import canvas_size_for

        gen.grammar, gen.skeleton, gen.skeleton_optional = None, None, False
        if tokenizer is not None:
            gen.canvas = canvas_size_for(len(tokenizer.encode(item.answer, add_special_tokens=False)))
    gen.mode = "block" if mode.startswith("block") else mode
    gen.seed = seed
    gen.max_denoising_steps = steps if mode != "ar" else None
    return gen


def valid(item, text: str) -> bool:
    import jsonschema

    from router.gateway.tool_calls import read_answer

    try:
        if item.family == "toolcall":  # read as the gateway reads a calling answer
            content, calls = read_answer(text, True)
            tools = {t["name"]: t["parameters"] for t in item.tools}
            if content is not None or not calls or any(c.name not in tools for c in calls):
                return False
            for c in calls:
                jsonschema.validate(json.loads(c.arguments), tools[c.name])
            return True
        jsonschema.validate(json.loads(text), item.meta["schema"])
        return True
    except (json.JSONDecodeError, jsonschema.ValidationError, TypeError):
        return False


def evaluate(engine, n: int, families=FAMILIES, modes=MODES, batch: int = 8, steps: int | None = None) -> list[dict]:
    """One record per (family, mode) on `n` test items of each family, decoded by `engine` (a DiffusionEngine)."""
    from lab.model.open_tasks import field_matches
    from lab.model.tasks import generate_suite

    records = []
    for family in families:
        items = generate_suite(n, "test", 0, (family,))
        for mode in modes:
            outcomes = []
            for i, item in enumerate(items):
                began = time.perf_counter()
                r = engine.generate(engine_request(item, mode, i, steps, engine.tokenizer))
                latency = time.perf_counter() - began
                right, total = field_matches(item, r.text)
                outcomes.append((valid(item, r.text), right, total, r.stats.forwards, latency, r.stats.seeded_fallback))
            group = [engine_request(item, mode, i, steps, engine.tokenizer) for i, item in enumerate(items[:batch])]
            began = time.perf_counter()
            engine.generate_batch(group)
            per_s = len(group) / (time.perf_counter() - began)
            records.append({
                "family": family, "mode": mode, "n": len(items), "steps": steps,
                "validity": sum(o[0] for o in outcomes) / len(items),
                "field_exact": sum(o[1] for o in outcomes) / max(1, sum(o[2] for o in outcomes)),
                "item_exact": sum(o[1] == o[2] for o in outcomes) / len(items),
                "forwards": statistics.mean(o[3] for o in outcomes),
                "latency_ms_b1": 1000 * statistics.median(o[4] for o in outcomes),
                "requests_per_s_b8": per_s,
                "ar_finished": sum(o[5] for o in outcomes) / len(items),
            })
            print(_row(records[-1]), flush=True)
    return records


HEADER = "| family | mode | validity | field exact | item exact | model calls | ms (batch 1) | req/s (batch 8) | finished by AR |\n|---|---|---|---|---|---|---|---|---|"


def _row(r: dict) -> str:
    return (f"| {r['family']} | {r['mode']} | {r['validity']:.2f} | {r['field_exact']:.2f} | {r['item_exact']:.2f} | {r['forwards']:.1f} | "
            f"{r['latency_ms_b1']:.0f} | {r['requests_per_s_b8']:.2f} | {r['ar_finished']:.2f} |")


def ratio_table(records: list[dict], mode: str = "block+skeleton", base: str = "ar") -> str:
    """Per family, `mode` against `base` from the same run: model calls, latency at batch 1, throughput at batch 8."""
    lines = [f"\n{mode} / {base} (same run)", "| family | model calls | latency, batch 1 | requests/s, batch 8 | field exact (points) |", "|---|---|---|---|---|"]
    by = {(r["family"], r["mode"]): r for r in records}
    for family in dict.fromkeys(r["family"] for r in records):
        a, b = by.get((family, mode)), by.get((family, base))
        if a and b:
            lines.append(f"| {family} | {a['forwards'] / b['forwards']:.2f}x | {a['latency_ms_b1'] / b['latency_ms_b1']:.2f}x | "
                         f"{a['requests_per_s_b8'] / b['requests_per_s_b8']:.2f}x | {100 * (a['field_exact'] - b['field_exact']):+.0f} |")
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    import torch

    from engines.defaults import default_checkpoint
    from engines.replica.engine import DiffusionEngine

    torch.set_num_threads(args.threads)
    engine = DiffusionEngine.from_checkpoint(args.checkpoint or default_checkpoint())
    print(HEADER, flush=True)
    records = evaluate(engine, args.n, tuple(args.families.split(",")), tuple(args.modes.split(",")), steps=args.steps)
    print(ratio_table(records))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(records, f, indent=1)
    invalid = [r for r in records if r["mode"] != "block" and r["validity"] < 1.0]
    if invalid:
        print(f"FAIL: answers under a grammar that do not validate: {[(r['family'], r['mode']) for r in invalid]}")
        return 1
    return 0


def register(eval_commands) -> None:
    p = eval_commands.add_parser("structured", help="schema / tool call / label families as the server decodes them, in every mode")
    p.add_argument("--checkpoint", default=None, help="checkpoint directory (default: the shipped one)")
    p.add_argument("--n", type=int, default=20, help="test items per family")
    p.add_argument("--families", default=",".join(FAMILIES))
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--steps", type=int, default=None, help="max denoising steps per canvas in block and verified mode (default: the checkpoint's, 12)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", default=None, help="write the records here")
    p.set_defaults(func=main)
