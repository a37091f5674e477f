"""`tandem bench structured`: tool calls and JSON-Schema answers through HTTP, per decoding mode,
and what the grammar mask costs per token.

Request sets, all from the task suite's held-out split (`lab.model.tasks`, split "test"):

- `tools/auto`      family "tool" items that offer tools, in OpenAI wire format (tools as
                    `{"type": "function", "function": ...}`, history calls with ids and JSON-string
                    arguments, tool turns answering them by `tool_call_id`), tool_choice "auto";
- `tools/required`  the same items whose reference answer calls tools, tool_choice "required";
- `schema/extract`  family "extract" items with a json_schema response_format of the reference
                    answer's keys (string or number each, all required, no other keys);
- `schema/json-keys` the "tool" family's answer-as-JSON items, with the same kind of schema;
- `realistic/schema`, `realistic/tools`  hand-written requests no generator made
                    (`tandem/bench/data/realistic_structured.jsonl`: e-mails, invoices, tickets and
                    tool requests with made-up names, codes, addresses and dates; kept apart from
                    training), with their own json_schema or tools (tool_choice "auto").

Each set goes to every mode by model alias (`tandem-ar`, `tandem-verified`, `tandem-block`,
`tandem`); the policy moves a constrained request that lands on block to its `constrained_mode`, so
the table reports the mode the app used (the `x-tandem-mode` header). Per (set, mode): validity
(content parses and validates against the schema; every call names an offered tool and its
arguments parse and validate against its parameters, both checked with `jsonschema` here, not
trusted from the app), exact-field rate against the reference (tools: the same calls, names and
arguments, or the same text when the reference answers in text; JSON: share of equal fields),
field accuracy (JSON: the same share; tools: the share of the reference call's arguments that the
call of the same name sets equal, 0 without one),
tool-call decision accuracy (auto: calls tools iff the reference does), latency p50/p99, model
calls per request (`tandem.forwards`), output tokens and finish reasons. `--repeat N` sends every
set N times, the modes in another order each round (a shared machine's load drifts), pooled in
the table with each round's p50 in the JSON.

Mask cost: `TokenConstraint.mask_` + `consume` (llguidance, the engine's own code) over a valid
answer's tokens, and the same with xgrammar's `GrammarMatcher` when it is importable (it is not a
project dependency: its row is skipped otherwise), against the AR step time at batch 1 of the same
checkpoint on this machine, timed on the engine directly (and, for scale, HTTP latency per output
token of the AR requests above). Without `--url` the app starts in-process (the shipped
checkpoint, default policy, a fresh local Ray cluster) and stops before the microbenchmarks run.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import platform
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

MODES = {"ar": "tandem-ar", "verified": "tandem-verified", "block": "tandem-block", "router": "tandem"}  # column -> model alias
SUITE_SETS = ("tools/auto", "tools/required", "schema/extract", "schema/json-keys")
SETS = SUITE_SETS + ("realistic/schema", "realistic/tools")  # the realistic ones on request (`--sets`): the default run stays under 10 minutes
REALISTIC = Path(__file__).parent / "data" / "realistic_structured.jsonl"  # hand-written, never trained on
MASK_REPS = 300  # repetitions of each (grammar, library) mask loop; the median is reported
STEP_TOKENS = 64  # AR steps timed on the engine for the forward cost


@dataclass
class Case:
    """One request to send and what its answer is judged against."""

    set: str  # one of SETS
    item: object  # the lab.model.tasks.TaskItem it came from (realistic sets: the file's id)
    body: dict  # the chat request without `model`
    want_calls: list[dict] | None = None  # tool sets: the reference calls [{"name", "arguments"}]; None: a text answer
    want_fields: dict | None = None  # schema sets: the reference object
    schema: dict | None = None  # schema sets: the response_format schema
    tool_params: dict = field(default_factory=dict)  # tool sets: name -> parameters schema


# ---- request sets ---------------------------------------------------------------------------------------


def openai_tools(item) -> list[dict]:
    return [{"type": "function", "function": t} for t in item.tools]


def openai_messages(item) -> list[dict]:
    """Task-suite turns -> OpenAI chat messages: assistant calls get ids and JSON-string arguments,
    each tool turn answers the earliest unanswered call of its name by `tool_call_id`."""
    out, unanswered = [], {}
    for i, m in enumerate(item.messages):
        if m["role"] == "assistant" and m.get("tool_calls"):
            calls = []
            for j, c in enumerate(m["tool_calls"]):
                cid = f"call_{i}_{j}"
                unanswered.setdefault(c["name"], []).append(cid)
                calls.append({"id": cid, "type": "function", "function": {"name": c["name"], "arguments": json.dumps(c["arguments"], ensure_ascii=False)}})
            out.append({"role": "assistant", "content": m.get("content") or None, "tool_calls": calls})
        elif m["role"] == "tool":
            ids = unanswered.get(m["name"])
            assert ids, f"tool turn {i} ({m['name']}) answers no earlier call"
            out.append({"role": "tool", "tool_call_id": ids.pop(0), "content": m["content"]})
        else:
            out.append({"role": m["role"], "content": m["content"]})
    return out


def schema_of(fields: dict) -> dict:
    """A JSON Schema for exactly `fields`' keys, in order: numbers as number, the rest as string."""
    props = {k: {"type": "number"} if isinstance(v, (int, float)) and not isinstance(v, bool) else {"type": "string"} for k, v in fields.items()}
    return {"type": "object", "properties": props, "required": list(fields), "additionalProperties": False}


def build_cases(n: int, seed: int) -> dict[str, list[Case]]:
    """`n` items per set (tools/required: those of tools/auto whose reference calls tools)."""
    from lab.model.tasks import iter_items

    tool_items, json_items = [], []
    for item in iter_items("tool", "test", seed):
        if item.tools and len(tool_items) < n:
            tool_items.append(item)
        elif item.meta["kind"] == "json" and len(json_items) < n:
            json_items.append(item)
        if len(tool_items) == n and len(json_items) == n:
            break
    extract = iter_items("extract", "test", seed)
    extract_items = [next(extract) for _ in range(n)]

    def tool_case(item, choice: str) -> Case:
        body = {"messages": openai_messages(item), "tools": openai_tools(item), "tool_choice": choice}
        return Case(f"tools/{choice}", item, body, want_calls=item.meta.get("calls"), tool_params={t["name"]: t["parameters"] for t in item.tools})

    def schema_case(set_: str, item) -> Case:
        fields = item.meta["fields"]
        schema = schema_of(fields)
        body = {"messages": [{"role": m["role"], "content": m["content"]} for m in item.messages],
                "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": True}}}
        return Case(set_, item, body, want_fields=fields, schema=schema)

    return {
        "tools/auto": [tool_case(i, "auto") for i in tool_items],
        "tools/required": [tool_case(i, "required") for i in tool_items if "calls" in i.meta],
        "schema/extract": [schema_case("schema/extract", i) for i in extract_items],
        "schema/json-keys": [schema_case("schema/json-keys", i) for i in json_items],
    } | realistic_cases(n)


def realistic_cases(n: int, path: Path = REALISTIC) -> dict[str, list[Case]]:
    """The first `n` hand-written requests of each kind, as an agent framework sends them."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    schema = [Case("realistic/schema", r["id"], {"messages": r["messages"], "response_format": {
        "type": "json_schema", "json_schema": {"name": "answer", "schema": r["schema"], "strict": True}}},
        want_fields=r["want"], schema=r["schema"]) for r in rows if r["kind"] == "schema"]
    tools = [Case("realistic/tools", r["id"], {"messages": r["messages"], "tools": [{"type": "function", "function": t} for t in r["tools"]],
                                               "tool_choice": "auto"},
                  want_calls=[r["want_call"]], tool_params={t["name"]: t["parameters"] for t in r["tools"]})
             for r in rows if r["kind"] == "toolcall"]
    return {"realistic/schema": schema[:n], "realistic/tools": tools[:n]}


# ---- judging one answer ---------------------------------------------------------------------------------


def _valid(schema: dict, value) -> bool:
    import jsonschema

    return jsonschema.Draft202012Validator(schema).is_valid(value)


def _argument_share(want_calls: list[dict], parsed: list[dict]) -> float:
    """Mean over the reference calls: the share of its arguments the first call of its name sets equal."""
    shares = []
    for want in want_calls:
        got = next((p["arguments"] for p in parsed if p["name"] == want["name"]), None)
        args = want["arguments"]
        shares.append(0.0 if not isinstance(got, dict) else
                      sum(k in got and got[k] == v for k, v in args.items()) / len(args) if args else 1.0)
    return sum(shares) / len(shares)


def judge(case: Case, body: dict) -> dict:
    """valid, exact (tools: 0/1; JSON: share of equal fields), fields (tools: share of the reference
    calls' arguments), decided (auto: called iff the reference does)."""
    from lab.model.tasks import normalize

    message = body["choices"][0]["message"]
    content, calls = message.get("content"), message.get("tool_calls") or []
    if case.schema is not None:
        try:
            got = json.loads(content or "")
        except json.JSONDecodeError:
            return {"valid": False, "exact": 0.0, "fields": 0.0, "decided": None}
        share = sum(isinstance(got, dict) and k in got and got[k] == v for k, v in case.want_fields.items()) / len(case.want_fields)
        return {"valid": _valid(case.schema, got), "exact": share, "fields": share, "decided": None}
    parsed, valid = [], True
    for c in calls:
        name, raw = c["function"]["name"], c["function"]["arguments"]
        try:
            args = json.loads(raw)
        except json.JSONDecodeError:
            args, valid = None, False
        valid = valid and name in case.tool_params and args is not None and _valid(case.tool_params[name], args)
        parsed.append({"name": name, "arguments": args})
    if case.set == "tools/required" and not calls:
        valid = False
    if not calls and (content or "").startswith("<tool_call>"):  # a call the reader could not complete
        valid = False
    if case.want_calls is not None:
        exact, fields = float(parsed == case.want_calls), _argument_share(case.want_calls, parsed)
    else:
        exact = fields = float(not calls and normalize(content or "") == normalize(case.item.answer))
    decided = (bool(calls) == (case.want_calls is not None)) if case.body.get("tool_choice") == "auto" else None
    return {"valid": valid, "exact": exact, "fields": fields, "decided": decided}


# ---- HTTP ------------------------------------------------------------------------------------------------


async def _run(url: str, model: str, cases: list[Case], concurrency: int, max_tokens: int) -> list[dict]:
    """Send every case to `model`; one record per request."""
    import httpx

    sem = asyncio.Semaphore(concurrency)
    records: list[dict | None] = [None] * len(cases)
    async with httpx.AsyncClient(base_url=url, timeout=600) as client:

        async def one(i: int, case: Case) -> None:
            async with sem:
                t0 = time.perf_counter()
                r = await client.post("/v1/chat/completions", json={"model": model, "max_tokens": max_tokens} | case.body)
                ms = (time.perf_counter() - t0) * 1000
            rec = {"set": case.set, "model": model, "i": i, "status": r.status_code, "ms": ms, "mode": r.headers.get("x-tandem-mode")}
            if r.status_code != 200:
                records[i] = rec | {"error": r.text[:500]}
                return
            body = r.json()
            choice = body["choices"][0]
            records[i] = rec | judge(case, body) | {
                "finish_reason": choice["finish_reason"], "closed_early": bool(body["tandem"].get("closed_early")),
                "forwards": body["tandem"]["forwards"], "tokens": body["usage"]["completion_tokens"],
                "slot_tokens_block": body["tandem"].get("slot_tokens_block"), "slot_tokens_ar": body["tandem"].get("slot_tokens_ar"),
                "content": choice["message"].get("content"), "tool_calls": choice["message"].get("tool_calls"),
            }

        await asyncio.gather(*(one(i, c) for i, c in enumerate(cases)))
    return records


def _pct(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))] if sorted_values else float("nan")


def summarize(set_: str, mode: str, records: list[dict]) -> dict:
    ok = [r for r in records if r["status"] == 200]
    seeded = [r for r in ok if r.get("slot_tokens_block") is not None]  # skeleton-seeded answers (block mode)
    ms = sorted(r["ms"] for r in ok)
    decided = [r["decided"] for r in ok if r["decided"] is not None]
    n = len(records)
    return {
        "set": set_, "mode": mode, "model": MODES[mode], "requests": n, "errors": n - len(ok),
        "valid": sum(r["valid"] for r in ok) / n if n else float("nan"),
        "exact": sum(r["exact"] for r in ok) / n if n else float("nan"),
        "fields": sum(r["fields"] for r in ok) / n if n else float("nan"),
        "decision": sum(decided) / len(decided) if decided else None,
        "p50_ms": statistics.median(ms) if ms else float("nan"), "p99_ms": _pct(ms, 0.99),
        "forwards": statistics.mean(r["forwards"] for r in ok) if ok else float("nan"),
        "tokens": statistics.mean(r["tokens"] for r in ok) if ok else float("nan"),
        "finish": dict(Counter(r["finish_reason"] for r in ok)),
        "closed_early": sum(r["closed_early"] for r in ok),  # answers steered to close as max_tokens ran low
        "modes_used": dict(Counter(r["mode"] for r in records if r["mode"])),
        "slot_tokens_block": statistics.mean(r["slot_tokens_block"] for r in seeded) if seeded else None,
        "slot_tokens_ar": statistics.mean(r["slot_tokens_ar"] for r in seeded) if seeded else None,
    }


# ---- mask cost -------------------------------------------------------------------------------------------


def _spec_grammar(body: dict) -> str:
    from router.gateway.openai_api import ChatCompletionRequest
    from router.gateway.structured import output_spec

    return output_spec(ChatCompletionRequest(model="tandem", **body)).grammar


def _llguidance_us(engine, grammar: str, tokens: list[int], reps: int) -> dict:
    """Median us per token of the engine's `mask_` + `consume` (fill the bitmask, apply it to the
    logits, advance), of the matcher alone (fill + advance, no logits), and ms to build the constraint."""
    import llguidance.torch
    import torch

    gt = engine.grammar_tokenizer
    logits = torch.zeros(engine.vocab_size)  # (V,)
    check = gt.constraint(grammar, 256)
    for t in tokens:  # the answer must be one the grammar takes, token by token (also warms the apply kernel)
        assert torch.isfinite(check.mask_(logits.clone(), 256)[t]) and check.consume(t), f"the grammar refuses token {t} of the answer"
    per_token, matcher_only, build = [], [], []
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        c = gt.constraint(grammar, 256)
        t1 = time.perf_counter_ns()
        for k, t in enumerate(tokens):
            c.mask_(logits.clone(), 256 - k)
            c.consume(t)
        per_token.append((time.perf_counter_ns() - t1) / len(tokens) / 1000)
        build.append((t1 - t0) / 1e6)
        m = gt.constraint(grammar, 256)
        t2 = time.perf_counter_ns()
        for t in tokens:
            llguidance.torch.fill_next_token_bitmask(m.matcher, m.bitmask, 0)
            m.matcher.consume_token(t)
        matcher_only.append((time.perf_counter_ns() - t2) / len(tokens) / 1000)
    return {"us_per_token": statistics.median(per_token), "matcher_us_per_token": statistics.median(matcher_only),
            "setup_ms": statistics.median(build)}


def _xgrammar_us(engine, grammar, tokens: list[int], reps: int) -> dict:
    """The same loops with xgrammar: fill_next_token_bitmask + apply_token_bitmask_inplace +
    accept_token, and fill + accept alone. `grammar` is a callable (compiler) -> CompiledGrammar;
    setup_ms is its compile time (one run, cache off)."""
    import torch
    import xgrammar as xgr

    info = xgr.TokenizerInfo.from_huggingface(engine.tokenizer, vocab_size=engine.vocab_size, stop_token_ids=sorted(engine.eos_ids))
    compiler = xgr.GrammarCompiler(info, cache_enabled=False)
    t0 = time.perf_counter_ns()
    compiled = grammar(compiler)
    compile_ms = (time.perf_counter_ns() - t0) / 1e6
    logits = torch.zeros(engine.vocab_size)  # (V,)
    bitmask = xgr.allocate_token_bitmask(1, info.vocab_size)  # (1, ceil(V / 32)) int32
    check = xgr.GrammarMatcher(compiled)
    for t in tokens:
        check.fill_next_token_bitmask(bitmask)
        masked = logits.clone()[None]
        xgr.apply_token_bitmask_inplace(masked, bitmask)
        assert torch.isfinite(masked[0, t]) and check.accept_token(t), f"xgrammar refuses token {t} of the answer"
    per_token, matcher_only = [], []
    for _ in range(reps):
        m = xgr.GrammarMatcher(compiled)
        t1 = time.perf_counter_ns()
        for t in tokens:
            m.fill_next_token_bitmask(bitmask)
            masked = logits.clone()[None]  # (1, V)
            xgr.apply_token_bitmask_inplace(masked, bitmask)
            m.accept_token(t)
        per_token.append((time.perf_counter_ns() - t1) / len(tokens) / 1000)
        m = xgr.GrammarMatcher(compiled)
        t2 = time.perf_counter_ns()
        for t in tokens:
            m.fill_next_token_bitmask(bitmask)
            m.accept_token(t)
        matcher_only.append((time.perf_counter_ns() - t2) / len(tokens) / 1000)
    return {"us_per_token": statistics.median(per_token), "matcher_us_per_token": statistics.median(matcher_only), "setup_ms": compile_ms}


def _xgrammar_call(tool: dict):
    """xgrammar's version of a named tool_choice grammar: the call's literal head, the arguments
    under the tool's parameters (the gateway's JSON style), the literal tail. Returns a callable
    (compiler) -> CompiledGrammar; xgrammar is imported only when it is called."""
    from router.gateway.structured import CALL_CLOSE, CALL_OPEN

    head = json.dumps(f'{CALL_OPEN}{{"name": "{tool["name"]}", "arguments": ')
    tail = json.dumps(f"}}{CALL_CLOSE}")

    def compile_(compiler):
        xgr = importlib.import_module("xgrammar")
        args = xgr.Grammar.from_json_schema(json.dumps(tool["parameters"]), any_whitespace=False, separators=(", ", ": "))
        return compiler.compile_grammar(xgr.Grammar.concat(xgr.Grammar.from_ebnf(f"root ::= {head}"), args, xgr.Grammar.from_ebnf(f"root ::= {tail}")))

    return compile_


def forward_us(engine, messages: list[dict], tools: list[dict] | None) -> float:
    """AR step time at batch 1 (us per output token, no grammar): STEP_TOKENS + 1 tokens minus 1,
    end tokens ignored, so the prefill cancels out; best of 3."""
    from engines.types import GenerationRequest

    def run(n: int) -> float:
        req = GenerationRequest(messages=messages, tools=tools, mode="ar", max_new_tokens=n, stop_token_ids=[])
        return engine.generate(req).stats.latency_s

    run(4)  # warm-up
    best = min(run(STEP_TOKENS + 1) - run(1) for _ in range(3))
    return best / STEP_TOKENS * 1e6


def mask_cost(checkpoint: str | None, cases: dict[str, list[Case]], reps: int, seed: int = 0) -> dict:
    """us/token of the grammar mask (llguidance, xgrammar) against the AR step on this machine."""
    import torch

    from engines.defaults import default_checkpoint
    from engines.replica.engine import DiffusionEngine
    from lab.model.tasks import tool_call_text

    torch.set_num_threads(1)  # as each engine replica runs (router.app: threads 1)
    engine = DiffusionEngine.from_checkpoint(checkpoint or default_checkpoint())
    encode = lambda text: engine.tokenizer.encode(text, add_special_tokens=False)  # noqa: E731
    if not any(len(c.want_calls) == 1 for c in cases["tools/required"]):  # a small --n: draw a few more items
        cases = build_cases(12, seed)
    schema_case = cases["schema/extract"][0]
    tool_case = next(c for c in cases["tools/required"] if len(c.want_calls) == 1)
    call = tool_case.want_calls[0]
    tool = next(t for t in tool_case.item.tools if t["name"] == call["name"])
    named = tool_case.body | {"tool_choice": {"type": "function", "function": {"name": call["name"]}}}
    grammars = [
        ("json_schema (extract)", _spec_grammar(schema_case.body), schema_case.item.answer,
         lambda compiler: compiler.compile_json_schema(json.dumps(schema_case.schema), any_whitespace=False, separators=(", ", ": "))),
        (f"tool call, named ({call['name']})", _spec_grammar(named), tool_call_text([call]), _xgrammar_call(tool)),
        (f"tool call, auto ({len(tool_case.item.tools)} tools, app grammar)", _spec_grammar(tool_case.body | {"tool_choice": "auto"}),
         tool_call_text([call]), None),
    ]
    try:  # optional: xgrammar is not a project dependency
        importlib.import_module("xgrammar")
        have_xgrammar = True
    except ImportError:
        have_xgrammar = False
    rows = []
    for name, grammar, answer, xgr_grammar in grammars:
        tokens = encode(answer)
        rows.append({"grammar": name, "library": "llguidance", "tokens": len(tokens)} | _llguidance_us(engine, grammar, tokens, reps))
        if have_xgrammar and xgr_grammar is not None:
            rows.append({"grammar": name, "library": "xgrammar", "tokens": len(tokens)} | _xgrammar_us(engine, xgr_grammar, tokens, reps))
    step = statistics.median(forward_us(engine, c.item.messages, c.item.tools) for c in (schema_case, tool_case))
    for r in rows:
        r["vs_forward"] = r["us_per_token"] / step
    return {"rows": rows, "ar_step_us": step, "xgrammar": have_xgrammar, "reps": reps}


# ---- the command -----------------------------------------------------------------------------------------


def _fmt(x, spec: str = ".3f") -> str:
    return "—" if x is None else format(x, spec)


def print_tables(records: list[dict], cost: dict | None, http_ar_us: float | None) -> None:
    print("\n| set | model | mode used | requests | errors | valid | exact fields | field accuracy | tool decision | p50 ms | p99 ms | forwards/req "
          "| tokens/req | slot tokens block/AR | finish |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in records:
        used = ", ".join(f"{m} {k}" for m, k in r["modes_used"].items())
        slots = "—" if r.get("slot_tokens_block") is None else f"{r['slot_tokens_block']:.1f} / {r['slot_tokens_ar']:.1f}"
        finish = ", ".join(f"{f} {k}" for f, k in sorted(r["finish"].items())) + (f" (closed early {r['closed_early']})" if r["closed_early"] else "")
        print(f"| {r['set']} | {r['model']} | {used} | {r['requests']} | {r['errors']} | {r['valid']:.3f} | {r['exact']:.3f} | {r['fields']:.3f} | "
              f"{_fmt(r['decision'])} | {r['p50_ms']:.0f} | {r['p99_ms']:.0f} | {r['forwards']:.1f} | {r['tokens']:.1f} | {slots} | {finish} |")
    if cost is None:
        return
    print(f"\nGrammar mask per token on this CPU (median of {cost['reps']} passes over a valid answer; 1 torch thread):\n")
    print("| grammar | library | answer tokens | mask + advance us/token | of which matcher (fill + advance) | setup ms | mask / AR step |")
    print("|---|---|---|---|---|---|---|")
    for r in cost["rows"]:
        print(f"| {r['grammar']} | {r['library']} | {r['tokens']} | {r['us_per_token']:.1f} | {r['matcher_us_per_token']:.1f} "
              f"| {r['setup_ms']:.2f} | {r['vs_forward']:.3f} |")
    if not cost["xgrammar"]:
        print("(xgrammar is not installed: its rows are skipped)")
    line = f"AR step at batch 1, no grammar (engine, direct): {cost['ar_step_us']:.0f} us/token"
    if http_ar_us is not None:
        line += f"; HTTP tandem-ar requests above: median {http_ar_us:.0f} us per output token (prefill, grammar and HTTP included)"
    print(line)


def main(args) -> int:
    cases = build_cases(args.n, args.seed)
    if args.url:
        url, stop = args.url, None
    else:
        from tandem.local_app import start_app

        print("starting the app ...", flush=True)
        app = start_app({"checkpoint": args.checkpoint}, new_cluster=True)
        url, stop = app.url, app.stop
    raw: list[dict] = []
    records: list[dict] = []
    warmup: list[dict] = []
    t_start = time.perf_counter()
    try:
        # Warm-up, not in the table: each engine's first constrained requests (grammar compiles, the
        # mask kernel's first call) — their latencies are printed and kept in the JSON.
        for model in [MODES[m] for m in args.modes if m in ("ar", "verified")]:
            warmup += asyncio.run(_run(url, model, [cases["tools/auto"][0], cases["schema/extract"][0]], 1, args.max_tokens))
        print("  warm-up: " + ", ".join(f"{r['model']} {r['set']} {r['ms']:.0f} ms" for r in warmup), flush=True)
        by_mode: dict[tuple[str, str], list[dict]] = {}  # (set, mode) -> its requests, every round
        p50_by_round: dict[tuple[str, str], list[float]] = {}
        for round_ in range(args.repeat):
            # each round sends the modes in another order, so a machine whose load drifts (a shared
            # VM) does not always favour the same column
            order = args.modes[round_ % len(args.modes):] + args.modes[:round_ % len(args.modes)]
            for set_ in args.sets:
                for mode, model in ((m, MODES[m]) for m in order):
                    recs = asyncio.run(_run(url, model, cases[set_], args.concurrency, args.max_tokens))
                    raw += [rec | {"round": round_} for rec in recs]
                    by_mode.setdefault((set_, mode), []).extend(recs)
                    r = summarize(set_, mode, recs)
                    p50_by_round.setdefault((set_, mode), []).append(r["p50_ms"])
                    print(f"  {set_:17s} {model:16s} valid {r['valid']:.2f} exact {r['exact']:.2f} p50 {r['p50_ms']:.0f} ms "
                          f"modes {r['modes_used']} ({time.perf_counter() - t_start:.0f} s)", flush=True)
        records = [summarize(set_, mode, by_mode[(set_, mode)]) | {"p50_ms_by_round": p50_by_round[(set_, mode)]}
                   for set_ in args.sets for mode in args.modes]
    finally:
        if stop:
            stop()
    ar = [r["ms"] * 1000 / r["tokens"] for r in raw if r["model"] == "tandem-ar" and r["status"] == 200 and r["tokens"]]
    http_ar_us = statistics.median(ar) if ar else None
    cost = None if args.no_mask_cost else mask_cost(args.checkpoint, cases, args.mask_reps, args.seed)
    print(f"\n{sum(len(cases[s]) for s in args.sets) * args.repeat} requests per model ({args.n} items per set, task-suite test split, "
          f"seed {args.seed}, {args.repeat} round(s)), max_tokens {args.max_tokens}, concurrency {args.concurrency}")
    print_tables(records, cost, http_ar_us)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({
            "machine": {"platform": platform.platform(), "processor": platform.processor() or platform.machine()},
            "checkpoint": args.checkpoint or "shipped (engines/checkpoints/tandem-tiny)", "url": args.url,
            "n": args.n, "seed": args.seed, "max_tokens": args.max_tokens, "concurrency": args.concurrency, "repeat": args.repeat,
            "records": records, "mask_cost": cost, "http_ar_us_per_token": http_ar_us, "warmup": warmup, "requests": raw,
        }, indent=2, ensure_ascii=False))
        print(f"wrote {out}")
    return 0


def _positive(text: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def register(bench_commands) -> None:
    p = bench_commands.add_parser("structured", help="tool calls and JSON-Schema answers per mode through HTTP; grammar mask cost per token")
    p.add_argument("--url", default=None, help="a running app (default: start one in-process)")
    p.add_argument("--checkpoint", default=None, help="checkpoint for the in-process app and the mask benchmark (default: the shipped model)")
    p.add_argument("--n", type=_positive, default=6, help="test items per request set (6: under 10 minutes on the busy 2-vCPU machine, most of it in verified mode)")
    p.add_argument("--concurrency", type=_positive, default=1, help="requests in flight")
    p.add_argument("--repeat", type=_positive, default=1, help="rounds over the sets, each sending the modes in another order (pooled in the table)")
    p.add_argument("--max-tokens", type=_positive, default=256, help="max_tokens of every request")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mask-reps", type=_positive, default=MASK_REPS, help="passes over each answer in the mask benchmark")
    p.add_argument("--no-mask-cost", action="store_true", help="skip the mask microbenchmark")
    p.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES), help="columns to send (default: all)")
    p.add_argument("--sets", nargs="+", choices=SETS, default=list(SUITE_SETS), help="request sets to send (default: the task suite's four)")
    p.add_argument("--out", default="docs/bench/structured_cpu.json", help="JSON results ('' to skip)")
    p.set_defaults(func=main)
