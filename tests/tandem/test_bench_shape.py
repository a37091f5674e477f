"""`tandem bench engines --shape`: the JSON the checks read, from a narrow model of the 26B-A4B shapes."""

import argparse
import json

import pytest
import torch

from tandem.bench import shape as bench_shape


def test_the_shape_benchmark_writes_a_record_per_mode_and_batch(tmp_path):
    out = tmp_path / "shape.json"
    args = argparse.Namespace(shape="26b-a4b", layers=2, dtype="float32", device="cpu", threads=None, quick=True,
                              steps=12, batches="1,2", modes="reference,block,ar,verified", json=str(out),
                              text_overrides=dict(hidden_size=32, intermediate_size=64, moe_intermediate_size=16,
                                                  num_experts=4, top_k_experts=2, vocab_size=4096))
    assert bench_shape.main(args) == 0
    report = json.loads(out.read_text())
    assert report["model_mb"] > 0 and report["layers"] == 2 and report["steps"] == 2
    assert {(r["mode"], r["batch"]) for r in report["records"]} == {(m, b) for m in bench_shape.MODES for b in (1, 2)}
    for r in report["records"]:
        assert r["tokens_per_s"] > 0 and r["peak_mem_mb"] >= r["before_mb"] > 0
        assert r["output_tokens"] == r["batch"] * (256 if r["mode"] in ("reference", "block") else 16)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here: scripts/gpu/check.sh runs the GPU path where one is")
def test_the_gpu_path_reports_its_share_of_the_matmul_peak(tmp_path):
    out = tmp_path / "gpu.json"
    args = argparse.Namespace(shape="26b-a4b", layers=2, dtype="bfloat16", device="cuda", threads=None, quick=True,
                              steps=16, batches="1", modes="reference,block", json=str(out), text_overrides={})
    assert bench_shape.main(args) == 0
    gpu = json.loads(out.read_text())["gpu"]
    assert gpu["matmul_peak_tflops"] > 0 and 0 < gpu["block"]["1"]["share_of_peak"] < 1


@pytest.mark.parametrize("overrides,said", [("{bad", "not JSON"), ("[1]", "a JSON object"), ('{"hiden_size": 32}', "hiden_size")])
def test_bad_text_overrides_are_a_usage_error_that_names_them(overrides, said, capsys):
    from tandem.engines import main_bench_engines

    try:
        rc = main_bench_engines(["--shape", "26b-a4b", "--layers", "1", "--text-overrides", overrides])
    except SystemExit as exc:  # argparse's own refusals
        rc = exc.code
    assert rc == 2 and said in capsys.readouterr().err
