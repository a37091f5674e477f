"""The model side: loading a DiffusionGemma checkpoint and decoding it in block, verified and AR mode.

Names load lazily so that `tandem --help` and the router's CLI do not pay for importing torch."""

from engines.lazy_exports import lazy_exports

_EXPORTS = {
    "DiffusionEngine": "engines.replica.engine",
    "CheckpointError": "engines.errors",
    "ContextLengthError": "engines.errors",
    "TandemError": "engines.errors",
    "EngineOverloadedError": "engines.errors",
    "EngineUnavailableError": "engines.errors",
    "InvalidRequestError": "engines.errors",
    "LoadedModel": "engines.model.loading",
    "load_checkpoint": "engines.model.loading",
    "MODES": "engines.types",
    "DecodeStats": "engines.types",
    "GenerationRequest": "engines.types",
    "GenerationResult": "engines.types",
    "Mode": "engines.types",
}
__all__, __getattr__ = lazy_exports(__name__, _EXPORTS)
