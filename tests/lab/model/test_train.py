"""Training: right-sized canvases, batch layout, the cropped-cache path, loss falls, resume is exact."""

from __future__ import annotations

import pytest
import torch

from lab.model.train import (
    TrainConfig,
    build_model,
    build_tokenizer,
    canvas_size_for,
    encode_item,
    evaluate,
    losses,
    lr_at,
    make_batch,
    make_optimizer,
    n_canvases,
    new_cache,
    softcap,
    train,
)
from lab.model.tasks import generate_suite


def _cfg(tmp_path=None, **kw) -> TrainConfig:
    base = dict(
        out=str(tmp_path or "unused"), hidden_size=64, num_layers=2, vocab_size=600, tokenizer_items=30,
        batch_short=4, batch_long=2, warmup=2, log_every=1000, eval_every_s=1e9, ckpt_every_s=1e9, minutes=10,
    )
    base.update(kw)
    return TrainConfig(**base)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Training shares this machine's two cores: tests take one."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(_cfg())


def test_canvas_is_the_smallest_that_holds_answer_and_eos():
    assert canvas_size_for(10) == 64
    assert canvas_size_for(63) == 64 and canvas_size_for(64) == 128
    assert canvas_size_for(200) == 256 and canvas_size_for(900) == 256
    assert n_canvases(255) == 1 and n_canvases(256) == 2 and n_canvases(600) == 3


def test_batches_are_deterministic_and_laid_out(tokenizer):
    cfg = _cfg()
    for step in range(12):
        a, b = make_batch(tokenizer, cfg, step), make_batch(tokenizer, cfg, step)
        assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.canvas, b.canvas)
        B, C = a.canvas.shape
        assert C in (64, 128, 256)
        # every row's context ends at column P: the last context token is real
        assert bool(a.attention_mask[:, a.context_len - 1].all())
        # targets: the answer then exactly one EOS per row, never a pad
        targets = a.ar_targets[a.ar_targets != -100]
        assert tokenizer.pad_token_id not in targets.tolist()
        assert int((a.ar_targets == tokenizer.eos_token_id).sum()) == B
        # each canvas is the answer from where the context stops (its start, a canvas boundary or,
        # for some rows, a random point inside it), then EOS fill
        for i in range(B):
            answer = a.ar_targets[i][a.ar_targets[i] != -100].tolist()
            offset = int((a.ar_targets[i, : a.context_len - 1] != -100).sum())  # answer tokens in the context
            assert 0 <= offset < len(answer)
            assert a.canvas[i].tolist() == (answer[offset:] + [tokenizer.eos_token_id] * C)[:C]


def test_some_canvases_start_inside_the_answer(tokenizer):
    starts = {"boundary": 0, "inside": 0}
    for step in range(8):
        batch = make_batch(tokenizer, _cfg(long_batch_prob=0.0, offset_prob=0.5), step)
        for i in range(batch.canvas.shape[0]):
            offset = int((batch.ar_targets[i, : batch.context_len - 1] != -100).sum())
            starts["inside" if offset else "boundary"] += 1
    assert starts["inside"] > 5 and starts["boundary"] > 5, starts
    batch = make_batch(tokenizer, _cfg(long_batch_prob=0.0, offset_prob=0.0), 0)
    assert int((batch.ar_targets[:, : batch.context_len - 1] != -100).sum()) == 0


def test_lr_warms_up_then_decays_over_the_end_of_the_run():
    by_steps = _cfg(steps=100, warmup=10, decay_frac=0.2, lr=1.0)
    assert lr_at(0, by_steps) == pytest.approx(0.1) and lr_at(50, by_steps) == 1.0
    assert lr_at(90, by_steps) == pytest.approx(0.55) and lr_at(100, by_steps) == pytest.approx(0.1)
    by_time = _cfg(minutes=10, warmup=10, decay_frac=0.2, lr=1.0)  # no step budget: the clock bounds the run
    assert lr_at(500, by_time, elapsed_s=60) == 1.0
    assert lr_at(500, by_time, elapsed_s=540) == pytest.approx(0.55) and lr_at(500, by_time, elapsed_s=600) == pytest.approx(0.1)


def test_long_answers_are_split_into_consecutive_canvases(tokenizer):
    cfg = _cfg(long_batch_prob=1.0, long_chunk_probs=(0.0, 1.0, 0.0), offset_prob=0.0)
    batch = make_batch(tokenizer, cfg, 0)
    assert batch.canvas.shape[1] == 256
    for i in range(batch.canvas.shape[0]):
        answer = batch.ar_targets[i][batch.ar_targets[i] != -100].tolist()
        assert batch.canvas[i].tolist() == (answer[256:512] + [tokenizer.eos_token_id] * 256)[:256]
        # the context the decoder sees ends with the first canvas
        assert batch.input_ids[i, batch.context_len - 256 : batch.context_len].tolist() == answer[:256]


def test_cropped_batch_path_equals_a_fresh_prompt_only_forward(tokenizer):
    cfg = _cfg()
    model = build_model(tokenizer, cfg).eval()
    batch = make_batch(tokenizer, cfg, 0)
    cap = model.config.get_text_config().final_logit_softcapping
    with torch.no_grad():
        cache = new_cache(model)
        model.model.encoder(input_ids=batch.input_ids, attention_mask=batch.attention_mask, cache=cache)
        cache.crop(-(batch.input_ids.shape[1] - batch.context_len))
        mask = torch.cat([batch.attention_mask[:, : batch.context_len], torch.ones_like(batch.canvas)], 1)
        hidden = model.model.decoder(decoder_input_ids=batch.canvas, cache=cache, decoder_attention_mask=mask).last_hidden_state
        batched = softcap(model.lm_head(hidden), cap)
        i = int(batch.attention_mask[:, : batch.context_len].sum(1).argmin())  # the most left-padded row
        prompt = batch.input_ids[i, : batch.context_len][batch.attention_mask[i, : batch.context_len].bool()]
        cache = new_cache(model)
        model.model.encoder(input_ids=prompt[None], cache=cache)
        alone = softcap(model.lm_head(model.model.decoder(decoder_input_ids=batch.canvas[i : i + 1], cache=cache).last_hidden_state), cap)
    assert torch.allclose(batched[i], alone[0], atol=1e-4)


def test_both_losses_fall_on_a_tiny_run(tokenizer):
    cfg = _cfg(lr=3e-3, long_batch_prob=0.0, short_canvas_probs=(1.0, 0.0, 0.0))
    torch.manual_seed(0)
    model = build_model(tokenizer, cfg)
    model.train()
    opt = make_optimizer(model, cfg)
    batch = make_batch(tokenizer, cfg, 1)
    history = []
    for step in range(12):
        enc, dec = losses(model, batch, cfg, torch.Generator().manual_seed(step), self_cond=step % 2 == 0)
        opt.zero_grad()
        (enc + dec).backward()
        opt.step()
        history.append((enc.item(), dec.item()))
    assert history[-1][0] < 0.8 * history[0][0] and history[-1][1] < 0.8 * history[0][1], history


def test_resume_reproduces_an_uninterrupted_run(tmp_path):
    straight = train(_cfg(tmp_path / "a"), max_steps=4)
    train(_cfg(tmp_path / "b"), max_steps=2)  # interrupted after 2 steps (checkpoint at exit)
    resumed = train(_cfg(tmp_path / "b"), resume=True, max_steps=2)
    assert resumed["step"] == straight["step"] == 4
    a, b = straight["model"].state_dict(), resumed["model"].state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    for name in ("model.safetensors", "config.json", "generation_config.json", "tokenizer.json", "train_state.pt"):
        assert (tmp_path / "b" / name).is_file(), name


def test_evaluate_runs_both_modes(tokenizer):
    cfg = _cfg()
    model = build_model(tokenizer, cfg)
    items = generate_suite(1, "val", 0, ("classify", "code"))
    result = evaluate(model, tokenizer, items)
    assert set(result) == {"ar", "block"} and set(result["block"]) == {"classify", "code"}
    # an untrained model writes no reference answer exactly, in either mode
    assert result == {"ar": {"classify": 0.0, "code": 0.0}, "block": {"classify": 0.0, "code": 0.0}}
    # and a model that answers is scored right: the shipped checkpoint answers classify in AR exactly
    # (60 of 60 test items, docs/operations.md), so this item too
    from transformers import AutoTokenizer, DiffusionGemmaForBlockDiffusion

    from engines.defaults import SHIPPED_CHECKPOINT

    shipped = DiffusionGemmaForBlockDiffusion.from_pretrained(SHIPPED_CHECKPOINT, local_files_only=True)
    shipped_tokenizer = AutoTokenizer.from_pretrained(SHIPPED_CHECKPOINT, local_files_only=True)
    fresh = generate_suite(1, "val", 0, ("classify",))  # answer lengths counted with the shipped tokenizer, not the one above
    assert evaluate(shipped, shipped_tokenizer, fresh, modes=("ar",)) == {"ar": {"classify": 1.0}}
    prompt, answer = encode_item(tokenizer, items[0])
    assert prompt[0] == tokenizer.bos_token_id and answer[-1] == tokenizer.eos_token_id


@pytest.mark.parametrize("flag,value", [("--decay-frac", "0"), ("--decay-frac", "1.5"), ("--lr", "-1"), ("--warmup", "-3"), ("--minutes", "x"), ("--steps", "0")])
def test_train_refuses_bad_schedule_flags_before_training(flag, value, capsys):
    from tandem.main import main as tandem

    with pytest.raises(SystemExit) as exc:
        tandem(["train", "--out", "unused", flag, value])
    assert exc.value.code == 2 and flag in capsys.readouterr().err


def test_evaluate_reports_field_scores_and_skips_block_families(tokenizer):
    model = build_model(tokenizer, _cfg())
    items = generate_suite(1, "val", 0, ("extract", "label"))
    result = evaluate(model, tokenizer, items, fields=True, block_skip=("label",))
    assert set(result) == {"ar", "block", "ar_field", "block_field"}
    assert set(result["ar_field"]) == {"extract", "label"} and set(result["block"]) == {"extract"}
    # an untrained model writes neither an exact answer nor any right field or label
    assert all(v == 0.0 for fams in result.values() for v in fams.values()), result


def test_fresh_model_takes_its_shape_and_a_tokenizer_of_rendered_prompts():
    from lab.model.open_tasks import make_schema
    import random

    cfg = _cfg(tokenizer_rendered=True, vocab_size=800, num_heads=4, head_dim=16, kv_heads=2)
    rendered = build_tokenizer(cfg)
    plain = build_tokenizer(_cfg(vocab_size=800))
    item = make_schema(random.Random(5))
    # the schema turn is in the rendered corpus only: its prompt takes fewer tokens
    assert len(encode_item(rendered, item)[0]) < len(encode_item(plain, item)[0])
    text = build_model(rendered, cfg).config.get_text_config()
    assert (text.num_attention_heads, text.head_dim, text.num_key_value_heads) == (4, 16, 2)
