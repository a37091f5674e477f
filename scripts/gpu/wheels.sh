#!/usr/bin/env bash
# Fill scripts/gpu/wheels/ with what scripts/gpu/env.sh (check.sh, train.sh) installs on a GPU machine that has torch
# but no network: transformers 5.24 (DiffusionGemma), its dependencies and llguidance, as wheels for
# CPython 3.11-3.13 on x86_64 Linux. torch and numpy are expected there already (not downloaded).
# Run here, where the package registry is reachable; the folder is git-ignored (tens of MB).
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p wheels
for py in 3.11 3.12 3.13; do  # transformers 5.24 needs Python >= 3.11
  python3 -m pip download --quiet --dest wheels --only-binary=:all: --python-version "$py" \
    --platform manylinux_2_34_x86_64 --platform manylinux_2_31_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    "transformers==5.24.0" "llguidance==1.9.1" "pyyaml>=6" "jinja2>=3" "torchao==0.18.0"
done
rm -f wheels/numpy-*.whl  # large, and a machine with torch for CUDA has it
du -sh wheels
