"""`tandem eval model`: task-suite quality of one checkpoint in every decoding mode.

Every family of the task suite's test split (`lab.model.tasks`) is decoded in:
- block mode at several denoising-step budgets, on right-sized canvases (the smallest of
  64/128/256 that holds the reference answer + EOS, as training chose them, capped at
  `config.canvas_length`) and on full canvases (`config.canvas_length`);
- verified mode (12 steps, right-sized canvas), greedy;
- AR mode, greedy.

Every request gets `max_new_tokens` = reference answer length + `MARGIN`, capped so that the
prompt and the canvases fit the context; long answers (reason, write) therefore span several
canvases. Requests of one family run through `DiffusionEngine.generate_batch` in chunks of
`BATCH` (a request's tokens are the same alone or batched; its latency is that of its batch).

One record per (family, mode, steps, canvas): exact match, family score, tokens per forward and
median latency. Under greedy decoding verified output must equal AR output token for token; the
run counts the items where it does not (`mismatches_vs_ar` on verified records) and fails if
any do. Output: a markdown table, optional JSON (the records) and a PNG plot of quality
against denoising steps.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import torch

from engines.replica.engine import DiffusionEngine
from lab.model.tasks import FAMILIES, LONG_FAMILIES, OPEN_FAMILIES, SHORT_FAMILIES, TaskItem, generate_suite, score
from engines.defaults import CANVAS_SIZES, SHIPPED_CHECKPOINT
from lab.model.train import canvas_size_for
from engines.types import GenerationRequest, Mode

MARGIN = 16  # output tokens allowed beyond the reference answer's length
BATCH = 8  # requests per generate_batch call
VERIFIED_STEPS = 12  # denoising steps of verified mode's drafts
BLOCK_STEPS = (4, 8, 12, 16)
QUICK_BLOCK_STEPS = (4, 12)
DEFAULT_N = 8  # items per family of a full run: block + AR + short-family verified ~10 min on a busy 2-core CPU
QUICK_N = 4
SEED = 0  # suite seed; a request's seed is its item's index within its family


@dataclass(frozen=True)
class Setting:
    """One way of decoding: a mode and, for block and verified, its denoising settings."""

    mode: Mode
    steps: int | None = None  # max denoising steps per canvas; None in AR mode
    canvas: str | None = None  # "right" (sized to the answer) or "full" (config.canvas_length); None in AR mode

    @property
    def label(self) -> str:
        return self.mode if self.mode == "ar" else f"{self.mode} {self.steps} steps, {self.canvas} canvas"


@dataclass
class Outcome:
    """What one request produced, as the aggregation needs it."""

    item: TaskItem
    text: str  # decoded output
    tokens_per_forward: float  # DecodeStats.tokens_per_forward
    latency_s: float  # wall time of the request (its batch's, when batched)
    canvas_size: int | None = None  # canvas tokens used; None in AR mode
    acceptance_rate: float | None = None  # verified mode: accepted / drafted draft tokens
    token_ids: list[int] | None = None  # output tokens (compared between verified and AR)


def settings(block_steps: tuple[int, ...]) -> list[Setting]:
    """Block at every step budget on right-sized and full canvases, then verified, then AR."""
    block = [Setting("block", s, c) for c in ("right", "full") for s in block_steps]
    return block + [Setting("verified", VERIFIED_STEPS, "right"), Setting("ar")]


def canvas_sizes(canvas_length: int) -> tuple[int, ...]:
    """Training's right-sized canvases, capped at the model's `canvas_length` (always included)."""
    return tuple(s for s in CANVAS_SIZES if s < canvas_length) + (canvas_length,)


def max_new_tokens_for(answer_tokens: int, prompt_tokens: int, context: int, canvas: int | None) -> int:
    """Answer length + MARGIN, capped so that the request fits the context. Block and verified
    mode need room for whole canvases (plus one slot), as `DiffusionEngine.validate` checks."""
    want = answer_tokens + MARGIN
    room = context - prompt_tokens if canvas is None else (context - prompt_tokens - 1) // canvas * canvas
    assert room >= 1, f"prompt of {prompt_tokens} tokens leaves no room for output in a context of {context}"
    return min(want, room)


def item_prompt(item: TaskItem) -> dict:
    """The request fields that carry `item`'s prompt: its `messages`, and its `tools` (family "tool")
    for the chat template. No `grammar`: tool calls are evaluated unconstrained, as the model writes them."""
    return {"messages": item.messages} | ({"tools": item.tools} if item.tools else {})


def make_request(engine: DiffusionEngine, item: TaskItem, setting: Setting, seed: int) -> GenerationRequest:
    answer = item.output_tokens if item.output_tokens is not None else item.count_tokens(engine.tokenizer)
    source = item_prompt(item)
    prompt = len(engine.prompt_ids(GenerationRequest(**source)))
    full = engine.config.canvas_length
    canvas = None
    if setting.mode != "ar":
        canvas = canvas_size_for(answer, canvas_sizes(full)) if setting.canvas == "right" else full
    return GenerationRequest(
        **source,
        mode=setting.mode,
        max_new_tokens=max_new_tokens_for(answer, prompt, engine.context_length, canvas),
        temperature=0.0,  # greedy AR and verification; block mode commits the argmax canvas
        seed=seed,
        canvas=canvas,
        max_denoising_steps=setting.steps,
    )


def run_setting(engine: DiffusionEngine, items: list[TaskItem], setting: Setting) -> list[Outcome]:
    """Decode every item in `setting`, in item order, `BATCH` requests of one family at a time (so a
    batch's latency is one family's). A request's seed is its item's index within its family."""
    done: list[Outcome] = []
    for family in dict.fromkeys(i.family for i in items):
        group = [i for i in items if i.family == family]
        for start in range(0, len(group), BATCH):
            chunk = group[start : start + BATCH]
            requests = [make_request(engine, item, setting, seed=start + k) for k, item in enumerate(chunk)]
            for item, req, r in zip(chunk, requests, engine.generate_batch(requests)):
                done.append(
                    Outcome(
                        item=item,
                        text=r.text,
                        tokens_per_forward=r.stats.tokens_per_forward,
                        latency_s=r.stats.latency_s,
                        canvas_size=req.canvas,
                        acceptance_rate=r.stats.acceptance_rate if setting.mode == "verified" else None,
                        token_ids=r.token_ids,
                    )
                )
    return done


def aggregate(setting: Setting, done: list[Outcome]) -> list[dict]:
    """One record per family (in suite order) of `setting`'s outcomes."""
    by_family: dict[str, list[Outcome]] = defaultdict(list)
    for o in done:
        by_family[o.item.family].append(o)
    records = []
    for family in [f for f in FAMILIES if f in by_family]:
        group = by_family[family]
        scores = [score(o.item, o.text) for o in group]
        record = {
            "family": family,
            "mode": setting.mode,
            "steps": setting.steps,
            "canvas": setting.canvas,
            "canvas_sizes": sorted({o.canvas_size for o in group if o.canvas_size is not None}),
            "exact_match": sum(s.exact for s in scores) / len(scores),
            "family_score": statistics.fmean(s.family_score for s in scores),
            "tokens_per_forward": statistics.fmean(o.tokens_per_forward for o in group),
            "p50_ms": statistics.median(o.latency_s for o in group) * 1000,
            "n": len(group),
        }
        if setting.mode == "verified":
            record["acceptance_rate"] = statistics.fmean(o.acceptance_rate or 0.0 for o in group)
        records.append(record)
    return records


@dataclass
class Evaluation:
    records: list[dict]  # one per (family, mode, steps, canvas)
    mismatches: int  # items where verified output != AR output (must be 0 under greedy)
    items: int  # items per setting
    seconds: float  # wall time of the decoding


def evaluate(
    engine: DiffusionEngine,
    n_per_family: int,
    block_steps: tuple[int, ...] = BLOCK_STEPS,
    families: tuple[str, ...] | None = None,
    log=lambda line: print(line, flush=True),
) -> Evaluation:
    """Decode the test split in every setting; verified and AR are compared item by item."""
    items = generate_suite(n_per_family, split="test", seed=SEED, families=families)
    for item in items:
        item.count_tokens(engine.tokenizer)
    start = time.perf_counter()
    records: list[dict] = []
    greedy: dict[Mode, list[Outcome]] = {}
    for setting in settings(block_steps):
        t0 = time.perf_counter()
        done = run_setting(engine, items, setting)
        records += aggregate(setting, done)
        if setting.mode in ("ar", "verified"):
            greedy[setting.mode] = done
        log(f"  {setting.label}: {time.perf_counter() - t0:.1f}s")
    mismatched = [a.item.family for a, v in zip(greedy["ar"], greedy["verified"]) if a.token_ids != v.token_ids]
    for record in records:
        if record["mode"] == "verified":
            record["mismatches_vs_ar"] = mismatched.count(record["family"])
    return Evaluation(records, len(mismatched), len(items), time.perf_counter() - start)


# --------------------------------------------------------------------------------------------
# report


def short_mean(records: list[dict], key: str = "exact_match") -> float | None:
    """Mean of `key` over the short families present (each family weighs the same)."""
    values = [r[key] for r in records if r["family"] in SHORT_FAMILIES]
    return statistics.fmean(values) if values else None


def _rows(records: list[dict]) -> dict[tuple, list[dict]]:
    rows: dict[tuple, list[dict]] = {}
    for r in records:
        rows.setdefault((r["mode"], r["steps"], r["canvas"]), []).append(r)
    return rows


def markdown_tables(records: list[dict]) -> str:
    """Quality table (exact match; long families also family score) and cost table (tokens per
    forward and p50 latency per family), one row per setting."""
    families = [f for f in FAMILIES if any(r["family"] == f for r in records)]
    short = [f for f in families if f in SHORT_FAMILIES]
    rows = _rows(records)

    def setting_cells(mode, steps, canvas):
        return [mode, "-" if steps is None else str(steps), canvas or "-"]

    head = ["mode", "steps", "canvas"] + families + (["short mean"] if short else [])
    lines = ["Exact match (long families: exact / family score)", "", _md_row(head), _md_row(["---"] * len(head))]
    for (mode, steps, canvas), recs in rows.items():
        by = {r["family"]: r for r in recs}
        cells = []
        for f in families:
            r = by.get(f)
            if r is None:
                cells.append("")
            elif f in LONG_FAMILIES:
                cells.append(f"{r['exact_match']:.2f} / {r['family_score']:.2f}")
            else:
                cells.append(f"{r['exact_match']:.2f}")
        if short:
            cells.append(f"{short_mean(recs):.2f}")
        lines.append(_md_row(setting_cells(mode, steps, canvas) + cells))

    head = ["mode", "steps", "canvas"] + families
    lines += ["", "Tokens per forward / p50 latency ms (batches of up to 8 requests of one family)", "", _md_row(head), _md_row(["---"] * len(head))]
    for (mode, steps, canvas), recs in rows.items():
        by = {r["family"]: r for r in recs}
        cells = [f"{by[f]['tokens_per_forward']:.2f} / {by[f]['p50_ms']:.0f}" if f in by else "" for f in families]
        lines.append(_md_row(setting_cells(mode, steps, canvas) + cells))
    return "\n".join(lines)


def quality(record: dict) -> float:
    """The score a family is judged by: exact match for the short structured families (a JSON with
    one wrong field is wrong), the family's own score for long free text (line accuracy for
    reason, token accuracy for write), where an exact copy of hundreds of tokens is rare in any mode."""
    return record["exact_match"] if record["family"] in SHORT_FAMILIES else record["family_score"]


def equal_quality_tasks(records: list[dict], steps: int = 12, canvas: str = "right", tolerance: float = 0.01) -> list[str]:
    """Families whose block answers (at `steps`, on `canvas` canvases) score within `tolerance` of
    AR's (by `quality`): the policy's `load_aware.equal_quality_tasks` for this checkpoint."""
    ar = {r["family"]: quality(r) for r in records if r["mode"] == "ar"}
    block = {r["family"]: quality(r) for r in records if r["mode"] == "block" and r["steps"] == steps and r["canvas"] == canvas}
    return [f for f in FAMILIES if f in ar and f in block and block[f] >= ar[f] - tolerance]


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def plot(records: list[dict], path: str | Path, title: str) -> None:
    """Quality against denoising steps in block mode (right-sized and full canvases), with AR and
    verified as horizontal lines: short families' mean exact match, and reason/write family score."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = []
    if any(r["family"] in SHORT_FAMILIES for r in records):
        panels.append(("short families: mean exact match", lambda recs: short_mean(recs)))
    for family in LONG_FAMILIES:
        if any(r["family"] == family for r in records):
            panels.append((f"{family}: family score", lambda recs, f=family: next((r["family_score"] for r in recs if r["family"] == f), None)))
    rows = _rows(records)
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.8), squeeze=False)
    for ax, (name, metric) in zip(axes[0], panels):
        for canvas, style in (("right", "o-"), ("full", "s--")):
            points = sorted((k[1], metric(v)) for k, v in rows.items() if k[0] == "block" and k[2] == canvas)
            if points:
                ax.plot([p[0] for p in points], [p[1] for p in points], style, label=f"block, {canvas} canvas")
        for (mode, steps, _), recs in rows.items():
            if mode == "ar":
                ax.axhline(metric(recs), color="black", linestyle="-", linewidth=1.5, label="AR (greedy)")
            elif mode == "verified":
                ax.axhline(metric(recs), color="tab:red", linestyle=":", linewidth=2.5, label=f"verified ({steps} steps)")
        ax.set_title(name)
        ax.set_xlabel("denoising steps per canvas")
        ax.set_ylim(-0.03, 1.03)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("quality")
    axes[0][-1].legend(fontsize=8, loc="best")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(args) -> int:
    torch.set_num_threads(args.threads)
    checkpoint = args.checkpoint or str(SHIPPED_CHECKPOINT)
    engine = DiffusionEngine.from_checkpoint(checkpoint)
    n = args.n or (QUICK_N if args.quick else DEFAULT_N)
    steps = QUICK_BLOCK_STEPS if args.quick else BLOCK_STEPS
    # The open structured families are decoded as the server decodes them (grammar, skeleton) by
    # `tandem eval structured`; here, unless named, the plain chat families.
    families = tuple(args.families.split(",")) if args.families else tuple(f for f in FAMILIES if f not in OPEN_FAMILIES)
    for f in families or ():
        assert f in FAMILIES, f"family must be one of {list(FAMILIES)}, got {f!r}"
    print(f"checkpoint: {checkpoint}; canvas {engine.config.canvas_length}; {n} test items per family; block steps {list(steps)}")
    result = evaluate(engine, n, steps, families)
    print()
    print(markdown_tables(result.records))
    print()
    print(f"verified == AR (greedy): {result.mismatches} mismatches in {result.items} items")
    if any(r["mode"] == "block" and r["steps"] == 12 for r in result.records):
        print(f"block (12 steps, right-sized canvas) within 1 point of AR (exact match; reason/write: family score) on: "
              f"{equal_quality_tasks(result.records)} (policy load_aware.equal_quality_tasks)")
    print(f"decoding took {result.seconds:.0f}s ({torch.get_num_threads()} torch threads)")
    print("structured families (schema, toolcall, label) decoded as served, per mode: tandem eval structured")
    if args.json:
        Path(args.json).write_text(json.dumps(result.records, indent=2))
        print(f"wrote {args.json}")
    if args.plot:
        plot(result.records, args.plot, f"{Path(checkpoint).name}: {n} test items per family")
        print(f"wrote {args.plot}")
    if result.mismatches:
        print(f"error: verified output differs from AR output on {result.mismatches} items (must be 0 under greedy)")
        return 1
    return 0
