"""`scripts/gpu/check.sh` end to end as a CPU dry run: the same script and benchmarks as the H200 run,
on a narrow model of the 26B-A4B layout (one layer, 4 experts, a 4,096-token vocabulary), block at
batch 1. What a GPU session reads: three JSONs, each part's records, compiled == eager. The parts'
time limits are raised: compiling on a busy 2-core machine takes minutes, not the H200's seconds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NARROW = {"hidden_size": 32, "intermediate_size": 64, "moe_intermediate_size": 16, "num_experts": 4,
          "top_k_experts": 2, "vocab_size": 4096}


# Three processes, two of them compiling (the graphs are this shape's own): minutes here.
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_gpu_check_dry_run_writes_every_parts_records(tmp_path):
    env = os.environ | {"TANDEM_GPU_VENV": sys.prefix, "CHECK_MODES": "block", "CHECK_BATCHES": "1", "CHECK_LAYERS": "1",
                        "CHECK_TEXT_OVERRIDES": json.dumps(NARROW), "MODES_LIMIT": "200", "COMPILE_LIMIT": "600",
                        "DENSE_LIMIT": "300", "FP8_LIMIT": "300", "FP8_ERROR_LIMIT": "300", "CHECK_FP8_MODES": "block", "CHECK_FP8_N": "0",
                        "SHARED_LIMIT": "300", "CHECK_SHARED_REQUESTS": "3", "CHECK_SHARED_CONCURRENCY": "3",
                        "CHECK_SHARED_TOKENS": "8"}
    done = subprocess.run(["bash", str(ROOT / "scripts/gpu/check.sh"), str(tmp_path)], env=env, capture_output=True,
                          text=True, timeout=1150)
    log = done.stdout[-3000:] + done.stderr[-3000:]
    assert done.returncode == 0 and "failed or timed out" not in done.stderr, log

    modes = json.loads((tmp_path / "gpu_26b_a4b.json").read_text())
    assert [(r["mode"], r["batch"]) for r in modes["records"]] == [("block", 1)]
    assert all(r["tokens_per_s"] > 0 for r in modes["records"])

    compiled = json.loads((tmp_path / "gpu_26b_a4b_compile.json").read_text())
    paths = {(r["mode"], r["batch"], r["compiled"]): r for r in compiled["records"]}
    assert set(paths) == {("block", 1, False), ("block", 1, True)}, log
    for r in paths.values():
        assert "error" not in r, r
        assert r["identical"], f"{r['mode']}: the compiled path wrote other tokens than eager"
    assert paths[("block", 1, True)]["ops_per_call"] < paths[("block", 1, False)]["ops_per_call"]
    assert paths[("block", 1, True)]["syncs_per_canvas"] == 0, "no host read inside a canvas's steps"

    dense = json.loads((tmp_path / "gpu_26b_a4b_dense.json").read_text())
    assert dense["dense_experts_max_rows"] == 100_000_000
    assert [(r["mode"], r["compiled"], r["identical"]) for r in dense["records"]] == [("block", False, True), ("block", True, True)]

    fp8 = json.loads((tmp_path / "gpu_26b_a4b_fp8.json").read_text())
    assert [(r["mode"], r["batch"]) for r in fp8["records"]] == [("block", 1)] and fp8["records"][0]["tokens_per_s"] > 0
    error = json.loads((tmp_path / "gpu_fp8_error.json").read_text())
    shapes = error["shapes"]
    assert 0.0 <= shapes["logits"]["top1_agreement"] <= 1.0 and shapes["logits"]["positions"] > 0
    assert shapes["bytes"]["fp8"]["total_mb"] < shapes["bytes"]["none"]["total_mb"], "float8 weights take fewer bytes"

    shared = json.loads((tmp_path / "gpu_26b_a4b_shared.json").read_text())
    assert shared["settings"]["lane_threads"] == 2, "on the CPU each lane decodes on its own thread"
    assert [set(r["ratio"]) for r in shared["rounds"]] == [{"block", "verified", "ar"}] and shared["rounds"][0]["mixed_requests_per_s"] > 0
