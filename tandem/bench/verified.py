"""`tandem bench verified`: adaptive verified decoding against AR, prompt by prompt, in one run.

Two workloads: the task suite's summarize, plan and code items (test split: what the model was
trained to draft) and the hand-written realistic prompts of `tests/data/realistic_prompts.jsonl`
(short structured jobs, free text, long writing; no template wrote them). At batch 1 every prompt
runs in AR and in verified mode alternately (every other time verified first), `--repeat` times,
and each takes its median; at batch 8 the workload's prompts run in chunks of 8 the same way. Beside them runs
*plain AR*: AR without prompt-lookup guesses (`engines.modes.ar_lookup`), one token per call, what AR mode was
before them. The table gives verified's time over AR's per prompt, whether the tokens are identical (they must be, under greedy decoding) and
where verified's tokens came from (accepted drafts, AR steps, prompt-lookup guesses); the summary gives, per workload,
the worst ratio and the total-time speedup.

`--write-profile` first re-measures the greedy draft step by canvas and batch and AR's step, and
writes them into the checkpoint's `cost_profile.json` (what verified mode prices its drafts with).
"""

from __future__ import annotations

import json
import platform
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from engines.batch.sequence_batch import SequenceBatch
from engines.batch.prefill import left_pad
from engines.modes.block import denoise_canvas
from engines.decode.canvas_settings import BlockParams
from engines.cost import CostProfile
from engines.decode.sampling import make_generator
from tandem.bench.engines import load_engine
from engines.types import GenerationRequest

REALISTIC = Path(__file__).resolve().parents[2] / "tests" / "data" / "realistic_prompts.jsonl"
SUITE_FAMILIES = ("summarize", "plan", "code")
DRAFT_CANVASES = (8, 16, 32, 64, 128, 256)


@dataclass
class Prompt:
    workload: str  # "suite" or "realistic"
    kind: str  # the suite family, or the realistic prompt's kind
    name: str
    messages: list[dict]
    expected: int | None = None  # the router's p90 length for it, as the Gateway passes it (`expected_tokens`)


@dataclass
class Timing:
    ar_s: list[float] = field(default_factory=list)
    verified_s: list[float] = field(default_factory=list)
    plain_s: list[float] = field(default_factory=list)  # AR without prompt lookup
    same: bool = True
    tokens: int = 0
    accepted: int = 0
    ar_tokens: int = 0
    looked_up: int = 0
    rounds: int = 0


def workloads(n: int, realistic: Path) -> list[Prompt]:
    from lab.model.tasks import generate_suite

    suite = [Prompt("suite", it.family, f"{it.family}-{i}", it.messages)
             for i, it in enumerate(generate_suite(n, split="test", seed=0, families=SUITE_FAMILIES))]
    real = [json.loads(line) for line in realistic.read_text().splitlines() if line.strip()]
    return suite + [Prompt("realistic", r["kind"], r["id"], r["messages"]) for r in real]


def draft_step_ms(engine, canvas: int, batch: int, steps: int = 6, repeats: int = 3) -> float:
    """Milliseconds per greedy draft step (no early stop) on `canvas` tokens after a 128-token context."""
    model = engine.model
    sequences = [[5 + (7 * i + j) % 1000 for j in range(128)] for i in range(batch)]
    params = BlockParams(canvas=canvas, steps=steps, t_min=0.4, t_max=0.8, stability_threshold=steps + 1, confidence_threshold=1e-9, entropy_bound=0.1)
    with torch.inference_mode():
        rows = SequenceBatch(model, batch, model.device)
        ids, valid = left_pad(sequences, engine.pad_id, model.device)
        rows.encode(ids, valid, logits="none")
        generators = [make_generator(i) for i in range(batch)]
        denoise_canvas(rows, generators, params, greedy=True)  # warm-up
        best = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            denoise_canvas(rows, generators, params, greedy=True)
            best.append((time.perf_counter() - t0) * 1000 / steps)
    return statistics.median(best)


def ar_step_ms(engine, batch: int, steps: int = 32) -> float:
    model = engine.model
    with torch.inference_mode():
        rows = SequenceBatch(model, batch, model.device)
        ids, valid = left_pad([[5 + j for j in range(128)]] * batch, engine.pad_id, model.device)
        rows.encode(ids, valid, logits="none")
        token = torch.full((batch, 1), 7, dtype=torch.long, device=model.device)
        rows.encode(token, logits="last")
        t0 = time.perf_counter()
        for _ in range(steps):
            rows.encode(token, logits="last").argmax(-1)
    return (time.perf_counter() - t0) * 1000 / steps


def write_draft_costs(engine) -> CostProfile:
    """Measure the draft step by canvas and batch (and AR's step) into the checkpoint's profile."""
    sizes = [c for c in DRAFT_CANVASES if c <= engine.config.canvas_length]
    draft = {c: {b: round(draft_step_ms(engine, c, b), 3) for b in (1, 8)} for c in sizes}
    ar = {b: round(ar_step_ms(engine, b), 3) for b in (1, 8)}
    profile = CostProfile.load(engine.path) or CostProfile(ms_per_forward={"ar": ar, "block": {1: draft[sizes[-1]][1], 8: draft[sizes[-1]][8]}})
    profile.draft_ms_by_canvas = draft
    profile.extra["draft_costs_measured_with_ar_ms"] = ar
    print("draft ms per step by canvas (batch 1 / 8): " + ", ".join(f"{c}: {v[1]:.2f} / {v[8]:.2f}" for c, v in draft.items()))
    print(f"AR ms per step (batch 1 / 8): {ar[1]:.2f} / {ar[8]:.2f}; the profile's: "
          f"{profile.ms_per_forward['ar'][1]:.2f} / {profile.ms_per_forward['ar'][8]:.2f}")
    print(f"wrote {profile.save(engine.path)}")
    return profile


ORDERS = (("ar", "verified", "plain"), ("verified", "plain", "ar"), ("plain", "ar", "verified"))


def run_pair(engine, requests: list[GenerationRequest], timing: list[Timing], order: tuple[str, ...] = ORDERS[0]) -> None:
    """One AR, one verified and one plain-AR run of `requests` as a batch, in `order`; the batch's
    time goes to every prompt in it."""
    as_ar = [GenerationRequest(messages=r.messages, mode="ar", max_new_tokens=r.max_new_tokens) for r in requests]
    runs = {}
    for mode in order:
        engine.lookup = mode != "plain"
        t0 = time.perf_counter()
        runs[mode] = (engine.generate_batch(requests if mode == "verified" else as_ar), time.perf_counter() - t0)
    engine.lookup = True
    (ar, ar_s), (verified, verified_s), (plain, plain_s) = runs["ar"], runs["verified"], runs["plain"]
    for t, a, v, p in zip(timing, ar, verified, plain):
        t.ar_s.append(ar_s)
        t.verified_s.append(verified_s)
        t.plain_s.append(plain_s)
        t.same &= a.token_ids == v.token_ids == p.token_ids
        t.tokens, t.accepted, t.ar_tokens, t.rounds = len(v.token_ids), v.stats.accepted, v.stats.ar_tokens, len(v.stats.steps_per_canvas)
        t.looked_up = v.stats.looked_up


def measure(engine, prompts: list[Prompt], batch: int, repeat: int, max_tokens: int) -> list[Timing]:
    timing = [Timing() for _ in prompts]
    for i in range(repeat):
        for start in range(0, len(prompts), batch):
            chunk = prompts[start : start + batch]
            requests = [GenerationRequest(messages=p.messages, mode="verified", max_new_tokens=max_tokens, expected_tokens=p.expected) for p in chunk]
            # The order rotates: whichever runs later (caches warm, or a slow spell begun) is not
            # always the same mode.
            run_pair(engine, requests, timing[start : start + batch], ORDERS[i % len(ORDERS)])
    return timing


def summarize(prompts: list[Prompt], timing: list[Timing], batch: int) -> list[dict]:
    rows = []
    for p, t in zip(prompts, timing):
        ar, verified, plain = statistics.median(t.ar_s), statistics.median(t.verified_s), statistics.median(t.plain_s)
        rows.append({"workload": p.workload, "kind": p.kind, "name": p.name, "batch": batch, "tokens": t.tokens, "ar_ms": ar * 1000,
                     "verified_ms": verified * 1000, "plain_ar_ms": plain * 1000, "ratio": verified / ar, "identical": t.same,
                     "from_drafts": t.accepted, "from_ar": t.ar_tokens, "from_lookup": t.looked_up, "rounds": t.rounds})
    return rows


def totals(rows: list[dict]) -> list[dict]:
    out = []
    for batch in sorted({r["batch"] for r in rows}):
        for workload in ("suite", "realistic"):
            mine = [r for r in rows if r["batch"] == batch and r["workload"] == workload]
            if not mine:
                continue
            groups = [("all", mine)] + ([(f, [r for r in mine if r["kind"] == f]) for f in SUITE_FAMILIES] if workload == "suite" else [])
            for label, group in groups:
                if not group:
                    continue
                if batch > 1:  # a chunk's time is shared: count each chunk once
                    seen = {}
                    for r in group:
                        seen.setdefault((r["ar_ms"], r["verified_ms"]), r)
                    ar = sum(r["ar_ms"] for r in seen.values())
                    verified = sum(r["verified_ms"] for r in seen.values())
                    plain = sum(r["plain_ar_ms"] for r in seen.values())
                else:
                    ar, verified = sum(r["ar_ms"] for r in group), sum(r["verified_ms"] for r in group)
                    plain = sum(r["plain_ar_ms"] for r in group)
                worst = max(group, key=lambda r: r["ratio"])
                out.append({"batch": batch, "workload": workload, "group": label, "prompts": len(group), "ar_ms": ar, "verified_ms": verified,
                            "plain_ar_ms": plain, "lookup_speedup": plain / ar, "speedup": ar / verified, "worst_ratio": worst["ratio"], "worst": worst["name"],
                            "identical": sum(r["identical"] for r in group)})
    return out


def main(args) -> int:
    for flag, path in (("--json", args.json), ("--plot", args.plot)):  # refused now, not after minutes of measuring
        if path and not Path(path).resolve().parent.is_dir():
            raise SystemExit(f"tandem: {flag} {path}: no such directory {Path(path).resolve().parent}")
    torch.set_num_threads(args.threads)
    engine, source = load_engine(args.checkpoint)
    machine = f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads, torch {torch.__version__}"
    print(f"checkpoint: {source}\nmachine: {machine}\nmax_tokens {args.max_tokens}, {args.repeat} runs per prompt (medians)")
    if args.write_profile:
        profile = write_draft_costs(engine)
        engine.draft_costs.profile = profile
    prompts = workloads(args.n, Path(args.prompts or REALISTIC))
    # The router's p90 length per prompt, as the Gateway sends it (verified sizes its first draft by
    # it); the `tandem` CLI supplies it from the router's floor (`tandem.main.predicted_length`).
    expected_length = getattr(args, "expected_length", None)
    if expected_length is not None and not args.no_router_lengths:
        for p in prompts:
            p.expected = min(expected_length(p.messages, args.max_tokens), args.max_tokens)
    measure(engine, prompts[:2], 1, 1, 16)  # warm-up
    rows = []
    for batch in args.batch:
        rows += summarize(prompts, measure(engine, prompts, batch, args.repeat, args.max_tokens), batch)
        print(f"  measured batch {batch}", flush=True)
    print("\n| batch | workload | prompt | kind | tokens | plain AR ms | AR ms | verified ms | verified / AR | identical | from drafts | from AR "
          "| from lookup | rounds |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["batch"] == 1:
            print(f"| {r['batch']} | {r['workload']} | {r['name']} | {r['kind']} | {r['tokens']} | {r['plain_ar_ms']:.0f} | {r['ar_ms']:.0f} "
                  f"| {r['verified_ms']:.0f} | {r['ratio']:.2f} | {'yes' if r['identical'] else 'NO'} | {r['from_drafts']} | {r['from_ar']} "
                  f"| {r['from_lookup']} | {r['rounds']} |")
    summary = totals(rows)
    print("\n| batch | workload | group | prompts | plain AR ms | AR ms | plain AR / AR | verified ms | AR / verified | worst verified / AR "
          "| worst prompt | identical |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for s in summary:
        print(f"| {s['batch']} | {s['workload']} | {s['group']} | {s['prompts']} | {s['plain_ar_ms']:.0f} | {s['ar_ms']:.0f} | {s['lookup_speedup']:.2f}x "
              f"| {s['verified_ms']:.0f} | {s['speedup']:.2f}x "
              f"| {s['worst_ratio']:.2f} | {s['worst']} | {s['identical']}/{s['prompts']} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"checkpoint": source, "machine": machine, "max_tokens": args.max_tokens, "repeat": args.repeat,
                                               "prompts": rows, "summary": summary}, indent=2))
        print(f"wrote {args.json}")
    if args.plot:
        plot(rows, args.plot, args.max_tokens, args.repeat)
        print(f"wrote {args.plot}")
    return 0 if all(r["identical"] for r in rows) else 1


def plot(rows: list[dict], path: str, max_tokens: int, repeat: int, target: float = 1.25) -> None:
    """Verified's time over AR's per prompt, one series per batch size, with the 1.25x target line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["name"] for r in rows))
    fig, ax = plt.subplots(figsize=(12, 4))
    for batch, marker in zip(sorted({r["batch"] for r in rows}), ("o", "s", "^", "D")):
        mine = {r["name"]: r["ratio"] for r in rows if r["batch"] == batch}
        ax.scatter([names.index(n) for n in mine], list(mine.values()), marker=marker, s=40, alpha=0.8, label=f"batch {batch}")
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.axhline(target, color="red", linestyle="--", linewidth=1, label=f"target {target}x AR")
    ax.set_xticks(range(len(names)), names, rotation=90, fontsize=7)
    ax.set_ylabel("verified time / AR time")
    ax.set_title(f"Adaptive verified vs AR per prompt (max_tokens {max_tokens}, medians of {repeat})")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
