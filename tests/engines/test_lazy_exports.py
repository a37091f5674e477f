"""The lazy package faces (engines/lazy_exports.py) of `engines`, `policies` and `router`: importing
them and using their light names loads neither torch nor scikit-learn nor redis; every name they
export resolves to the object its module defines; any other name is an error naming the package."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("engines", "policies", "router")


def test_the_faces_and_their_light_names_load_no_heavy_library():
    code = ("import sys, engines, policies, router; "
            "engines.TandemError, engines.GenerationRequest, policies.PolicyError, router.RouterError; "
            "print(sorted(m for m in ('torch', 'transformers', 'sklearn', 'redis') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_name_is_its_modules_object(package):
    face = importlib.import_module(package)
    exports = face._EXPORTS
    assert face.__all__ == sorted(exports)
    for name, module in exports.items():
        assert getattr(face, name) is getattr(importlib.import_module(module), name), f"{package}.{name}"


@pytest.mark.parametrize("package", PACKAGES)
def test_an_unknown_name_is_an_error_naming_the_package(package):
    face = importlib.import_module(package)
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'nope'"):
        face.nope
    with pytest.raises(ImportError):
        exec(f"from {package} import nope", {})
