# Sourced by scripts/gpu/*.sh: PY, a Python that sees the machine's torch and has what Tandem's
# model code needs (transformers 5.24+ with DiffusionGemma, llguidance, pyyaml, jinja2, torchao for FP8), installed
# from scripts/gpu/wheels (scripts/gpu/wheels.sh fills it) when the machine lacks it: GPU machines
# here have torch but no network. TANDEM_GPU_VENV names the venv (created with the system's
# site-packages, so the machine's CUDA torch is the one used); an existing one is used as it is.
VENV=${TANDEM_GPU_VENV:-/tmp/tandem-gpu-venv}
[ -x "$VENV/bin/python" ] || python3 -m venv --system-site-packages "$VENV"
PY="$VENV/bin/python"
# Found by metadata, not imported: importing transformers' DiffusionGemma takes seconds, and every
# script imports it again anyway. Exit 2: no torch or numpy (nothing to install them from); 3: the rest is missing.
have=0
"$PY" - <<'PYEOF' || have=$?
import importlib.metadata, importlib.util, sys
if any(importlib.util.find_spec(m) is None for m in ("torch", "numpy")):
    sys.exit(2)
try:
    version = tuple(int(x) for x in importlib.metadata.version("transformers").split(".")[:2])
except (importlib.metadata.PackageNotFoundError, ValueError):
    version = (0, 0)
sys.exit(0 if version >= (5, 24) and all(importlib.util.find_spec(m) for m in ("llguidance", "yaml", "jinja2", "torchao")) else 3)
PYEOF
if [ "$have" = 2 ]; then echo "$0: torch or numpy is not installed on this machine" >&2; exit 2; fi
if [ "$have" != 0 ]; then
  "$PY" -m pip install --quiet --no-index --find-links scripts/gpu/wheels "transformers==5.24.0" "llguidance==1.9.1" "pyyaml>=6" "jinja2>=3" "torchao>=0.18"
fi
