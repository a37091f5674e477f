"""A package face whose names load on first use (PEP 562 `__getattr__`), so that importing a
package, or any module inside it, costs nothing until a name is used: `import engines` does not
import torch, and `import router` or `import policies` does not import scikit-learn or redis (the
CLI's `--help` and the lab's light commands stay fast). Used by `engines`, `policies` and `router`."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[list[str], Callable[[str], Any]]:
    """`__all__` and the module `__getattr__` of `package`, whose public names are `exports`
    (name -> the module that defines it); any other name is an AttributeError naming the package."""

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(exports[name]), name)

    return sorted(exports), __getattr__
