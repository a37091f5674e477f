"""The engine's defaults (engines.defaults): the embedded Gemma is where an engine starts without one
named, $TANDEM_CHECKPOINT overrides it (a name or a directory), and the canvas sizes fit the shipped models."""

from __future__ import annotations

import json

from engines.defaults import CANVAS_SIZES, CHECKPOINTS, SHIPPED_CHECKPOINT, default_checkpoint


def test_the_embedded_gemma_unless_the_environment_names_another(monkeypatch, tmp_path):
    monkeypatch.delenv("TANDEM_CHECKPOINT", raising=False)
    assert default_checkpoint() == "gemma3-270m"
    monkeypatch.setenv("TANDEM_CHECKPOINT", str(tmp_path))
    assert default_checkpoint() == str(tmp_path)


def test_names_resolve_to_their_weights_and_home(monkeypatch):
    """`tiny` is the shipped test model; a directory is itself (the Gemma name imports: tested with the import)."""
    from engines.model.loading import resolve_checkpoint

    assert resolve_checkpoint("tiny") == (SHIPPED_CHECKPOINT, SHIPPED_CHECKPOINT, None)
    assert resolve_checkpoint(str(SHIPPED_CHECKPOINT)) == (SHIPPED_CHECKPOINT, SHIPPED_CHECKPOINT, None)
    assert (CHECKPOINTS / "gemma3-270m" / "NOTICE").is_file(), "the Gemma adapters' home carries the Gemma notice"


def test_the_largest_canvas_is_the_shipped_models():
    config = json.loads((SHIPPED_CHECKPOINT / "config.json").read_text())
    assert list(CANVAS_SIZES) == sorted(CANVAS_SIZES) and CANVAS_SIZES[-1] == config["canvas_length"]
