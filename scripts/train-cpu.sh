#!/usr/bin/env bash
# The CPU recipe for the embedded Gemma's adapters (lab/model/adapt.py): hours, detached, at the lowest priority.
# Each new best (held-out, teacher-forced) is written to engines/checkpoints/gemma3-270m and committed here every
# COMMIT_EVERY_S seconds, so a session that ends loses at most that much; a new machine resumes from the committed
# adapters. Usage: setsid scripts/train-cpu.sh > train.log 2>&1 &   (MINUTES=600 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=${TANDEM_RUN_DIR:-$HOME/.cache/tandem/runs/gemma3-270m-adapt}
SHIP=engines/checkpoints/gemma3-270m
MINUTES=${MINUTES:-600}
# One thread: beside other work on two cores, a second OpenMP thread waits on the first more than it helps
# (a busy machine's 2-thread steps ran 2-3x slower than 1-thread ones here).
THREADS=${THREADS:-1}
# bf16 autocast where the CPU has AVX-512 BF16 (~1.3x a step, measured beside other work on this VM)
if grep -q avx512_bf16 /proc/cpuinfo 2>/dev/null; then BF16=${BF16-1}; else BF16=${BF16-}; fi
COMMIT_EVERY_S=${COMMIT_EVERY_S:-3600}
OMP_NUM_THREADS=$THREADS nice -n "${NICE:-19}" .venv/bin/python -m lab.model.adapt --out "$RUN" --ship "$SHIP" --minutes "$MINUTES" --threads "$THREADS" ${BF16:+--bf16} &
trainer=$!
commit() {
  git add "$SHIP"/adapter_model.safetensors "$SHIP"/adapter_config.json "$SHIP"/adapter_meta.json "$SHIP"/resume 2>/dev/null || return 0
  # --only the shipped adapters: whatever else is staged in this checkout stays out of the commit
  git diff --cached --quiet -- "$SHIP" || git commit -q --only "$SHIP" -m "gemma3-270m adapters: $(tr -d '\n' < "$SHIP/adapter_meta.json")" || true
}
while kill -0 "$trainer" 2>/dev/null; do
  sleep "$COMMIT_EVERY_S" & wait $! || true
  commit
done
wait "$trainer" || true
commit
