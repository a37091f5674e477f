"""`tandem checkpoint show`: what a checkpoint name or directory resolves to, and a clear error for neither."""

from __future__ import annotations

import json

from engines.defaults import SHIPPED_CHECKPOINT
from tandem.main import main


def test_a_name_shows_its_weights_home_and_adapters(capsys):
    assert main(["checkpoint", "show", "tiny"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["weights"] == shown["home"] == str(SHIPPED_CHECKPOINT) and shown["adapters"] is None


def test_a_path_that_is_no_checkpoint_is_refused_naming_the_names(capsys, tmp_path):
    assert main(["checkpoint", "show", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert "gemma3-270m" in err and "tiny" in err and "config.json" in err
