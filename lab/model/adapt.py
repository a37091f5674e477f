"""Adapt an imported DiffusionGemma (the embedded Gemma 3 270M) with both objectives, as LoRA adapters.

The imported base is exact in AR and has never denoised. One step trains, on one batch of the task
suite (lab/model/train.py's `make_batch`: chat-templated prompts, answers, canvases):

1. **AR** (the encoder): next-token cross-entropy on the answer and its EOS, so the model answers
   in the formats the gateway reads (JSON, `<tool_call>`, labels) and verified mode checks well;
2. **denoising** (the decoder): cross-entropy on a corrupted canvas after the prompt's KV, most rows
   skeleton-seeded as serving seeds them (a schema's braces, keys and quotes given, only the value
   slots noised and trained), the rest plain canvases; half the batches with self-conditioning.

Only the adapters train: LoRA (`peft`) on every attention and MLP projection, separate for the
encoder and the decoder (their base weights are shared; their jobs are not), plus the decoder's
self-conditioning block, which is new. The base stays frozen and shared, so a step costs the
activations' memory only. Adapters are written as bf16 safetensors (`save_adapters`) and merged
into the base at load (engines.model.adapters).

Progress is judged on a held-out split of the suite, teacher-forced (cheap on a CPU): AR token
accuracy on answers, and slot accuracy of one decoder pass over a fully noised skeleton canvas. The
best adapters so far are kept in `out/best`. Batches are a pure function of (seed, step), so a run
resumed from its adapters and step replays the same data (the optimizer's moments restart).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from engines.model.logits import self_conditioned_by
from lab.model.train import Batch, TrainConfig, corrupt, encode_item, make_batch, new_cache, skeleton_canvas, softcap
from lab.model.tasks import FAMILIES, generate_suite

ADAPTED_FAMILIES = {"schema": 2.0, "wild": 3.0, "toolcall": 3.0, "label": 1.0, "tool": 1.0, "extract": 1.0, "classify": 0.5, "summarize": 0.5, "plan": 0.5}
LORA_TARGETS = r"model\.(encoder\.language_model|decoder)\.layers\.\d+\.(self_attn\.(q|k|v|o)_proj|mlp\.(gate|up|down)_proj)"
STATE = "adapt_state.json"


@dataclass
class AdaptConfig:
    out: str = "~/.cache/tandem/runs/gemma3-270m-adapt"  # run directory: adapters, best adapters, log
    ship: str | None = None  # also write each new best here (the shipped adapters, engines/checkpoints/...)
    base: str | None = None  # checkpoint directory to adapt (None: the imported Gemma 3 270M)
    seed: int = 0
    minutes: float = 180.0  # wall-clock budget of this call
    steps: int | None = None  # step budget (None: until `minutes`)
    threads: int = 2
    device: str = "cpu"
    bf16: bool = False  # bf16 autocast (CPUs with AVX-512 BF16, GPUs): ~1.3x a CPU step here, the same losses to 1e-2
    # adapters
    rank: int = 16
    alpha: int = 32
    # optimisation: constant lr after warm-up (ENVIRONMENT.md: decay kept small models on their plateau)
    lr: float = 4e-4
    warmup: int = 20
    rows: int = 4  # rows per batch
    skeleton_prob: float = 0.75  # structured rows whose canvas is skeleton-seeded
    self_cond_prob: float = 0.5
    # steps that train the encoder (AR) too; the rest run it without gradients and train the decoder alone
    # (the imported base already writes AR well; an encoder backward is most of a step's cost on a CPU)
    ar_prob: float = 0.3
    families: dict = field(default_factory=lambda: dict(ADAPTED_FAMILIES))
    canvas_probs: tuple[float, float, float] = (0.9, 0.1, 0.0)  # P(C = 64, 128, 256)
    # progress
    log_every: int = 5
    eval_every_s: float = 900.0
    eval_items: int = 6  # per family, held-out split
    save_every_s: float = 600.0

    def train_config(self) -> TrainConfig:
        """The batch recipe of lab/model/train.py with this run's mix (short steps only: no long families)."""
        return TrainConfig(seed=self.seed, long_batch_prob=0.0, batch_short=self.rows, family_weights=self.families,
                           short_canvas_probs=self.canvas_probs, skeleton_prob=self.skeleton_prob,
                           self_cond_prob=self.self_cond_prob, offset_prob=0.1)


def soft_embeddings(model, hidden: torch.Tensor, clean: torch.Tensor, trained: torch.Tensor) -> torch.Tensor:
    """The self-conditioning signal (B, C, H) serving feeds the next step: softmax of the step's logits times the
    embeddings, computed only where a position is trained; a given (skeleton) position is certain of its token,
    so its signal is that token's embedding (what one-hot logits give, without the vocabulary-wide work)."""
    embed = model.model.decoder.embed_tokens
    scale = embed.embed_scale.to(hidden.dtype)
    out = embed.weight[clean] * scale  # (B, C, H)
    logits = softcap(model.lm_head(hidden[trained]), model.config.get_text_config().final_logit_softcapping)  # (N, V)
    out[trained] = (torch.softmax(logits.float(), -1).to(embed.weight.dtype) @ embed.weight * scale).to(out.dtype)
    return out


def adapt_losses(model, batch: Batch, cfg: AdaptConfig, gen: torch.Generator, self_cond: bool, train_encoder: bool):
    """(AR loss or None, denoising loss) of one batch; logits only where a loss or a signal reads them."""
    text = model.config.get_text_config()
    cache = new_cache(model)
    trained_ar = batch.ar_targets != -100  # (B, S)
    with torch.set_grad_enabled(train_encoder):
        enc = model.model.encoder(input_ids=batch.input_ids, attention_mask=batch.attention_mask, cache=cache)
        enc_loss = None
        if train_encoder:
            ar_logits = softcap(model.lm_head(enc.last_hidden_state[trained_ar]), text.final_logit_softcapping)  # (N, V)
            enc_loss = torch.nn.functional.cross_entropy(ar_logits.float(), batch.ar_targets[trained_ar])
    extra = batch.input_ids.shape[1] - batch.context_len
    if extra:
        cache.crop(-extra)  # the decoder must not see the answer
    B, C = batch.canvas.shape
    t = 0.05 + 0.95 * torch.rand(B, generator=gen)
    noisy = corrupt(batch.canvas, t, text.vocab_size, gen)  # (B, C)
    fixed = batch.fixed if batch.fixed is not None else torch.zeros_like(batch.canvas, dtype=torch.bool)
    noisy = torch.where(fixed, batch.canvas, noisy)
    trained = ~fixed  # (B, C): the skeleton is given, not trained
    mask = torch.cat([batch.attention_mask[:, : batch.context_len], torch.ones(B, C, dtype=torch.long)], dim=1)

    def decode(signal):
        with self_conditioned_by(model, signal):
            return model.model.decoder(decoder_input_ids=noisy, cache=cache, decoder_attention_mask=mask).last_hidden_state

    signal = None
    if self_cond:
        with torch.no_grad():
            signal = soft_embeddings(model, decode(None), batch.canvas, trained)
    hidden = decode(signal)  # (B, C, H)
    logits = softcap(model.lm_head(hidden[trained]), text.final_logit_softcapping)  # (N, V)
    dec_loss = torch.nn.functional.cross_entropy(logits.float(), batch.canvas[trained])
    return enc_loss, dec_loss


def lora_config(cfg: AdaptConfig):
    from peft import LoraConfig

    return LoraConfig(r=cfg.rank, lora_alpha=cfg.alpha, lora_dropout=0.0, target_modules=LORA_TARGETS,
                      modules_to_save=["self_conditioning"], bias="none")


def load_base(cfg: AdaptConfig):
    from engines.model.gemma3_import import import_gemma3
    from engines.model.loading import load_checkpoint

    return load_checkpoint(cfg.base or import_gemma3(), device=cfg.device)


def save_adapters(peft_model, out: Path, meta: dict) -> None:
    """The adapters as bf16 safetensors with peft's config (merged at load by engines.model.adapters)."""
    from peft import get_peft_model_state_dict
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in get_peft_model_state_dict(peft_model).items()}
    tmp = out / "adapter_model.safetensors.tmp"
    save_file(state, str(tmp), metadata={"format": "pt"})
    tmp.replace(out / "adapter_model.safetensors")
    peft_model.peft_config["default"].save_pretrained(str(out))
    (out / "adapter_meta.json").write_text(json.dumps(meta, indent=1))


def save_latest(peft_model, out: Path, ship: Path | None, step: int) -> None:
    """The run's latest adapters, in the run directory and, with a ship directory, in its `resume/` (committed with
    the best ones, so that a new machine goes on from here; never merged at load)."""
    save_adapters(peft_model, out, {"step": step})
    if ship is not None:
        save_adapters(peft_model, ship / "resume", {"step": step})


@torch.no_grad()
def held_out(model, tokenizer, items) -> dict:
    """Teacher-forced accuracy on held-out items: AR next tokens on the answer; decoder slots of a fully
    noised skeleton canvas (structured items) after one pass."""
    ar_right = ar_total = slot_right = slot_total = 0
    vocab = model.config.get_text_config().vocab_size
    cap = model.config.get_text_config().final_logit_softcapping
    for item in items:
        prompt, answer = encode_item(tokenizer, item)
        ids = torch.tensor([prompt + answer], device=model.device)
        cache = new_cache(model)
        hidden = model.model.encoder(input_ids=ids, cache=cache).last_hidden_state[0, len(prompt) - 1 : -1]
        ar_right += int((model.lm_head(hidden).argmax(-1).cpu() == torch.tensor(answer)).sum())
        ar_total += len(answer)
        seeded = skeleton_canvas(tokenizer, item, 64) if "schema" in item.meta else None
        if seeded is None:
            continue
        canvas, fixed = torch.tensor([seeded[0]]), torch.tensor([seeded[1]])
        cache.crop(-len(answer))
        noisy = corrupt(canvas, torch.ones(1), vocab, torch.Generator().manual_seed(0))
        noisy = torch.where(fixed, canvas, noisy).to(model.device)
        mask = torch.ones(1, len(prompt) + canvas.shape[1], dtype=torch.long, device=model.device)
        out = model.model.decoder(decoder_input_ids=noisy, cache=cache, decoder_attention_mask=mask).last_hidden_state
        guess = softcap(model.lm_head(out), cap).argmax(-1).cpu()
        slot_right += int(((guess == canvas) & ~fixed).sum())
        slot_total += int((~fixed).sum())
    return {"ar_token": round(ar_right / max(ar_total, 1), 4), "slot_token": round(slot_right / max(slot_total, 1), 4)}


def adapt(cfg: AdaptConfig, resume: bool = True, log=print) -> dict:
    """Train the adapters for `cfg.minutes` (or `cfg.steps`); resumes from `cfg.out`'s adapters when present."""
    from peft import get_peft_model, set_peft_model_state_dict
    from safetensors.torch import load_file

    torch.set_num_threads(cfg.threads)
    out = Path(cfg.out).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    loaded = load_base(cfg)
    base, tokenizer = loaded.model, loaded.tokenizer
    base.config.use_cache = False
    peft_model = get_peft_model(base, lora_config(cfg))
    step, best = 0, -1.0
    # resume from this run's adapters, else (a new machine) from the last committed training state
    # (`ship`/resume: the run's latest adapters, not merged at load), else from the shipped ones
    ship = Path(cfg.ship) if cfg.ship else None
    places = (out, ship / "resume" if ship else None, ship)
    start = next((d for d in places if d and (d / "adapter_model.safetensors").exists()), None)
    if resume and start is not None:
        state = {k: v.float() for k, v in load_file(str(start / "adapter_model.safetensors")).items()}
        set_peft_model_state_dict(peft_model, state)
        step = json.loads((start / "adapter_meta.json").read_text())["step"]
        log(f"resumed from {start} at step {step}")
    if (out / "best" / "adapter_meta.json").exists():
        best = json.loads((out / "best" / "adapter_meta.json").read_text())["score"]
    (out / "adapt_config.json").write_text(json.dumps(asdict(cfg), indent=1))
    model = peft_model.base_model.model  # the DiffusionGemma with LoRA layers in place
    trainable = [p for p in peft_model.parameters() if p.requires_grad]
    log(f"adapting {sum(p.numel() for p in trainable) / 1e6:.2f} M parameters on {sum(p.numel() for p in base.parameters()) / 1e6:.0f} M, "
        f"{cfg.threads} thread(s)")
    opt = torch.optim.AdamW(trainable, lr=cfg.lr, betas=(0.9, 0.98), weight_decay=0.0)
    train_cfg = cfg.train_config()
    eval_items = generate_suite(cfg.eval_items, "val", cfg.seed, tuple(f for f in cfg.families if f in FAMILIES))  # the suite's own
    logfile = open(out / "adapt_log.jsonl", "a")
    t0 = last_eval = last_save = time.time()
    window = {"enc": 0.0, "enc_n": 0, "dec": 0.0, "tokens": 0, "n": 0, "t": t0}

    def record(rec: dict) -> None:
        log(json.dumps(rec))
        logfile.write(json.dumps(rec) + "\n")
        logfile.flush()

    def evaluate_and_keep() -> None:
        nonlocal best
        model.eval()
        scores = held_out(model, tokenizer, eval_items)
        model.train()
        score = (scores["ar_token"] + scores["slot_token"]) / 2
        rec = {"step": step, "held_out": scores, "score": round(score, 4)}
        if score > best:
            best = score
            meta = {"step": step, "score": round(score, 4), "held_out": scores}
            save_adapters(peft_model, out / "best", meta)
            if cfg.ship:
                save_adapters(peft_model, Path(cfg.ship), meta)
            rec["best"] = True
        record(rec)

    model.train()
    while (cfg.steps is None or step < cfg.steps) and time.time() - t0 < cfg.minutes * 60:
        batch = make_batch(tokenizer, train_cfg, step).to(model.device)
        gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)
        self_cond = random.Random(f"{cfg.seed}/sc/{step}").random() < cfg.self_cond_prob
        for group in opt.param_groups:
            group["lr"] = cfg.lr * min(1.0, (step + 1) / cfg.warmup)
        train_encoder = random.Random(f"{cfg.seed}/ar/{step}").random() < cfg.ar_prob
        with torch.autocast(device_type=model.device.type, dtype=torch.bfloat16, enabled=cfg.bf16):
            enc_loss, dec_loss = adapt_losses(model, batch, cfg, gen, self_cond, train_encoder)
        opt.zero_grad(set_to_none=True)
        (dec_loss if enc_loss is None else enc_loss + dec_loss).backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        opt.step()
        step += 1
        if enc_loss is not None:
            window["enc"] += enc_loss.item()
            window["enc_n"] += 1
        window["dec"] += dec_loss.item()
        window["tokens"] += int(batch.attention_mask.sum()) + batch.canvas.numel()
        window["n"] += 1
        now = time.time()
        if step % cfg.log_every == 0:
            dt = now - window["t"]
            record({"step": step, "enc_loss": round(window["enc"] / max(1, window["enc_n"]), 4), "dec_loss": round(window["dec"] / window["n"], 4),
                    "tok_s": round(window["tokens"] / dt, 1), "s_per_step": round(dt / window["n"], 2), "elapsed_min": round((now - t0) / 60, 1)})
            window = {"enc": 0.0, "enc_n": 0, "dec": 0.0, "tokens": 0, "n": 0, "t": time.time()}
        if now - last_save >= cfg.save_every_s:
            save_latest(peft_model, out, ship, step)
            last_save = time.time()
        if now - last_eval >= cfg.eval_every_s:
            evaluate_and_keep()
            last_eval = time.time()
            window["t"] = time.time()
    save_latest(peft_model, out, ship, step)
    evaluate_and_keep()
    logfile.close()
    return {"step": step, "best": best}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tandem train adapters", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=AdaptConfig.out)
    p.add_argument("--ship", default=None, help="also write each new best adapters here (e.g. engines/checkpoints/gemma3-270m)")
    p.add_argument("--base", default=None, help="checkpoint directory (default: the imported Gemma 3 270M)")
    p.add_argument("--minutes", type=float, default=AdaptConfig.minutes)
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--threads", type=int, default=AdaptConfig.threads)
    p.add_argument("--device", default="cpu")
    p.add_argument("--rows", type=int, default=AdaptConfig.rows)
    p.add_argument("--rank", type=int, default=AdaptConfig.rank)
    p.add_argument("--lr", type=float, default=AdaptConfig.lr)
    p.add_argument("--bf16", action="store_true", help="bf16 autocast (the adapters and losses stay fp32)")
    p.add_argument("--ar-prob", type=float, default=AdaptConfig.ar_prob, help="share of steps that train the encoder (AR) too")
    p.add_argument("--eval-every-s", type=float, default=AdaptConfig.eval_every_s)
    p.add_argument("--save-every-s", type=float, default=AdaptConfig.save_every_s)
    p.add_argument("--fresh", action="store_true", help="start from zero adapters even if --out holds some")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    cfg = AdaptConfig(out=args.out, ship=args.ship, base=args.base, minutes=args.minutes, steps=args.steps, threads=args.threads, device=args.device,
                      rows=args.rows, rank=args.rank, lr=args.lr, ar_prob=args.ar_prob, bf16=args.bf16, eval_every_s=args.eval_every_s,
                      save_every_s=args.save_every_s)
    print(json.dumps(adapt(cfg, resume=not args.fresh)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
