#!/usr/bin/env bash
# Ship a trained checkpoint as the embedded model, with everything the router and the cost model
# learned from the old one measured again on the new one (docs/model.md, "What shipping ... changes"):
#
#   scripts/ship_checkpoint.sh RUN_DIR [KEEP_DIR]
#
# 1. the shipped weights move to KEEP_DIR (default lab/model/runs/tandem-tiny-previous), so the tables
#    measured on them stay reproducible; RUN_DIR's weights and tokenizer take their place;
# 2. the router's agreement labels, train and held-out splits, written by the new weights into fresh
#    files (`tandem router label-agreement`; ~10 + ~4 minutes on a 2-vCPU VM), then the router
#    retrained on them and evaluated (`tandem router train`, `evaluate`);
# 3. the cost profile beside the new weights: the per-task acceptance (`tandem eval model --json`),
#    ms per step and steps per task (`tandem bench engines --write-profile`), the prefill cost
#    (`tandem bench prefix --write-profile`), the draft step (`tandem bench verified --write-profile`);
# 4. held out against the weights it replaces (`python -m lab.model.heldout`), into OUT.
# What it leaves to a person: the tests that describe the old weights (test_shipped_model's floors,
# test_verified's chosen prompts, the agents' xfails), the README's account of the model and the shipped
# directory's README.md.
# Each step writes as it goes; label-agreement resumes where it stopped, so a rerun continues.
set -euo pipefail
cd "$(dirname "$0")/.."
NEW=${1:?usage: scripts/ship_checkpoint.sh RUN_DIR [KEEP_DIR]}
KEEP=${2:-lab/model/runs/tandem-tiny-previous}
OUT=${OUT:-/tmp/tandem-ship}
THREADS=${THREADS:-2}
SHIPPED=engines/checkpoints/tandem-tiny
# this checkout's code and data, also where .venv holds another checkout's editable install (a worktree)
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
DATA=lab/routing/data
PY=.venv/bin/python
TANDEM=.venv/bin/tandem
mkdir -p "$OUT"
[ -f "$NEW/config.json" ] && [ -f "$NEW/model.safetensors" ] || { echo "not a checkpoint directory: $NEW" >&2; exit 2; }

if [ ! -d "$KEEP" ]; then
  echo "== keeping the shipped weights in $KEEP"
  mkdir -p "$(dirname "$KEEP")"
  git mv "$SHIPPED" "$KEEP"
  mkdir -p "$SHIPPED"
  cp "$NEW"/{config.json,generation_config.json,model.safetensors,tokenizer.json,tokenizer_config.json,chat_template.jinja} "$SHIPPED"/
  # the run's README describes a run beside its siblings (relative links, "not shipped"): the shipped
  # directory gets its own, written by hand (what it leaves to a person, below)
  cp "$NEW"/train_config*.json "$SHIPPED"/ 2>/dev/null || true
fi

echo "== agreement labels (train, then held out) with the new weights"
for split in "" _test; do
  labels="$DATA/block_agreement$split.jsonl"
  # the file's first line names the checkpoint that wrote it: the old weights' labels go, the new ones' resume
  head -1 "$labels" 2>/dev/null | grep -q "\"checkpoint\": \"$(basename "$NEW")\"" || rm -f "$labels"
  data=$([ -z "$split" ] && echo "$DATA/routing.jsonl" || echo "$DATA/routing_test.jsonl")
  nice -n 5 "$TANDEM" router label-agreement --data "$data" --out "$labels" --checkpoint "$NEW"
done

echo "== the router, retrained on them"
"$TANDEM" router train
"$TANDEM" router evaluate --data "$DATA/routing_test.jsonl" --policy policies/default.yaml --json "$OUT/router_eval.json"

echo "== the cost profile"
"$TANDEM" eval model --checkpoint "$SHIPPED" --n 4 --threads "$THREADS" --json "$OUT/model_eval.json"
"$TANDEM" bench engines --checkpoint "$SHIPPED" --quick --threads 1 --write-profile --acceptance-from "$OUT/model_eval.json" \
  --json "$OUT/engines.json"
"$TANDEM" bench prefix --checkpoint "$SHIPPED" --quick --write-profile --json "$OUT/prefix.json"
# the draft step by canvas and batch (what verified mode prices its drafts with), then verified against AR
"$TANDEM" bench verified --checkpoint "$SHIPPED" --write-profile --batch 1 8 --json "$OUT/verified.json"

echo "== held out against the weights it replaces"
"$PY" -m lab.model.heldout --checkpoint "$SHIPPED" --baseline "$KEEP" --n 10 --n-long 2 --threads "$THREADS" --json "$OUT/heldout.json"
echo "shipped $NEW as $SHIPPED (the old weights: $KEEP); reports in $OUT; now the tests and the README"
