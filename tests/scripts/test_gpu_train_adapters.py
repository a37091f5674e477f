"""`scripts/gpu/train-adapters.sh` end to end as a CPU dry run (TANDEM_TRAIN_DRY=1): the script and the recipe a GPU
runs, on the tiny test model for three steps, write the adapters, the best ones and the log where it says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_adapter_script_dry_run_writes_adapters_best_and_log(tmp_path):
    env = os.environ | {"TANDEM_TRAIN_DRY": "1", "PY": sys.executable}
    done = subprocess.run(["bash", str(ROOT / "scripts/gpu/train-adapters.sh"), str(tmp_path)], env=env, capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (tmp_path / "adapters" / "adapter_model.safetensors").is_file()
    assert (tmp_path / "best" / "adapter_model.safetensors").is_file()
    meta = json.loads((tmp_path / "best" / "adapter_meta.json").read_text())
    assert meta["step"] == 3 and 0 <= meta["held_out"]["ar_token"] <= 1
    log = [json.loads(line) for line in (tmp_path / "adapt_log.jsonl").read_text().splitlines()]
    assert log[-1]["step"] == 3 and "held_out" in log[-1]  # the run ends with its held-out score
