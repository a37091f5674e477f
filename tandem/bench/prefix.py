"""`tandem bench prefix`: prefix reuse against no reuse, side by side in one run.

An agent sends the same long system prompt (here 1k-3.5k tokens of instructions) with a new user
message each turn. For each prefix length and mode, the same engine weights serve each turn twice,
alternately: once by an engine without the prefix cache (every turn encodes the whole prompt)
and once by one whose cache already holds the system prompt (each turn encodes only its
message). Reported per prefix length and mode: time to first token (a 1-token answer: the
prefill and one step) and throughput of a 64-token answer, each a median over the turns, their
ratios, the one-off cost of filling the cache (the first turn, which encodes the prefix alone
and then the rest), and whether both engines wrote the same tokens (they must).

Then a conversation that grows turn by turn (the system prompt, every earlier question and answer,
a new question): the cache holds each turn's head, and the next turn finds it inside its prompt.

`--write-profile` records what a prompt token of prefill costs (the AR records' time to first token
without reuse less with reuse, over the prefix tokens reused) in the checkpoint's cost profile, so
the router prices a prompt's prefill, and what an engine's prefix cache saves of it.
"""

from __future__ import annotations

import dataclasses
import json
import platform
import statistics
import time
from pathlib import Path

import torch

from engines import DiffusionEngine
from engines.types import GenerationRequest

PREFIX_TOKENS = (1024, 2048, 3584)
QUICK_PREFIX_TOKENS = (1024, 2048)
MODES = ("ar", "verified", "block")
ANSWER_TOKENS = 64
QUESTIONS = [
    "Summarize: the meeting moved to Friday because the room was booked.",
    "Classify the review as positive or negative: the battery died in a day.",
    "Extract the name and the city: Alice Smith moved to Paris last spring.",
    "Plan the steps to reset a forgotten router password.",
    "Rewrite politely: send me the report now.",
]
RULES = [
    "Answer with the fields asked for and nothing else.", "Keep names exactly as the user wrote them.",
    "Write dates as YYYY-MM-DD.", "Give amounts as plain numbers without currency signs.",
    "When a field is missing, write null rather than guessing.", "Never add commentary before or after the answer.",
    "Prefer the most recent value when the message gives two.", "Use the tools only when the message names an order id.",
]


def system_prompt(engine: DiffusionEngine, tokens: int) -> str:
    """Numbered rules, repeated with their numbers, until the prompt has about `tokens` tokens."""
    lines, n = [], 0
    while True:
        lines.append(f"Rule {n + 1}: {RULES[n % len(RULES)]}")
        n += 1
        if n % 2 == 0 and len(engine.tokenizer.encode("\n".join(lines), add_special_tokens=False)) >= tokens:
            return "\n".join(lines)


def turn(system: str, question: str, mode: str, max_tokens: int) -> GenerationRequest:
    # seeded: block mode samples its canvas, and both engines must draw the same noise; a 64-token
    # canvas, as the router sizes one for a short answer
    return GenerationRequest(messages=[{"role": "system", "content": system}, {"role": "user", "content": question}],
                             mode=mode, max_new_tokens=max_tokens, seed=0, canvas=64 if mode != "ar" else None)


def timed(engine: DiffusionEngine, request: GenerationRequest):
    start = time.perf_counter()
    result = engine.generate(request)
    return time.perf_counter() - start, result


def measure(cold: DiffusionEngine, warm: DiffusionEngine, prefix_tokens: int, mode: str, turns: int) -> dict:
    system = system_prompt(cold, prefix_tokens)
    warm.prefix_cache.clear()
    fill_s, _ = timed(warm, turn(system, "Hello.", mode, 1))  # the first turn fills the cache
    ttft = {"cold": [], "reused": []}
    tps = {"cold": [], "reused": []}
    identical, reused = True, 0
    for i in range(turns):
        question = QUESTIONS[i % len(QUESTIONS)]
        for name, engine in (("cold", cold), ("reused", warm)) if i % 2 == 0 else (("reused", warm), ("cold", cold)):
            seconds, _ = timed(engine, turn(system, question, mode, 1))
            ttft[name].append(seconds)
        answers = {}
        for name, engine in (("cold", cold), ("reused", warm)):
            seconds, answers[name] = timed(engine, turn(system, question, mode, ANSWER_TOKENS))
            tps[name].append(answers[name].stats.output_tokens / seconds)
        identical &= answers["cold"].token_ids == answers["reused"].token_ids
        reused = answers["reused"].stats.prefix_tokens_reused
    med = statistics.median
    prompt = len(cold.prompt_ids(turn(system, QUESTIONS[0], mode, 1)))
    # a model may end these answers at once (a checkpoint trained on other prompts did in block mode):
    # no tokens, no throughput to compare; time to first token still says what the cache saves
    ratio = round(med(tps["reused"]) / med(tps["cold"]), 2) if med(tps["cold"]) > 0 else None
    return {
        "prefix_tokens": reused, "prompt_tokens": prompt, "mode": mode, "turns": turns,
        "ttft_ms_cold": round(med(ttft["cold"]) * 1000, 1), "ttft_ms_reused": round(med(ttft["reused"]) * 1000, 1),
        "ttft_speedup": round(med(ttft["cold"]) / med(ttft["reused"]), 2), "ttft_ms_fill": round(fill_s * 1000, 1),
        "tokens_per_s_cold": round(med(tps["cold"]), 1), "tokens_per_s_reused": round(med(tps["reused"]), 1),
        "throughput_ratio": ratio, "identical": identical,
        "target_prefix_tokens": prefix_tokens,
    }


def measure_conversation(cold: DiffusionEngine, warm: DiffusionEngine, prefix_tokens: int, mode: str, turns: int) -> dict:
    """A conversation that grows: each turn sends the system prompt, every earlier question and
    answer, and a new question. Time to first token per turn without the cache and with it (which
    holds what the turns before stored), medians over the turns after the first."""
    system = system_prompt(cold, prefix_tokens)
    warm.prefix_cache.clear()
    messages = [{"role": "system", "content": system}]
    ttft = {"cold": [], "reused": []}
    identical, reused = True, []
    for i in range(turns):
        messages.append({"role": "user", "content": f"Turn {i + 1}. {QUESTIONS[i % len(QUESTIONS)]} Answer briefly and keep names as written."})
        request = GenerationRequest(messages=list(messages), mode=mode, max_new_tokens=1, seed=0, canvas=64 if mode != "ar" else None)
        for name, engine in (("cold", cold), ("reused", warm)) if i % 2 == 0 else (("reused", warm), ("cold", cold)):
            seconds, result = timed(engine, request)
            ttft[name].append(seconds)
            if name == "reused":
                reused.append(result.stats.prefix_tokens_reused)
        answer = dataclasses.replace(request, max_new_tokens=ANSWER_TOKENS)
        answers = [engine.generate(answer) for engine in (cold, warm)]
        identical &= answers[0].token_ids == answers[1].token_ids
        messages.append({"role": "assistant", "content": answers[0].text})
    med = statistics.median
    later = slice(1, None)
    return {
        "scenario": "conversation", "mode": mode, "turns": turns, "target_prefix_tokens": prefix_tokens,
        "prompt_tokens_last": len(cold.prompt_ids(request)), "prefix_tokens_reused_last": reused[-1],
        "ttft_ms_cold": round(med(ttft["cold"][later]) * 1000, 1), "ttft_ms_reused": round(med(ttft["reused"][later]) * 1000, 1),
        "ttft_speedup": round(med(ttft["cold"][later]) / med(ttft["reused"][later]), 2), "identical": identical,
    }


def main(args) -> int:
    from tandem.bench.engines import load_engine

    torch.set_num_threads(args.threads)
    cold, source = load_engine(args.checkpoint)
    cold.prefix_cache = None
    warm = DiffusionEngine.from_checkpoint(cold.path)
    machine = f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads, torch {torch.__version__}"
    prefixes = QUICK_PREFIX_TOKENS if args.quick else PREFIX_TOKENS
    modes = tuple(args.modes.split(","))
    turns = args.turns or (3 if args.quick else 5)
    print(f"checkpoint: {source}\nmachine: {machine}\n{turns} turns per prefix and mode (medians); answers of 1 token (TTFT) and {ANSWER_TOKENS}")
    timed(cold, turn("Warm up.", "Hi.", "ar", 2))
    timed(warm, turn("Warm up.", "Hi.", "ar", 2))
    records = []
    for prefix_tokens in prefixes:
        for mode in modes:
            records.append(measure(cold, warm, prefix_tokens, mode, turns))
            print(f"  measured prefix {prefix_tokens}, {mode}", flush=True)
    print("\n| prefix tokens | prompt tokens | mode | TTFT no reuse ms | TTFT reused ms | TTFT speedup | first turn (fills) ms "
          "| tok/s no reuse | tok/s reused | throughput ratio | identical |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in records:
        print(f"| {r['prefix_tokens']} | {r['prompt_tokens']} | {r['mode']} | {r['ttft_ms_cold']:.0f} | {r['ttft_ms_reused']:.0f} "
              f"| {r['ttft_speedup']:.2f}x | {r['ttft_ms_fill']:.0f} | {r['tokens_per_s_cold']:.1f} | {r['tokens_per_s_reused']:.1f} "
              f"| {'-' if r['throughput_ratio'] is None else format(r['throughput_ratio'], '.2f') + 'x'} | {'yes' if r['identical'] else 'NO'} |")
    conversations = [measure_conversation(cold, warm, prefixes[0], mode, turns + 3) for mode in modes]
    print(f"\nA growing conversation ({turns + 3} turns; each sends the system prompt of ~{prefixes[0]} tokens, every earlier "
          "question and answer, and a new question), medians over the turns after the first:")
    print("| mode | prompt tokens (last turn) | reused (last turn) | TTFT no reuse ms | TTFT reused ms | TTFT speedup | identical |")
    print("|---|---|---|---|---|---|---|")
    for r in conversations:
        print(f"| {r['mode']} | {r['prompt_tokens_last']} | {r['prefix_tokens_reused_last']} | {r['ttft_ms_cold']:.0f} | {r['ttft_ms_reused']:.0f} "
              f"| {r['ttft_speedup']:.2f}x | {'yes' if r['identical'] else 'NO'} |")
    ms_per_token = prefill_ms_per_token(records)
    if ms_per_token is not None:
        print(f"prefill: {ms_per_token:.4f} ms per prompt token (AR, time to first token saved / prefix tokens reused)")
    if args.json:
        Path(args.json).write_text(json.dumps({"checkpoint": source, "machine": machine, "records": records,
                                               "conversations": conversations, "prefill_ms_per_token": ms_per_token}, indent=2))
        print(f"wrote {args.json}")
    if getattr(args, "write_profile", False):
        from engines.cost import CostProfile

        profile = CostProfile.load(cold.path)
        if profile is None or ms_per_token is None:
            print("no cost profile beside the checkpoint (run `tandem bench engines --write-profile` first) or no AR records: nothing written")
            return 2
        profile.prefill_ms_per_token = {"block": ms_per_token, "ar": ms_per_token}  # one encoder: the same weights in both engines
        print(f"wrote {profile.save(cold.path)}")
    return 0 if all(r["identical"] for r in records + conversations) else 1


def prefill_ms_per_token(records: list[dict]) -> float | None:
    """Milliseconds a prompt token of prefill costs: least squares through the origin of the AR
    records' time to first token saved by reuse against the prefix tokens reused."""
    points = [(r["prefix_tokens"], r["ttft_ms_cold"] - r["ttft_ms_reused"]) for r in records if r["mode"] == "ar" and r["prefix_tokens"]]
    if not points:
        return None
    return max(0.0, sum(t * ms for t, ms in points) / sum(t * t for t, _ in points))
