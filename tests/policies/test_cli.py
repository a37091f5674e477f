"""`tandem policy ...` against a file store and a Redis store."""

from __future__ import annotations

import json

import yaml

from policies.stores import DEFAULT_POLICY_PATH, default_policy
from tandem.main import main


def test_validate_lists_every_invalid_field(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("steps: 0\ntask_modes: {extract: fast}\n")
    assert main(["policy", "validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "steps: " in err and "task_modes.extract: " in err and "'block', 'verified' or 'ar'" in err
    assert main(["policy", "validate", str(DEFAULT_POLICY_PATH)]) == 0


def test_apply_history_rollback_on_a_file(tmp_path, capsys):
    target = tmp_path / "live.yaml"
    target.write_text(DEFAULT_POLICY_PATH.read_text())
    new = tmp_path / "new.yaml"
    new.write_text(yaml.safe_dump({**default_policy().content(), "steps": 20}))
    src = ["--source", str(target)]
    assert main(["policy", "apply", str(new), "--expect-version", "0", *src]) == 0
    assert main(["policy", "apply", str(new), "--expect-version", "0", *src]) == 2  # stale
    assert "current version is 1" in capsys.readouterr().err
    assert main(["policy", "rollback", "0", *src]) == 0
    assert main(["policy", "history", *src]) == 0
    out = capsys.readouterr().out
    assert "v0" in out and "v1" in out and "* v2" in out
    assert main(["policy", "show", "--json", *src]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["policy"]["version"] == 2 and shown["policy"]["steps"] == 12


def test_apply_and_show_on_redis(tmp_path, redis_url, prefix, capsys):
    new = tmp_path / "new.yaml"
    new.write_text(yaml.safe_dump({**default_policy().content(), "confidence_floor": 0.7}))
    src = ["--source", redis_url, "--prefix", prefix]
    assert main(["policy", "apply", str(new), *src]) == 0
    assert "as version 1" in capsys.readouterr().out
    assert main(["policy", "show", "--json", *src]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["policy"]["version"] == 1 and shown["policy"]["confidence_floor"] == 0.7 and shown["status"]["healthy"]
    assert main(["policy", "rollback", "7", *src]) == 2
    assert "no policy version 7" in capsys.readouterr().err


def test_apply_of_an_empty_or_partial_file_is_refused_listing_the_missing_fields(tmp_path, redis_url, prefix, capsys):
    """Once, `tandem policy apply` of an empty file wrote the schema defaults as the live policy."""
    from policies.stores import load_store

    src = ["--source", redis_url, "--prefix", prefix]
    for text in ("", "steps: 16\n"):
        f = tmp_path / "p.yaml"
        f.write_text(text)
        assert main(["policy", "apply", str(f), *src]) == 2
        err = capsys.readouterr().err
        assert "field(s) missing" in err and "task_modes: missing" in err and "--patch" in err
        assert ("steps: missing" in err) == (text == "")
        assert main(["policy", "validate", str(f)]) == 2  # validate says the same before anyone applies
        assert "task_modes: missing" in capsys.readouterr().err
    with load_store(redis_url, prefix=prefix, watch=False) as store:
        assert store.history() == [] and store.current().version == 0


def test_apply_and_validate_a_patch(tmp_path, capsys):
    target = tmp_path / "live.yaml"
    target.write_text(DEFAULT_POLICY_PATH.read_text())
    patch = tmp_path / "stricter.yaml"
    patch.write_text("description: stricter floor\nconfidence_floor: 0.7\ntask_modes: {extract: ar}\n")
    src = ["--source", str(target)]
    assert main(["policy", "validate", str(patch)]) == 2  # as a full policy it is partial
    capsys.readouterr()
    assert main(["policy", "validate", "--patch", str(patch), *src]) == 0
    assert "valid patch over version 0" in capsys.readouterr().out
    assert main(["policy", "apply", "--patch", str(patch), "--expect-version", "0", *src]) == 0
    assert "applied the patch in" in capsys.readouterr().out
    live = yaml.safe_load(target.read_text())
    want = default_policy().content() | {"description": "stricter floor", "confidence_floor": 0.7}
    want["task_modes"] = {**want["task_modes"], "extract": "ar"}
    assert live == {"version": 1, **want}
    bad = tmp_path / "bad.yaml"
    bad.write_text("steps: null\nversion: 3\n")
    assert main(["policy", "apply", "--patch", str(bad), *src]) == 2
    assert "version: a patch cannot set the version" in capsys.readouterr().err
