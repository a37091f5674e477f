"""Train a tiny DiffusionGemma on the task suite: both objectives on the same weights.

One step, one batch (all rows share one canvas size C and one canvas index k):
1. **Encoder pass** (causal) over `[BOS prompt answer EOS]`, left-padded so every row's context
   (prompt + its first k canvases) ends at the same column P. Its hidden states through the tied
   `lm_head` and soft-capping give next-token logits: cross-entropy on the answer and EOS only
   (pads never predict anything). This trains AR mode and the verifier.
2. `cache.crop(P)`: drop the answer's KV, so the decoder sees only prompt + earlier canvases
   (it attends to the whole cache bidirectionally and would otherwise see the answer).
   ENVIRONMENT.md measured this cropped path equal to a fresh prompt-only forward to 5e-6.
3. **Decoder pass** over the k-th canvas: the answer slice followed by EOS fill, corrupted by
   replacing each token with a uniform random one at a per-row rate t ~ U(t_floor, 1) (uniform
   diffusion, as the library's sampler renoises). Cross-entropy to the clean canvas on every
   position. Half the batches first run a no-grad pass and feed its logits back as
   `self_conditioning_logits`, as `generate()` does from its second step on.

Canvases are right-sized: 64, 128 or 256 tokens, the smallest that holds the answer, sometimes a
larger one; long answers are split into consecutive 256-token canvases. A quarter of the rows
start their canvas at a random point inside the answer instead, as verified drafts do.

Notable choices (see /work/shared/ENVIRONMENT.md): q/k norms start at head_dim**-0.25 (without it
the model never learns to copy); constant lr after warm-up, decayed linearly over the last 15% of the
run (its step budget, or its wall-clock budget when no step budget is given); batches are a pure function of (seed, step), so a resumed run replays the
same data, and `--resume` restores model, optimizer and step exactly.

Where the compute is: `--device cuda --bf16 --workers N` runs the same steps on a GPU in bf16
autocast, with batches built by N worker processes (`lab/model/loader.py`) and the checkpoint in
safetensors shards (`--max-shard-size`); `scripts/gpu/train.sh` is the one-command GPU run. The
defaults are the 2-core CPU's (one process, fp32), where a run is bit for bit what it was before.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import AutoTokenizer, DiffusionGemmaForBlockDiffusion, DynamicCache

from engines.defaults import CANVAS_SIZES
from lab.model.loader import batches
from lab.model.copying import COPY_FAMILIES, copy_accuracy
from lab.model.items import encode_prompt
from lab.model.tasks import AUX_FAMILIES, FAMILIES, LONG_FAMILIES, OPEN_FAMILIES, SHORT_FAMILIES, TaskItem, generate_suite, sample_item, score

OPT_IN_FAMILIES = ("tool",) + OPEN_FAMILIES + tuple(AUX_FAMILIES)  # weight 0 unless `family_weights` names them: configs written before they existed replay the same batches
# Families with long prompts (tool definitions, a response schema): trained in steps of their own
# ("tool steps"), so short steps do not pad every row to their length.
TOOL_STEP_FAMILIES = ("tool", "toolcall", "schema", "label", "wild")
STATE_FILE = "train_state.pt"  # optimizer + step + model state for --resume (never shipped)
LOG_FILE = "train_log.jsonl"


@dataclass
class TrainConfig:
    out: str = "runs/tandem-tiny"  # run directory: checkpoint, state and log
    seed: int = 0  # model init, tokenizer corpus and every batch derive from it
    minutes: float = 90.0  # wall-clock budget (stops early, saving a checkpoint)
    steps: int | None = None  # step budget; also sets where the final lr decay starts (None: constant lr)
    threads: int = 1  # torch threads
    init: str | None = None  # start from this checkpoint (weights + tokenizer) instead of from scratch
    # model (used only when training from scratch)
    hidden_size: int = 128
    num_layers: int = 3
    num_heads: int = 2
    head_dim: int = 32
    kv_heads: int = 1
    vocab_size: int = 2048
    canvas_length: int = 256
    tokenizer_items: int = 500  # train-split items per family for the BPE corpus
    tokenizer_rendered: bool = False  # BPE corpus: whole chat-templated prompts (system turn, schema, tools) instead of the user turn alone
    # optimisation
    lr: float = 2e-3
    warmup: int = 100
    decay_frac: float = 0.15  # final fraction of `steps` with linear decay to 10% of lr
    weight_decay: float = 0.01
    batch_short: int = 32  # rows per batch of short-family items
    batch_long: int = 10  # rows per batch of long-family canvases (each row is far longer)
    long_batch_prob: float = 0.2  # share of steps that train the long families
    short_canvas_probs: tuple[float, float, float] = (0.8, 0.17, 0.03)  # P(C = 64, 128, 256) on short steps
    long_chunk_probs: tuple[float, float, float] = (0.5, 0.35, 0.15)  # P(k = 0, 1, 2) on long steps
    offset_prob: float = 0.25  # rows whose canvas starts at a random point inside the answer (where verified drafts start)
    self_cond_prob: float = 0.5  # batches trained with a self-conditioning pass
    skeleton_prob: float = 0.0  # structured rows (items with meta["schema"]) whose canvas is skeleton-seeded
    t_floor: float = 0.05  # lowest corruption rate
    copy_first_steps: int = 0  # steps at the start that train the auxiliary "copy" family alone (0: none)
    family_weights: dict = field(default_factory=lambda: {"extract": 1.5, "classify": 0.3, "summarize": 0.6, "plan": 1.5, "code": 0.8, "reason": 1.0, "write": 1.0})
    # Families in OPT_IN_FAMILIES train only when `family_weights` names them (older configs replay the same batches).
    tool_batch_prob: float = 0.0  # share of all steps that train the "tool" family alone (its prompts are long; 0: it mixes into short steps)
    batch_tool: int = 16  # rows per batch of a tool step
    tool_canvas_probs: tuple[float, float, float] | None = None  # P(C = 64, 128, 256) on tool steps (None: short_canvas_probs)
    # progress
    log_every: int = 20  # steps
    eval_every_s: float = 300.0  # held-out exact-match check
    eval_items: int = 4  # per short family (plus 1 per long family, AR only)
    eval_items_by_family: dict = field(default_factory=dict)  # per-family overrides of `eval_items`, e.g. {"tool": 12}
    eval_block_open: bool = True  # decode the open families in plain block mode too (no skeleton: never valid; False saves the time)
    ckpt_every_s: float = 300.0
    ckpt_every_steps: int | None = None  # for tests: checkpoint on a step count instead
    # where the compute is (the defaults are the 2-core CPU's: one process, fp32)
    device: str = "cpu"  # "cpu", "cuda[:N]" or "auto" (CUDA when there is one)
    workers: int = 0  # processes building batches ahead of the loop (lab/model/loader.py; 0: the loop builds them)
    bf16: bool = False  # bf16 autocast on CUDA (losses stay fp32)
    max_shard_size: str | None = None  # checkpoint weights split into safetensors files of at most this much (e.g. "15MiB")


# --------------------------------------------------------------------------------------------
# pieces


def canvas_size_for(n_tokens: int, sizes: tuple[int, ...] = CANVAS_SIZES) -> int:
    """Smallest canvas that holds `n_tokens` answer tokens plus one EOS; the largest if none does."""
    for size in sizes:
        if n_tokens + 1 <= size:
            return size
    return sizes[-1]


def n_canvases(n_tokens: int, canvas: int = CANVAS_SIZES[-1]) -> int:
    """Consecutive full-size canvases an answer of `n_tokens` (+ EOS) needs."""
    return math.ceil((n_tokens + 1) / canvas)


def softcap(logits: torch.Tensor, cap: float | None) -> torch.Tensor:
    """Gemma's final logit soft-capping, tanh(x / cap) * cap, as the model applies to its decoder logits."""
    return logits if cap is None else torch.tanh(logits / cap) * cap


def encode_item(tokenizer, item: TaskItem) -> tuple[list[int], list[int]]:
    """(prompt ids, answer ids + EOS)."""
    answer = tokenizer(item.answer, add_special_tokens=False)["input_ids"]
    return encode_prompt(tokenizer, item.messages, item.tools), answer + [tokenizer.eos_token_id]


def family_weight(cfg: TrainConfig, family: str) -> float:
    """The sampling weight of `family`: its `family_weights` entry; 1.0 if absent, 0.0 for an absent OPT_IN family."""
    return cfg.family_weights.get(family, 0.0 if family in OPT_IN_FAMILIES else 1.0)


def corrupt(clean: torch.Tensor, t: torch.Tensor, vocab_size: int, gen: torch.Generator) -> torch.Tensor:
    """Uniform-noise forward process: each token becomes a uniform random id with probability t (per row).
    The noise comes from `gen`, a CPU generator (`t` on the CPU too), so a step's noise is the same on any device."""
    noise = torch.randint(0, vocab_size, clean.shape, generator=gen)
    hit = torch.rand(clean.shape, generator=gen) < t[:, None]  # (B, C)
    return torch.where(hit.to(clean.device), noise.to(clean.device), clean)


@dataclass
class Batch:
    input_ids: torch.Tensor  # (B, P + R) left-padded context | right-padded rest of answer
    attention_mask: torch.Tensor  # (B, P + R) 1 on real tokens
    ar_targets: torch.Tensor  # (B, P + R) next-token target at each position, -100 where not trained
    context_len: int  # P: the cache is cropped here before the decoder pass
    canvas: torch.Tensor  # (B, C) clean canvas: answer slice then EOS fill
    families: list[str]
    fixed: torch.Tensor | None = None  # (B, C) skeleton positions: given clean, not trained (None: none)

    def _map(self, fn) -> "Batch":
        tensors = {k: fn(getattr(self, k)) for k in ("input_ids", "attention_mask", "ar_targets", "canvas")}
        return replace(self, **tensors, fixed=None if self.fixed is None else fn(self.fixed))

    def to(self, device, non_blocking: bool = False) -> "Batch":
        return self._map(lambda t: t.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> "Batch":
        """Page-locked copies (the DataLoader calls this with pin_memory=True): host-to-GPU copies then overlap compute."""
        return self._map(lambda t: t.pin_memory())


def make_batch(tokenizer, cfg: TrainConfig, step: int) -> Batch:
    """The batch for `step`: a pure function of (cfg.seed, step)."""
    rng = random.Random(f"{cfg.seed}/batch/{step}")
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    # The first `copy_first_steps` steps train the "copy" family alone: an induction head forms there in a
    # few hundred steps, and one that never formed did not form on the whole mix in 6,700 (docs/model.md).
    copy_step = step < cfg.copy_first_steps
    long_step = not copy_step and rng.random() < cfg.long_batch_prob
    # Tool steps (drawn only when configured, so older configs replay their batches): the tool
    # family's prompts carry tool schemas (~300 tokens), and every row is padded to the longest
    # context, so mixing them into short steps would make every short step several times longer.
    tool_step = not (long_step or copy_step) and cfg.tool_batch_prob > 0 and rng.random() < cfg.tool_batch_prob / (1 - cfg.long_batch_prob)
    if long_step:
        families = LONG_FAMILIES
    elif tool_step:
        families = TOOL_STEP_FAMILIES
    elif copy_step:
        families = ("copy",)
    else:
        # auxiliary families last: at weight 0 they leave the draws of the others unchanged
        families = tuple(f for f in (*SHORT_FAMILIES, *AUX_FAMILIES) if not (cfg.tool_batch_prob > 0 and f in TOOL_STEP_FAMILIES))
    weights = [1.0] if copy_step else [family_weight(cfg, f) for f in families]
    if long_step:
        size, k = CANVAS_SIZES[-1], rng.choices(range(3), cfg.long_chunk_probs)[0]
        rows = cfg.batch_long
    else:
        probs = cfg.tool_canvas_probs if tool_step and cfg.tool_canvas_probs else cfg.short_canvas_probs
        size, k = rng.choices(CANVAS_SIZES, probs)[0], 0
        rows = cfg.batch_tool if tool_step else cfg.batch_short
    picked, offsets, seeded = [], [], []
    while len(picked) < rows:
        family = rng.choices(families, weights)[0]
        item = sample_item(family, rng)
        prompt, answer = encode_item(tokenizer, item)
        if k == 0 and len(answer) > size and not long_step:
            continue  # short steps only take answers that fit the canvas
        if long_step and n_canvases(len(answer) - 1, size) <= k:
            continue
        picked.append((family, prompt, answer))
        # Block mode starts canvases at canvas boundaries; verified mode drafts from wherever the
        # last round stopped, so some rows put the canvas at a random point inside the answer.
        offsets.append(rng.randrange(1, len(answer)) if rng.random() < cfg.offset_prob else k * size)
        # Structured rows may get the canvas serving gives them: the skeleton fixed, values in slots.
        seeded.append(skeleton_canvas(tokenizer, item, size) if k == 0 and "schema" in item.meta
                      and cfg.skeleton_prob > 0 and rng.random() < cfg.skeleton_prob else None)
        if seeded[-1] is not None:
            offsets[-1] = 0
    contexts = [p + a[:o] for (_, p, a), o in zip(picked, offsets)]
    rests = [a[o:] for (_, p, a), o in zip(picked, offsets)]
    P, R = max(map(len, contexts)), max(map(len, rests))
    B = len(picked)
    input_ids = torch.full((B, P + R), pad, dtype=torch.long)
    attention_mask = torch.zeros((B, P + R), dtype=torch.long)
    ar_targets = torch.full((B, P + R), -100, dtype=torch.long)
    canvas = torch.full((B, size), eos, dtype=torch.long)
    for i, ((_, prompt, answer), ctx, rest) in enumerate(zip(picked, contexts, rests)):
        row = torch.tensor(ctx + rest)
        start = P - len(ctx)
        input_ids[i, start : P + len(rest)] = row
        attention_mask[i, start : P + len(rest)] = 1
        # answer tokens (and EOS) are predicted from the position before each
        first_answer = start + len(prompt)
        ar_targets[i, first_answer - 1 : P + len(rest) - 1] = input_ids[i, first_answer : P + len(rest)]
        piece = rest[:size]
        canvas[i, : len(piece)] = torch.tensor(piece)
    fixed = None
    if any(x is not None for x in seeded):
        fixed = torch.zeros((B, size), dtype=torch.bool)
        for i, x in enumerate(seeded):
            if x is not None:
                canvas[i], fixed[i] = torch.tensor(x[0]), torch.tensor(x[1])
    return Batch(input_ids, attention_mask, ar_targets, P, canvas, [f for f, _, _ in picked], fixed)


def skeleton_canvas(tokenizer, item: TaskItem, size: int) -> tuple[list[int], list[bool]] | None:
    """(clean canvas, fixed mask) of a structured item laid out as serving seeds it, or None when
    its answer does not fit `size` (the row then trains on the plain canvas)."""
    from engines.skeleton import template_for_schema, template_for_tool_choice
    from engines.modes.seeded_layout import layout_for_answer

    if "tool" in item.meta:  # as the gateway seeds a required call: one tool's whole call, or the name among several
        template = template_for_tool_choice([(t["name"], t["parameters"]) for t in item.tools])
        answer = item.meta["fields"] if len(item.tools) == 1 else {"name": item.meta["tool"], "arguments": item.meta["fields"]}
    else:
        template, answer = template_for_schema(item.meta["schema"]), item.meta["fields"]
    encode = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    laid = layout_for_answer(template, answer, encode, tokenizer.eos_token_id, size)
    if laid is None:
        return None
    layout, canvas = laid
    return canvas, layout.fixed


def new_cache(model: DiffusionGemmaForBlockDiffusion) -> DynamicCache:
    return DynamicCache(config=model.config.get_text_config(decoder=True))


def losses(model: DiffusionGemmaForBlockDiffusion, batch: Batch, cfg: TrainConfig, gen: torch.Generator, self_cond: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(encoder next-token loss, decoder denoising loss) for one batch."""
    cap = model.config.get_text_config().final_logit_softcapping
    vocab = model.config.get_text_config().vocab_size
    cache = new_cache(model)
    enc = model.model.encoder(input_ids=batch.input_ids, attention_mask=batch.attention_mask, cache=cache)
    trained = batch.ar_targets != -100  # (B, S)
    ar_logits = softcap(model.lm_head(enc.last_hidden_state[trained]), cap)  # (N, V)
    enc_loss = F.cross_entropy(ar_logits.float(), batch.ar_targets[trained])

    extra = batch.input_ids.shape[1] - batch.context_len
    if extra:
        cache.crop(-extra)  # negative: tokens to remove (a positive value is the legacy absolute size, refused)
    B, C = batch.canvas.shape
    dev = batch.canvas.device
    t = cfg.t_floor + (1 - cfg.t_floor) * torch.rand(B, generator=gen)  # on the CPU, as `gen`
    noisy = corrupt(batch.canvas, t, vocab, gen)  # (B, C)
    if batch.fixed is not None:  # a skeleton is given clean, and is certain to self-conditioning (as in engines.modes.seeded)
        noisy = torch.where(batch.fixed, batch.canvas, noisy)
        certain = torch.full((B, C, vocab), float("-inf"), device=dev).scatter_(-1, batch.canvas[..., None], 0.0)
    dec_mask = torch.cat([batch.attention_mask[:, : batch.context_len], torch.ones(B, C, dtype=torch.long, device=dev)], dim=1)

    def decode(sc_logits):
        hidden = model.model.decoder(decoder_input_ids=noisy, cache=cache, decoder_attention_mask=dec_mask, self_conditioning_logits=sc_logits).last_hidden_state
        return softcap(model.lm_head(hidden), cap)  # (B, C, V)

    sc_logits = None
    if self_cond:
        with torch.no_grad():
            sc_logits = decode(None)
            if batch.fixed is not None:
                sc_logits = torch.where(batch.fixed[..., None], certain, sc_logits)
    logits = decode(sc_logits)
    targets = batch.canvas if batch.fixed is None else batch.canvas.masked_fill(batch.fixed, -100)  # skeleton: not trained
    dec_loss = F.cross_entropy(logits.reshape(-1, vocab).float(), targets.reshape(-1))
    return enc_loss, dec_loss


def resolve_device(name: str) -> torch.device:
    """`cfg.device` as a torch device; "auto" is CUDA when this machine has it."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


def lr_at(step: int, cfg: TrainConfig, elapsed_s: float = 0.0) -> float:
    """Linear warm-up, then constant, then a linear decay to 10% over the last `decay_frac` of the run.

    The run's length is `steps` when given (deterministic); otherwise the wall-clock budget, so a
    time-bounded run on a machine of unknown speed still ends on its decay.
    """
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = step / cfg.steps if cfg.steps else elapsed_s / (cfg.minutes * 60)
    start = 1 - cfg.decay_frac
    if progress >= start:
        return cfg.lr * (1 - 0.9 * min(1.0, (progress - start) / cfg.decay_frac))
    return cfg.lr


# --------------------------------------------------------------------------------------------
# model, tokenizer, checkpoints


def build_tokenizer(cfg: TrainConfig):
    from lab.model.tokenizer import train_tokenizer

    texts = []
    render = None
    if cfg.tokenizer_rendered:  # the prompt as the model reads it: schema turns and tool JSON shrink most
        from lab.model.tiny import tiny_tokenizer

        render = tiny_tokenizer()
    for item in generate_suite(cfg.tokenizer_items, "train", cfg.seed):
        if render is None:
            texts += [item.prompt, item.answer]
        else:
            kwargs = {"tools": item.tools} if item.tools else {}
            texts += [render.apply_chat_template(item.messages, add_generation_prompt=True, tokenize=False, **kwargs), item.answer]
    return train_tokenizer(texts, vocab_size=cfg.vocab_size)


def build_model(tokenizer, cfg: TrainConfig) -> DiffusionGemmaForBlockDiffusion:
    from engines.model.generation import default_generation_config
    from lab.model.tiny import init_qk_norms, tiny_config

    config = tiny_config(tokenizer, canvas_length=cfg.canvas_length, hidden_size=cfg.hidden_size, num_layers=cfg.num_layers,
                         num_heads=cfg.num_heads, head_dim=cfg.head_dim, num_kv_heads=cfg.kv_heads)
    torch.manual_seed(cfg.seed)
    model = DiffusionGemmaForBlockDiffusion(config)
    init_qk_norms(model)
    model.generation_config = default_generation_config(config)
    return model


def save_checkpoint(model, tokenizer, out: Path, max_shard_size: str | None = None) -> None:
    """The shippable part: safetensors weights (in files of at most `max_shard_size` each, with an
    index, when given), config, generation config, tokenizer."""
    from engines.model.generation import default_generation_config

    out.mkdir(parents=True, exist_ok=True)
    model.generation_config = default_generation_config(model.config)
    model.save_pretrained(out, **({"max_shard_size": size_in_bytes(max_shard_size)} if max_shard_size else {}))
    tokenizer.save_pretrained(out)


def size_in_bytes(text: str) -> int:
    """'15MiB', '100KiB', '1GiB' (binary), '16MB' (decimal) or a plain byte count, as bytes
    (huggingface_hub's shard splitter reads decimal units only)."""
    units = {"kib": 2**10, "mib": 2**20, "gib": 2**30, "kb": 10**3, "mb": 10**6, "gb": 10**9, "b": 1}
    low = text.strip().lower()
    for unit, factor in units.items():
        if low.endswith(unit):
            return int(float(low[: -len(unit)]) * factor)
    return int(low)


def save_state(model, opt, step: int, elapsed: float, out: Path) -> None:
    tmp = out / (STATE_FILE + ".tmp")
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step, "elapsed": elapsed}, tmp)
    tmp.replace(out / STATE_FILE)


def make_optimizer(model, cfg: TrainConfig) -> torch.optim.Optimizer:
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "norm" not in n]
    rest = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and "norm" not in n)]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": rest, "weight_decay": 0.0}]
    # On CUDA, one fused kernel for the whole update: a tiny model's step is bound by kernel launches there.
    fused = next(model.parameters()).device.type == "cuda"
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.98), **({"fused": True} if fused else {}))


# --------------------------------------------------------------------------------------------
# held-out check


@torch.no_grad()
def greedy_ar(model, tokenizer, prompt_ids: list[int], max_new_tokens: int) -> list[int]:
    """Plain greedy AR decode through the encoder and its KV cache (batch 1)."""
    cap = model.config.get_text_config().final_logit_softcapping
    stop = set(model.config.get_text_config().eos_token_id)
    cache = new_cache(model)
    ids = torch.tensor([prompt_ids], device=model.device)
    out: list[int] = []
    pos = 0
    for _ in range(max_new_tokens):
        position_ids = torch.arange(pos, pos + ids.shape[1], device=model.device)[None]
        hidden = model.model.encoder(input_ids=ids, cache=cache, position_ids=position_ids).last_hidden_state
        pos += ids.shape[1]
        token = int(softcap(model.lm_head(hidden[:, -1]), cap).argmax(-1))
        if token in stop:
            break
        out.append(token)
        ids = torch.tensor([[token]], device=model.device)
    return out


@torch.no_grad()
def block_decode(model, tokenizer, prompt_ids: list[int], canvas: int, steps: int = 12, seed: int = 0, canvases: int = 1) -> list[int]:
    """Block mode through the library's `generate()`: up to `canvases` canvases of `canvas` tokens (batch 1)."""
    saved = model.config.canvas_length
    model.config.canvas_length = canvas
    try:
        torch.manual_seed(seed)
        out = model.generate(torch.tensor([prompt_ids], device=model.device), max_new_tokens=canvas * canvases, max_denoising_steps=steps)
    finally:
        model.config.canvas_length = saved
    seq = out.sequences if hasattr(out, "sequences") else out
    new = seq[0, len(prompt_ids) :].tolist()
    stop = set(model.config.get_text_config().eos_token_id) | {tokenizer.pad_token_id}
    for i, tok in enumerate(new):
        if tok in stop:
            return new[:i]
    return new


def evaluate(model, tokenizer, items: list[TaskItem], modes: tuple[str, ...] = ("ar", "block"), long_block: bool = False, steps: int = 12,
             fields: bool = False, block_skip: tuple[str, ...] = ()) -> dict:
    """Exact match per family and mode on `items`. Long families run in block mode only with `long_block`
    (consecutive 256-token canvases); families in `block_skip` not at all. With `fields`, the family
    score (field exact for extract and the open families) too, under "<mode>_field"."""
    was_training = model.training
    model.eval()
    results: dict[str, dict[str, list[float]]] = {}
    for item in items:
        prompt = encode_prompt(tokenizer, item.messages, item.tools)
        n = item.output_tokens or item.count_tokens(tokenizer)
        for mode in modes:
            if mode == "block" and ((FAMILIES[item.family].long and not long_block) or item.family in block_skip):
                continue
            if mode == "ar":
                ids = greedy_ar(model, tokenizer, prompt, max_new_tokens=n + 8)
            elif FAMILIES[item.family].long:
                ids = block_decode(model, tokenizer, prompt, canvas=CANVAS_SIZES[-1], steps=steps, canvases=n_canvases(n))
            else:
                ids = block_decode(model, tokenizer, prompt, canvas=canvas_size_for(n), steps=steps)
            text = tokenizer.decode(ids, skip_special_tokens=True)
            got = score(item, text)
            results.setdefault(mode, {}).setdefault(item.family, []).append(got.exact)
            if fields:
                results.setdefault(f"{mode}_field", {}).setdefault(item.family, []).append(got.family_score)
    model.train(was_training)
    return {mode: {f: round(sum(v) / len(v), 4) for f, v in fams.items()} for mode, fams in results.items()}


# --------------------------------------------------------------------------------------------
# loop


def train(cfg: TrainConfig, resume: bool = False, max_steps: int | None = None) -> dict:
    """Run training; returns the final summary (step, losses, last eval). `max_steps` caps this call."""
    torch.set_num_threads(cfg.threads)
    device = resolve_device(cfg.device)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    state_path = out / STATE_FILE
    step, elapsed_before = 0, 0.0
    if resume and state_path.exists():
        tokenizer = AutoTokenizer.from_pretrained(out, local_files_only=True)
        model = DiffusionGemmaForBlockDiffusion.from_pretrained(out, local_files_only=True)
        state = torch.load(state_path, weights_only=False, map_location="cpu")
        model.load_state_dict(state["model"])
        model.to(device)
        opt = make_optimizer(model, cfg)  # on the parameters' device: load_state_dict moves its state there
        opt.load_state_dict(state["optimizer"])
        step, elapsed_before = state["step"], state["elapsed"]
        print(f"resumed {out} at step {step} ({elapsed_before / 60:.1f} min trained)", flush=True)
    else:
        if cfg.init:
            tokenizer = AutoTokenizer.from_pretrained(cfg.init, local_files_only=True)
            model = DiffusionGemmaForBlockDiffusion.from_pretrained(cfg.init, local_files_only=True)
        else:
            tokenizer = build_tokenizer(cfg)
            model = build_model(tokenizer, cfg)
        tokenizer.padding_side = "left"
        model.to(device)
        opt = make_optimizer(model, cfg)
        (out / "train_config.json").write_text(json.dumps(asdict(cfg), indent=1))
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    where = f"{cfg.threads} thread(s)" if device.type == "cpu" else f"{device}{', bf16 autocast' if cfg.bf16 else ''}"
    print(f"model: {n_params / 1e6:.2f} M parameters, vocab {len(tokenizer)}, {where}, {cfg.workers} batch worker(s)", flush=True)

    eval_items = [
        item for f in SHORT_FAMILIES if family_weight(cfg, f) > 0 for item in generate_suite(cfg.eval_items_by_family.get(f, cfg.eval_items), "val", cfg.seed, (f,))
    ] + generate_suite(1, "val", cfg.seed, LONG_FAMILIES)
    log = open(out / LOG_FILE, "a")
    t0 = time.time()
    last_eval = last_ckpt = t0
    window = {"enc": 0.0, "dec": 0.0, "tokens": 0, "n": 0, "t": t0}
    last_eval_result: dict = {}
    best_score = json.loads((out / "best" / "best_eval.json").read_text())["score"] if (out / "best" / "best_eval.json").exists() else -1.0
    budget_s = cfg.minutes * 60
    stop_step = cfg.steps if cfg.steps else None
    this_call = 0

    def checkpoint():
        save_checkpoint(model, tokenizer, out, cfg.max_shard_size)
        save_state(model, opt, step, elapsed_before + time.time() - t0, out)

    stream = batches(make_batch, tokenizer, cfg, step, cfg.workers, pin_memory=device.type == "cuda")
    # bf16 autocast on CUDA: matmuls in bf16, the losses' softmax in fp32 (`losses` casts); off on the CPU
    autocast = torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=cfg.bf16 and device.type == "cuda")
    while True:
        elapsed = elapsed_before + time.time() - t0
        if (stop_step is not None and step >= stop_step) or elapsed >= budget_s or (max_steps is not None and this_call >= max_steps):
            break
        batch = next(stream)
        n_tokens = int(batch.attention_mask.sum()) + batch.canvas.numel()  # counted on the host copy: no device sync
        batch = batch.to(device, non_blocking=True)
        gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)
        self_cond = random.Random(f"{cfg.seed}/sc/{step}").random() < cfg.self_cond_prob
        for group in opt.param_groups:
            group["lr"] = lr_at(step, cfg, elapsed_before + time.time() - t0)
        with autocast:
            enc_loss, dec_loss = losses(model, batch, cfg, gen, self_cond)
        loss = enc_loss + dec_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        this_call += 1
        # summed on the device in float64 (the sum .item() would give, without a host sync per step)
        window["enc"] += enc_loss.detach().double()
        window["dec"] += dec_loss.detach().double()
        window["tokens"] += n_tokens
        window["n"] += 1

        now = time.time()
        if step % cfg.log_every == 0:
            dt = now - window["t"]
            elapsed = elapsed_before + now - t0
            remaining = budget_s - elapsed
            if cfg.steps:
                remaining = min(remaining, (cfg.steps - step) * dt / window["n"])
            rec = {
                "step": step, "enc_loss": round(float(window["enc"]) / window["n"], 4), "dec_loss": round(float(window["dec"]) / window["n"], 4),
                "tok_s": round(window["tokens"] / dt), "s_per_step": round(dt / window["n"], 3), "lr": round(opt.param_groups[0]["lr"], 6),
                "elapsed_min": round(elapsed / 60, 2), "eta_min": round(remaining / 60, 1),
            }
            print(" ".join(f"{k}={v}" for k, v in rec.items()), flush=True)
            log.write(json.dumps(rec) + "\n")
            log.flush()
            window = {"enc": 0.0, "dec": 0.0, "tokens": 0, "n": 0, "t": time.time()}
        if now - last_eval >= cfg.eval_every_s:
            te = time.time()
            last_eval_result = evaluate(model, tokenizer, eval_items, fields=True, block_skip=() if cfg.eval_block_open else OPEN_FAMILIES)
            rec = {"step": step, "eval": last_eval_result}
            copied = [i for i in eval_items if i.family in COPY_FAMILIES]
            if copied:  # teacher-forced: far less noisy than a few decoded items while copying is being learned
                rec["copy"] = copy_accuracy(model, tokenizer, copied)
            rec["eval_s"] = round(time.time() - te, 1)
            # the best checkpoint so far by AR field exact on the open families and extract (their mean), in out/best
            watched = [v for f, v in last_eval_result.get("ar_field", {}).items() if f in OPEN_FAMILIES + ("extract",)]
            if watched and sum(watched) / len(watched) > best_score:
                best_score = sum(watched) / len(watched)
                save_checkpoint(model, tokenizer, out / "best", cfg.max_shard_size)
                (out / "best" / "best_eval.json").write_text(json.dumps(rec | {"score": round(best_score, 4)}, indent=1))
                rec["best"] = round(best_score, 4)
            print(json.dumps(rec), flush=True)
            log.write(json.dumps(rec) + "\n")
            log.flush()
            last_eval = time.time()
            window["t"] += last_eval - te  # keep eval time out of tokens/s
        due = (cfg.ckpt_every_steps and step % cfg.ckpt_every_steps == 0) or (not cfg.ckpt_every_steps and now - last_ckpt >= cfg.ckpt_every_s)
        if due:
            checkpoint()
            last_ckpt = time.time()
    del stream  # stops the batch workers
    checkpoint()
    log.close()
    return {"step": step, "enc_loss": enc_loss.item() if this_call else None, "dec_loss": dec_loss.item() if this_call else None, "eval": last_eval_result, "model": model}


def main(args: argparse.Namespace) -> int:
    cfg = TrainConfig(
        out=args.out, seed=args.seed, minutes=args.minutes, threads=args.threads, init=args.init,
        steps=getattr(args, "steps", None), lr=args.lr, warmup=args.warmup, decay_frac=args.decay_frac,
    )
    # Options only `python -m lab.model.train` takes (the `tandem train` CLI keeps the defaults).
    if getattr(args, "family_weights", None):
        cfg.family_weights = json.loads(args.family_weights)
    for name in ("tool_batch_prob", "batch_tool", "long_batch_prob", "eval_every_s", "eval_items", "skeleton_prob", "copy_first_steps", "hidden_size", "num_layers",
                 "num_heads", "head_dim", "kv_heads", "vocab_size", "ckpt_every_s", "batch_short", "batch_long", "device", "workers",
                 "max_shard_size", "tokenizer_items", "log_every"):
        if getattr(args, name, None) is not None:
            setattr(cfg, name, getattr(args, name))
    if getattr(args, "tool_canvas_probs", None):
        cfg.tool_canvas_probs = tuple(json.loads(args.tool_canvas_probs))
    if getattr(args, "eval_items_by_family", None):
        cfg.eval_items_by_family = json.loads(args.eval_items_by_family)
    if getattr(args, "short_canvas_probs", None):
        cfg.short_canvas_probs = tuple(json.loads(args.short_canvas_probs))
    cfg.tokenizer_rendered = bool(getattr(args, "tokenizer_rendered", False))
    cfg.eval_block_open = not getattr(args, "no_eval_block_open", False)
    cfg.bf16 = bool(getattr(args, "bf16", False))
    summary = train(cfg, resume=args.resume)
    print(f"done: step {summary['step']}, checkpoint in {cfg.out}", flush=True)
    return 0


def _steps(text: str) -> int:
    """A step count: a whole number, 0 or more (argparse names the flag in its refusal)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of steps, got {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {n}")
    return n


def parser() -> argparse.ArgumentParser:
    """`tandem train`'s options plus the family mix and tool steps (used for the stage-3 tool fine-tune)."""
    p = argparse.ArgumentParser(prog="python -m lab.model.train", description=__doc__.split("\n")[0])
    p.add_argument("--out", default="runs/tandem-tiny", help="run directory: checkpoint, train_state.pt, train_log.jsonl")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument("--minutes", type=float, default=90.0, help="wall-clock budget, counted across resumes")
    p.add_argument("--steps", type=int, default=None, help="step budget (default: the --minutes budget alone)")
    p.add_argument("--init", default=None, help="start from this checkpoint directory instead of from scratch")
    p.add_argument("--lr", type=float, default=2e-3, help="peak learning rate")
    p.add_argument("--warmup", type=int, default=100, help="linear warm-up steps")
    p.add_argument("--decay-frac", type=float, default=0.15, help="final share of the run with linear lr decay to 10%%")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--family-weights", default=None, help='JSON object, e.g. \'{"extract": 1.5, "tool": 2.0}\' (replaces the default mix)')
    p.add_argument("--tool-batch-prob", type=float, default=None, help="share of steps that train the tool family alone (default 0: mixed into short steps)")
    p.add_argument("--batch-tool", type=int, default=None, help="rows per tool step (default 16)")
    p.add_argument("--long-batch-prob", type=float, default=None, help="share of steps that train the long families (default 0.2)")
    p.add_argument("--eval-every-s", type=float, default=None, help="seconds between held-out checks (default 300)")
    p.add_argument("--eval-items", type=int, default=None, help="held-out items per short family in each check (default 4)")
    p.add_argument("--tool-canvas-probs", default=None, help="JSON list P(C = 64, 128, 256) on tool steps, e.g. [0.3, 0.7, 0]")
    p.add_argument("--skeleton-prob", type=float, default=None, help="share of structured rows trained on skeleton-seeded canvases (default 0)")
    p.add_argument("--copy-first-steps", type=_steps, default=None, help='steps at the start on the "copy" family alone, so an induction head forms (default 0)')
    p.add_argument("--eval-items-by-family", default=None, help='JSON object of per-family overrides, e.g. \'{"tool": 12}\'')
    p.add_argument("--short-canvas-probs", default=None, help="JSON list P(C = 64, 128, 256) on short steps (default [0.8, 0.17, 0.03])")
    p.add_argument("--batch-short", type=int, default=None, help="rows per short step (default 32)")
    p.add_argument("--batch-long", type=int, default=None, help="rows per long step (default 10)")
    p.add_argument("--device", default=None, help="cpu (default), cuda[:N] or auto")
    p.add_argument("--workers", type=int, default=None, help="processes building batches ahead of the loop (default 0: the loop builds them)")
    p.add_argument("--bf16", action="store_true", help="bf16 autocast on CUDA")
    p.add_argument("--max-shard-size", default=None, help='checkpoint weights in safetensors files of at most this size, e.g. "15MiB"')
    p.add_argument("--log-every", type=int, default=None, help="steps between log lines (default 20)")
    p.add_argument("--ckpt-every-s", type=float, default=None, help="seconds between checkpoints (default 300)")
    p.add_argument("--no-eval-block-open", action="store_true", help="held-out checks decode the open families in AR only (plain block never validates)")
    # a fresh model (ignored with --init or --resume)
    p.add_argument("--hidden-size", type=int, default=None, help="fresh model: width (default 128)")
    p.add_argument("--num-layers", type=int, default=None, help="fresh model: layers (default 3)")
    p.add_argument("--num-heads", type=int, default=None, help="fresh model: attention heads (default 2)")
    p.add_argument("--head-dim", type=int, default=None, help="fresh model: head width (default 32)")
    p.add_argument("--kv-heads", type=int, default=None, help="fresh model: key/value heads (default 1)")
    p.add_argument("--vocab-size", type=int, default=None, help="fresh model: BPE vocabulary (default 2048)")
    p.add_argument("--tokenizer-items", type=int, default=None, help="fresh model: train-split items per family in the BPE corpus (default 500)")
    p.add_argument("--tokenizer-rendered", action="store_true", help="fresh model: train the BPE on whole chat-templated prompts (schemas, tool JSON)")
    return p


if __name__ == "__main__":
    raise SystemExit(main(parser().parse_args()))


__all__ = ["TrainConfig", "train", "make_batch", "losses", "canvas_size_for", "n_canvases", "corrupt", "evaluate", "greedy_ar", "block_decode", "main"]
