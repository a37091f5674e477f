"""The router's commands through the real `tandem` entry point: route, router train /
evaluate (incl. --from-redis), bench router; and that importing the CLI stays light."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tandem.main import main
from lab.routing.dataset import TEST_PATH, TRAIN_PATH, load_jsonl
from router.gateway.decision_entry import request_features
from router.gateway.decisions_log import DecisionsLogSettings, log_decision
from tests.floors import at_least
from tests.measures import SMALL_ROUTER_EVAL, SMALL_ROUTER_TEST, SMALL_ROUTER_TRAIN, agreed, evaluate_small_router, train_small_router, write_jsonl
from tests.policies.helpers import redis_client

ROOT = Path(__file__).resolve().parents[2]


def test_route_prints_the_decision_as_json(capsys):
    assert main(["route", "Write a poem about the sea in winter.", "--request-id", "abc"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["mode"] == "ar" and d["task"] == "write" and d["request_id"] == "abc" and d["policy_version"] == 0  # no queue view: write's default
    assert main(["route", "Extract the name as JSON: Bob is 40.", "--header", "x-tandem-mode=verified"]) == 0
    assert json.loads(capsys.readouterr().out)["forced_by"] == "header"


def test_route_refusal_is_one_line_and_exit_2(capsys):
    assert main(["route", "hi", "--model", "gpt-4o"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tandem: model 'gpt-4o' is not served") and err.count("\n") == 1


def test_train_then_evaluate_a_small_model(tmp_path, capsys):
    out = train_small_router(tmp_path)
    text = capsys.readouterr().out
    assert "task accuracy" in text and "mode agreement" in text
    meta = json.loads((out / "default.json").read_text())
    assert meta["n_train"] == SMALL_ROUTER_TRAIN and meta["test_data"] == "test.jsonl"
    at_least("small router task accuracy", round(meta["metrics"]["accuracy"] * SMALL_ROUTER_TEST), of=SMALL_ROUTER_TEST)
    rep = evaluate_small_router(out, tmp_path)
    text = capsys.readouterr().out
    assert "confusion" in text and "precision" in text
    # the modes are derived from each record's task + length (every record has both), so the mode
    # confusion counts all 40, its diagonal the agreeing ones (training is seeded: a fixed count)
    matrix = rep["mode_confusion"]["matrix"]
    assert rep["n"] == SMALL_ROUTER_EVAL == sum(map(sum, matrix)) and rep["mode_agreement"] == agreed(rep) / SMALL_ROUTER_EVAL
    at_least("small router mode agreement", agreed(rep), of=SMALL_ROUTER_EVAL)
    assert len(rep["confusion"]) == len(rep["labels"])


def test_train_from_redis_reads_the_decisions_stream(tmp_path, prefix, redis_url, capsys):
    client = redis_client()
    stream = prefix + "decisions"
    for r in load_jsonl(TRAIN_PATH)[:300]:
        log_decision(client, request_features(r), {"task": "extract", "confidence": 0.2}, {"output_tokens": r["output_tokens"], "task": r["task"]},
                     DecisionsLogSettings(store_text=True), stream=stream)  # retraining needs the opt-in text
    client.close()
    out = tmp_path / "m.skops"
    test = write_jsonl(tmp_path / "test.jsonl", load_jsonl(TEST_PATH)[:50])
    rc = main(["router", "train", "--from-redis", redis_url, "--stream", stream, "--no-base", "--out", str(out), "--test", str(test)])
    assert rc == 0
    assert "300 from Redis" in capsys.readouterr().out
    assert json.loads(out.with_suffix(".json").read_text())["n_from_redis"] == 300


def test_bench_router_prints_a_table_and_writes_json(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert main(["bench", "router", "--n", "60", "--repeat", "1", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "decide(RouteRequest)" in text and "p99 ms" in text
    res = json.loads(out.read_text())
    assert res["rows"][0]["calls"] == 60 and res["machine"]["cores"] >= 1
    assert {"p50_ok", "p99_ok"} <= set(res["targets"])


def test_importing_the_cli_does_not_import_sklearn_or_redis():
    code = "import sys, router, policies, tandem.main; tandem.main.build_parser(); print(sorted(m for m in ('sklearn', 'redis', 'skops') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
