#!/usr/bin/env bash
# The GPU check (issues 16, 36): DiffusionGemma-26B-A4B's shapes with random weights in bf16 on one
# NVIDIA GPU; block (16 denoising steps, as vLLM's published figure), AR and verified at batch 1, 4, 8
# and 16 beside the library's generate() -> $OUT/gpu_26b_a4b.json; then eager against compiled canvas
# steps (tok/s, ms per call, operator dispatches, host reads, peak memory, identity)
# -> $OUT/gpu_26b_a4b_compile.json; then the compiled path with the dense experts path at every size
# (engines/model/experts.py; by default a 256-token canvas takes the grouped path) -> $OUT/gpu_26b_a4b_dense.json;
# then FP8 weights: block and AR at batch 1 -> $OUT/gpu_26b_a4b_fp8.json, their logit error against bf16
# -> $OUT/gpu_fp8_error.json; then the shared replica, each mode alone and mixed -> $OUT/gpu_26b_a4b_shared.json.
# Each part is bounded (MODES_LIMIT, COMPILE_LIMIT, DENSE_LIMIT, FP8_LIMIT, FP8_ERROR_LIMIT, SHARED_LIMIT
# seconds: 750 in all): over one 600 s device call, so run it as two, e.g. CHECK_PARTS=modes,compile-compare
# then CHECK_PARTS=dense-experts,fp8-modes,fp8-error,shared.
#   scripts/gpu/wheels.sh                 # here: the wheels a machine without network needs
#   scripts/gpu/check.sh [OUT] [LAYERS]   # there: LAYERS default 30 (the whole model); 2 for a smoke run
# Needs torch with CUDA on the machine; installs what else is missing from scripts/gpu/wheels into a
# venv that sees the machine's torch. Without a GPU it runs on the CPU at reduced depth (a dry run).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-${OUT:-/tmp/tandem-gpu}}
LAYERS=${2:-30}
mkdir -p "$OUT"
source scripts/gpu/env.sh  # PY: a Python with torch, transformers and the rest (from scripts/gpu/wheels when missing)
DEVICE=$("$PY" -c "import torch; print('cuda' if torch.cuda.is_available() else 'cpu')")
if [ "$DEVICE" = cpu ]; then
  # A dry run: 2 layers (CHECK_LAYERS), batches 1 and 2. CHECK_TEXT_OVERRIDES (JSON) narrows the model
  # further and CHECK_MODES / CHECK_BATCHES pick a subset: what tests/scripts/test_gpu_check.py runs.
  LAYERS=${CHECK_LAYERS:-2}
  echo "gpu check: no CUDA device; a dry run on the CPU at $LAYERS layer(s)" >&2
  BATCHES=${CHECK_BATCHES:-1,2}; EXTRA=(--quick --dtype float32 --text-overrides "${CHECK_TEXT_OVERRIDES:-{\}}")
else
  BATCHES=1,4,8,16; EXTRA=(--steps 16)
  "$PY" -c "import torch; p = torch.cuda.get_device_properties(0); print(f'{p.name}: {p.total_memory / 2**30:.0f} GiB, torch {torch.__version__}, CUDA {torch.version.cuda}')"
fi
# Each part is bounded and its failure does not stop the next; each writes its JSON as it goes.
part() {  # part NAME SECONDS COMMAND...; CHECK_PARTS (names, comma-separated) runs a subset: two calls within a 600 s limit
  local name=$1 limit=$2; shift 2
  if [ -n "${CHECK_PARTS:-}" ] && [[ ",$CHECK_PARTS," != *",$name,"* ]]; then return 0; fi
  echo "== $name (at most $limit s)"
  timeout "$limit" "$@" || echo "gpu check: part '$name' failed or timed out (exit $?)" >&2
}
BENCH=(env PYTHONPATH=. "$PY" -c "from tandem.engines import main_bench_engines; raise SystemExit(main_bench_engines())")
MODES=${CHECK_MODES:-reference,block,ar,verified}
part modes "${MODES_LIMIT:-150}" "${BENCH[@]}" --modes "$MODES" --shape 26b-a4b --layers "$LAYERS" --device "$DEVICE" --batches "$BATCHES" "${EXTRA[@]}" \
  --json "$OUT/gpu_26b_a4b.json" | tee "$OUT/gpu_26b_a4b.txt"
# eager and compiled canvas steps side by side (tok/s, ms per call, dispatches, host reads, peak memory, identity)
part compile-compare "${COMPILE_LIMIT:-240}" "${BENCH[@]}" --compile-compare --modes "$MODES" --quick --shape 26b-a4b --layers "$LAYERS" --device "$DEVICE" \
  --batches "$BATCHES" "${EXTRA[@]}" --json "$OUT/gpu_26b_a4b_compile.json" | tee "$OUT/gpu_26b_a4b_compile.txt"
# the dense experts path at batch 1 (graph-safe, 16x the experts' FLOPs): against the grouped path above
part dense-experts "${DENSE_LIMIT:-90}" "${BENCH[@]}" --compile-compare --quick --shape 26b-a4b --layers "$LAYERS" --device "$DEVICE" \
  --batches 1 --modes block "${EXTRA[@]}" --dense-experts-max-rows 100000000 --json "$OUT/gpu_26b_a4b_dense.json" | tee "$OUT/gpu_26b_a4b_dense.txt"
# FP8 weights (engines/model/quantization.py: FP8 GEMMs from compute capability 8.9, weight-only below and on
# CPUs): block and AR at batch 1 on them (block against vLLM's 1,757 tok/s), then their logit error
# against bf16 on the same random weights and the shipped model's task scores (bench fp8)
part fp8-modes "${FP8_LIMIT:-90}" "${BENCH[@]}" --modes "${CHECK_FP8_MODES:-block,ar}" --shape 26b-a4b --layers "$LAYERS" --device "$DEVICE" \
  --batches 1 "${EXTRA[@]}" --quantization fp8 --json "$OUT/gpu_26b_a4b_fp8.json" | tee "$OUT/gpu_26b_a4b_fp8.txt"
part fp8-error "${FP8_ERROR_LIMIT:-60}" env PYTHONPATH=. "$PY" -c "import sys; from tandem.main import main; sys.exit(main())" bench fp8 \
  --n "${CHECK_FP8_N:-2}" --layers "$LAYERS" --device "$DEVICE" --text-overrides "${CHECK_TEXT_OVERRIDES:-{\}}" --json "$OUT/gpu_fp8_error.json" \
  | tee "$OUT/gpu_fp8_error.txt"
# the shared replica: one scheduler over one copy of the weights, each mode alone and the three mixed
# (p99 mixed over alone); on a GPU both lanes on one thread (one stream), on the CPU a thread each
LANES=$([ "$DEVICE" = cpu ] && echo 2 || echo 1)
part shared "${SHARED_LIMIT:-120}" env PYTHONPATH=. "$PY" -c "import sys; from tandem.main import main; sys.exit(main())" bench mixed \
  --shape 26b-a4b --layers "$LAYERS" --device "$DEVICE" --dtype "$([ "$DEVICE" = cpu ] && echo float32 || echo bfloat16)" \
  --text-overrides "${CHECK_TEXT_OVERRIDES:-{\}}" --lane-threads "$LANES" --n 2 --requests "${CHECK_SHARED_REQUESTS:-22}" \
  --concurrency "${CHECK_SHARED_CONCURRENCY:-12}" --max-tokens "${CHECK_SHARED_TOKENS:-64}" --repeat 1 --json "$OUT/gpu_26b_a4b_shared.json" | tee "$OUT/gpu_26b_a4b_shared.txt"
