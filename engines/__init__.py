"""The model side: loading a DiffusionGemma checkpoint and decoding it in block, verified and AR mode.

Names load lazily so that `tandem --help` and the router's CLI do not pay for importing torch."""

from importlib import import_module

_EXPORTS = {
    "DiffusionEngine": "engines.engine",
    "CheckpointError": "engines.errors",
    "ContextLengthError": "engines.errors",
    "TandemError": "engines.errors",
    "EngineOverloadedError": "engines.errors",
    "EngineUnavailableError": "engines.errors",
    "InvalidRequestError": "engines.errors",
    "LoadedModel": "engines.loading",
    "load_checkpoint": "engines.loading",
    "MODES": "engines.types",
    "DecodeStats": "engines.types",
    "GenerationRequest": "engines.types",
    "GenerationResult": "engines.types",
    "Mode": "engines.types",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'engines' has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name]), name)
