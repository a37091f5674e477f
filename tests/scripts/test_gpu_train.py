"""`scripts/gpu/train.sh` end to end at toy size on the CPU (TANDEM_TRAIN_DRY=1): what a GPU run writes.

The same script, the same training and evaluation code as the H200 run; only the sizes differ (a
0.4 M-parameter model, 4 steps, one item per family, shards of 1 MiB so that the index is used).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from transformers import AutoTokenizer, DiffusionGemmaForBlockDiffusion

from lab.model.tasks import OPEN_FAMILIES, SHORT_FAMILIES

ROOT = Path(__file__).resolve().parents[2]
MIB = 2**20


@pytest.mark.slow
def test_train_script_dry_run_writes_a_sharded_checkpoint_and_its_held_out_scores(tmp_path):
    env = os.environ | {"TANDEM_TRAIN_DRY": "1", "TANDEM_GPU_VENV": sys.prefix, "TANDEM_TRAIN_RUN": str(tmp_path / "run")}
    done = subprocess.run(["bash", str(ROOT / "scripts/gpu/train.sh"), str(tmp_path / "out")], env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = tmp_path / "out"
    ckpt = out / "checkpoint"
    shards = sorted(ckpt.glob("*.safetensors"))
    assert 2 <= len(shards) <= 4 and all(p.stat().st_size <= 16 * MIB for p in shards)
    index = json.loads((ckpt / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"].values()) == {p.name for p in shards}
    for name in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        assert (ckpt / name).is_file(), name
    assert not (out / "train_state.pt").exists() and not list(out.rglob("train_state.pt"))  # optimizer state stays out of OUT
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert log[-1]["step"] == 4
    # the checkpoint loads as serving loads it
    DiffusionGemmaForBlockDiffusion.from_pretrained(ckpt, local_files_only=True)
    AutoTokenizer.from_pretrained(ckpt, local_files_only=True)
    report = json.loads((out / "eval.json").read_text())
    families = report["new"]["families"]
    assert set(families) == set(SHORT_FAMILIES)
    for family, s in families.items():
        # 4 steps leave the toy model untrained: it writes no right answer, field or label in either mode
        assert {"ar_exact", "ar_score"} <= set(s) and all(v == 0.0 for v in s.values()), (family, s)
        assert ("block_score" in s) == (family not in OPEN_FAMILIES)  # the open families are served skeleton-seeded, not plain block
