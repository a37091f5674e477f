"""Training where the compute is: batches from worker processes, device-placed batches, sharded checkpoints.

The CPU keeps today's path (no workers, fp32); these check that the accelerator's path trains the
same run: the workers' batches are the loop's own, and a sharded checkpoint is the same weights.
"""

from __future__ import annotations

import json

import pytest
import torch
from transformers import DiffusionGemmaForBlockDiffusion

from lab.model.heldout import compare
from lab.model.loader import batches
from lab.model.train import TrainConfig, build_model, build_tokenizer, make_batch, resolve_device, save_checkpoint, size_in_bytes, train


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


def test_worker_processes_build_the_loops_own_batches_in_step_order(tokenizer):
    cfg = _cfg(tool_batch_prob=0.3, skeleton_prob=0.5, family_weights={"schema": 2.0, "toolcall": 2.0, "label": 1.0, "extract": 1.0})
    stream = batches(make_batch, tokenizer, cfg, start=5, workers=2)
    for step in range(5, 13):
        got, want = next(stream), make_batch(tokenizer, cfg, step)
        assert got.context_len == want.context_len and got.families == want.families
        for name in ("input_ids", "attention_mask", "ar_targets", "canvas"):
            assert torch.equal(getattr(got, name), getattr(want, name)), (step, name)
        assert (got.fixed is None) == (want.fixed is None) and (got.fixed is None or torch.equal(got.fixed, want.fixed))
    del stream


def test_a_run_with_batch_workers_is_the_run_without(tmp_path):
    alone = train(_cfg(tmp_path / "a"), max_steps=3)
    helped = train(_cfg(tmp_path / "b", workers=2), max_steps=3)
    a, b = alone["model"].state_dict(), helped["model"].state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_batch_moves_and_pins_as_one(tokenizer):
    batch = make_batch(tokenizer, _cfg(), 0)
    moved = batch.to(resolve_device("auto"))
    assert moved.input_ids.device == moved.canvas.device == moved.ar_targets.device
    assert torch.equal(moved.canvas.cpu(), batch.canvas) and moved.context_len == batch.context_len
    assert resolve_device("cpu").type == "cpu"


def test_sharded_checkpoint_keeps_each_file_under_the_limit_and_loads_the_same_weights(tokenizer, tmp_path):
    model = build_model(tokenizer, _cfg())
    save_checkpoint(model, tokenizer, tmp_path, max_shard_size="256KiB")
    shards = sorted(tmp_path.glob("*.safetensors"))
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    assert len(shards) >= 2 and set(index["weight_map"].values()) == {p.name for p in shards}
    # one tensor larger than the limit gets a file of its own; every file holding several stays under it
    many = [p for p in shards if list(index["weight_map"].values()).count(p.name) > 1]
    assert many and all(p.stat().st_size <= 256 * 2**10 + 2**14 for p in many)  # + the file's JSON header
    loaded = DiffusionGemmaForBlockDiffusion.from_pretrained(tmp_path, local_files_only=True)
    a, b = model.state_dict(), loaded.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("text,size", [("15MiB", 15 * 2**20), ("100KiB", 102400), ("16MB", 16_000_000), ("1GiB", 2**30), ("4096", 4096)])
def test_shard_sizes_read_binary_and_decimal_units(text, size):
    assert size_in_bytes(text) == size


def test_heldout_comparison_wants_every_family_at_least_the_baselines():
    new = {"families": {"schema": {"ar_score": 0.5}, "code": {"ar_score": 0.9}}}
    assert compare(new, {"families": {"schema": {"ar_score": 0.1}, "code": {"ar_score": 0.9}}}) == {"schema": True, "code": True}
    assert compare(new, {"families": {"schema": {"ar_score": 0.6}}}) == {"schema": False, "code": True}


def test_model_size_shapes_name_width_depth_and_heads():
    from tandem.bench.model_size import parse_shape

    assert parse_shape("192x3") == dict(hidden_size=192, num_layers=3, num_heads=4, head_dim=48, kv_heads=2)
    assert parse_shape("256x4") == dict(hidden_size=256, num_layers=4, num_heads=4, head_dim=64, kv_heads=2)
    assert parse_shape("224x3x4x56x2") == dict(hidden_size=224, num_layers=3, num_heads=4, head_dim=56, kv_heads=2)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here: scripts/gpu/train.sh runs this path where one is")
def test_a_cuda_run_in_bf16_with_workers_learns_and_saves_a_cpu_loadable_checkpoint(tmp_path):
    cfg = _cfg(tmp_path, device="cuda", bf16=True, workers=2, batch_short=32, max_shard_size="1MiB", log_every=5)
    done = train(cfg, max_steps=30)
    assert done["model"].device.type == "cuda" and done["enc_loss"] == done["enc_loss"]  # finite, not NaN
    log = [json.loads(line) for line in (tmp_path / "train_log.jsonl").read_text().splitlines()]
    assert log[-1]["enc_loss"] < log[0]["enc_loss"] and log[-1]["dec_loss"] < log[0]["dec_loss"]
    loaded = DiffusionGemmaForBlockDiffusion.from_pretrained(tmp_path, local_files_only=True)
    assert next(loaded.parameters()).device.type == "cpu"
