"""The engine's defaults (engines.defaults): the shipped checkpoint is where an engine starts without
one named, $TANDEM_CHECKPOINT overrides it, and the canvas sizes fit the shipped model."""

from __future__ import annotations

import json

from engines.defaults import CANVAS_SIZES, SHIPPED_CHECKPOINT, default_checkpoint


def test_the_shipped_checkpoint_unless_the_environment_names_another(monkeypatch, tmp_path):
    monkeypatch.delenv("TANDEM_CHECKPOINT", raising=False)
    assert default_checkpoint() == str(SHIPPED_CHECKPOINT)
    monkeypatch.setenv("TANDEM_CHECKPOINT", str(tmp_path))
    assert default_checkpoint() == str(tmp_path)


def test_the_largest_canvas_is_the_shipped_models():
    config = json.loads((SHIPPED_CHECKPOINT / "config.json").read_text())
    assert list(CANVAS_SIZES) == sorted(CANVAS_SIZES) and CANVAS_SIZES[-1] == config["canvas_length"]
