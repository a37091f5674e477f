"""The step's plain functions compiled beside the model's calls (engines.model.compiled_functions): an eager
model runs each as itself; once its calls are compiled, one compiled version per function serves
every model in the process (made lazily: nothing compiles until it is first called)."""

from __future__ import annotations

from engines.model.settle import settle
from engines.batch.compiled import compile_model, use_eager
from engines.model.compiled_functions import compiled_version, is_compiled
from engines.model.logits import soft_capped_logits


def test_an_eager_model_runs_the_plain_function_and_a_compiled_one_a_shared_compiled_version(tiny_checkpoint):
    from engines import DiffusionEngine

    model, other = (DiffusionEngine.from_checkpoint(tiny_checkpoint).model for _ in range(2))
    assert not is_compiled(model) and compiled_version(model, settle) is settle
    compile_model(model, "on")
    compile_model(other, "on")
    assert is_compiled(model)
    fast = compiled_version(model, settle)
    assert fast is not settle and compiled_version(other, settle) is fast  # one version for every model
    assert compiled_version(model, soft_capped_logits) is not fast  # one per function
    use_eager(model)
    assert not is_compiled(model) and compiled_version(model, settle) is settle
