#!/usr/bin/env bash
# Train a tandem-tiny checkpoint end to end on one GPU (issue 37), in one command within 8 minutes
# on an H200: a BPE on the rendered prompts, a fresh model of the size that still serves on 2 CPU
# cores (docs/model.md, "Sizing"), the stage-5 mix (open-vocabulary schema, tool-call and label
# copying first) at GPU batch sizes in bf16 autocast, batches built by worker processes; then its
# held-out score per family beside the shipped model's. Writes under OUT:
#   checkpoint/          config, tokenizer, weights as safetensors files of at most 16 MiB (+ index)
#   eval.json            held-out exact and family scores per family and mode, new and shipped
#   train_config.json, train_log.jsonl, train.txt, eval.txt
#   scripts/gpu/wheels.sh                 # here: the wheels a machine without network needs
#   scripts/gpu/train.sh [OUT]            # there
# TANDEM_TRAIN_DRY=1: a toy run on the CPU in seconds (tiny model, a few steps, one item per family),
# what tests/scripts/test_gpu_train.py runs. Knobs (env): TRAIN_MINUTES, COPY_FIRST (steps on copy alone), INIT (start from a
# checkpoint of the same size instead of from scratch), WORKERS, EVAL_LIMIT (seconds), BASELINE (the checkpoint
# eval.json compares with; empty: none), TANDEM_GPU_VENV, TANDEM_TRAIN_RUN (keep the run directory there).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-${OUT:-/tmp/tandem-train}}
if [ -n "${TANDEM_TRAIN_RUN:-}" ]; then RUN=$TANDEM_TRAIN_RUN; else  # the run directory: optimizer state stays out of OUT
  RUN=$(mktemp -d /tmp/tandem-train-run.XXXXXX); trap 'rm -rf "$RUN"' EXIT
fi
mkdir -p "$OUT"
source scripts/gpu/env.sh  # PY: a Python with torch, transformers and the rest (from scripts/gpu/wheels when missing)
export PYTHONPATH=.

DRY=${TANDEM_TRAIN_DRY:-0}
# Toy shards in the dry run: several files even at toy size, so the index and the per-file limit are exercised.
if [ "$DRY" = 1 ]; then SHARD=${SHARD:-1MiB}; fi
# The stage-5 mix plus the auxiliary "copy" family, which also runs alone for the first COPY_FIRST steps: a model
# that copies values from its prompt needs an induction head, which formed on copy alone within ~600 CPU steps and
# never on the mix in 6,700 (docs/model.md). "wild" (schema requests written as people write them, same-kind
# distractors) is there for the copying to carry past the suite's templates (lab/model/wild_tasks.py).
MIX='{"extract": 2.0, "classify": 0.3, "summarize": 0.5, "plan": 1.0, "code": 0.6, "reason": 0.0, "write": 1.0, "tool": 1.0, "schema": 3.0, "toolcall": 3.0, "label": 1.5, "copy": 4.0, "wild": 2.0}'
if [ "$DRY" = 1 ]; then COPY_FIRST=${COPY_FIRST:-2}; else COPY_FIRST=${COPY_FIRST:-400}; fi
COMMON=(--out "$RUN" --seed 11 --warmup 100 --decay-frac 0.2 --family-weights "$MIX" --copy-first-steps "$COPY_FIRST" --tokenizer-rendered
  --tool-batch-prob 0.65 --long-batch-prob 0.03 --tool-canvas-probs '[0.6, 0.4, 0]' --skeleton-prob 0.5
  --eval-every-s 1e9 --max-shard-size "${SHARD:-15MiB}")
if [ "$DRY" = 1 ]; then
  echo "train: dry run on the CPU (toy model, a few steps)" >&2
  SIZE=(--hidden-size 32 --num-layers 2 --num-heads 2 --head-dim 16 --kv-heads 1 --vocab-size 600 --tokenizer-items 20)
  MINUTES=5
  RUNNING=(--device cpu --threads 1 --workers 2 --steps 4 --lr 2e-3 --batch-short 4 --batch-tool 2 --batch-long 2 --log-every 2 --ckpt-every-s 1e9)
  EVAL=(--device cpu --threads 1 --n 1 --n-long 0)
  BASELINE=${BASELINE-}  # none: the toy model's scores alone
else
  # The largest shape within 2x the shipped model's AR and block cost per call on 2 CPU cores (docs/model.md).
  SIZE=(--hidden-size 192 --num-layers 3 --num-heads 4 --head-dim 48 --kv-heads 2 --vocab-size 3072)
  # Batches of 8x the CPU recipe's rows: a step of the tiny model is launch-bound on a GPU at the CPU's sizes.
  MINUTES=${TRAIN_MINUTES:-4.5}
  # a checkpoint every minute: a run cut short (a crash, the time limit) still leaves one to score
  RUNNING=(--device cuda --bf16 --threads 4 --workers "${WORKERS:-12}" --lr 3e-3
    --batch-short 256 --batch-tool 128 --batch-long 48 --log-every 50 --ckpt-every-s 60)
  EVAL=(--device cuda --n 10 --n-long 2)
  BASELINE=${BASELINE-engines/checkpoints/tandem-tiny}
  "$PY" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device (TANDEM_TRAIN_DRY=1 runs the CPU toy run)'; p = torch.cuda.get_device_properties(0); print(f'{p.name}: {p.total_memory / 2**30:.0f} GiB, torch {torch.__version__}, CUDA {torch.version.cuda}')"
fi
INIT_ARGS=()
if [ -n "${INIT:-}" ]; then INIT_ARGS=(--init "$INIT"); fi

began=$(date +%s)
# The loop stops itself after MINUTES; the timeout (2 more minutes for start-up and the last save)
# only catches a hang. Either way the last checkpoint written is copied and scored.
limit=$(awk "BEGIN { print int($MINUTES * 60 + 120) }")
timeout "$limit" "$PY" -m lab.model.train "${COMMON[@]}" "${SIZE[@]}" "${RUNNING[@]}" --minutes "$MINUTES" "${INIT_ARGS[@]}" 2>&1 | tee "$OUT/train.txt" \
  || { rc=$?; echo "train: training failed or timed out (exit $rc); keeping its last checkpoint" >&2; if [ "$DRY" = 1 ]; then exit "$rc"; fi; }
[ -e "$RUN/config.json" ] || { echo "train: no checkpoint was written" >&2; exit 1; }
mkdir -p "$OUT/checkpoint"
for f in "$RUN"/*.safetensors "$RUN"/model.safetensors.index.json "$RUN"/config.json "$RUN"/generation_config.json \
         "$RUN"/tokenizer.json "$RUN"/tokenizer_config.json "$RUN"/chat_template.jinja; do
  if [ -e "$f" ]; then cp "$f" "$OUT/checkpoint/"; fi
done
cp "$RUN"/train_config.json "$RUN"/train_log.jsonl "$OUT/" 2>/dev/null || true
echo "train: $(( $(date +%s) - began )) s to a checkpoint in $OUT/checkpoint" >&2
# The held-out score, bounded: a checkpoint without its score still comes back.
if [ -n "$BASELINE" ]; then EVAL+=(--baseline "$BASELINE"); fi
timeout "${EVAL_LIMIT:-150}" "$PY" -m lab.model.heldout --checkpoint "$OUT/checkpoint" "${EVAL[@]}" --json "$OUT/eval.json" 2>&1 | tee "$OUT/eval.txt" || echo "train: held-out evaluation failed or timed out (exit $?)" >&2
echo "train: $(( $(date +%s) - began )) s in all" >&2
