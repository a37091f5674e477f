"""The quality figures behind tests/floors.py's table, each measured by one function that the test
asserting it calls too, so the regeneration (`python -m tests.floors`) measures exactly what the
tests check. Imports are inside the functions: the floors table loads without torch."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

SAMPLE = 20  # the shipped model's card sample: the first 20 test items per family
QUALITY = [("classify", "ar"), ("classify", "block"), ("summarize", "ar"), ("summarize", "block"),
           ("plan", "ar"), ("code", "ar"), ("code", "block"), ("extract", "ar")]
STRUCTURED = ("schema", "toolcall", "label")
SMALL_ROUTER_TRAIN, SMALL_ROUTER_TEST, SMALL_ROUTER_EVAL = 500, 150, 40  # records of each split it uses


# ---- the shipped tiny checkpoint (tests/engines/test_shipped_model.py) -----------------------------
def shipped_engine():
    from engines import DiffusionEngine
    from engines.defaults import SHIPPED_CHECKPOINT

    return DiffusionEngine.from_checkpoint(SHIPPED_CHECKPOINT)


def shipped_right(engine, family: str, mode: str) -> int:
    """Right answers on the first SAMPLE test items of `family`: AR greedy, or block at 12 steps
    with each item's own fixed seed (lab.model.evaluate)."""
    from lab.model.evaluate import Setting, run_setting
    from lab.model.tasks import generate_suite, score

    items = generate_suite(SAMPLE, split="test", seed=0, families=(family,))
    setting = Setting(mode, 12, "right") if mode == "block" else Setting("ar")
    return sum(score(o.item, o.text).exact for o in run_setting(engine, items, setting))


def shipped_structured(engine, family: str) -> dict[str, dict]:
    """`tandem eval structured`'s record per mode (constrained AR; block with the skeleton seeded)
    on the first SAMPLE test items of `family`, with `right`: items whose every field is right."""
    from tandem.bench.eval_structured import evaluate

    records = evaluate(engine, SAMPLE, families=(family,), modes=("ar", "block+skeleton"), batch=1)
    return {r["mode"]: r | {"right": round(r["item_exact"] * r["n"])} for r in records}


def shipped_acceptance(engine) -> list[float]:
    """Verified's draft acceptance per item, each decoded alone (seed: its index in the family), on
    the first SAMPLE summarize and SAMPLE code test items."""
    from lab.model.evaluate import Setting, make_request
    from lab.model.tasks import generate_suite

    items = generate_suite(SAMPLE, split="test", seed=0, families=("summarize",)) + generate_suite(SAMPLE, split="test", seed=0, families=("code",))
    setting = Setting("verified", 12, "right")
    return [engine.generate(make_request(engine, item, setting, seed=i % SAMPLE)).stats.acceptance_rate for i, item in enumerate(items)]


# ---- routers (tests/router/test_cli.py, tests/router/test_classifier.py) --------------------------
def write_jsonl(path: Path, records: list[dict]) -> Path:
    import json

    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def train_small_router(folder: Path) -> Path:
    """`tandem router train` on the first SMALL_ROUTER_TRAIN training records, tested on the first
    SMALL_ROUTER_TEST held-out ones; returns the model's folder (default.skops, default.json)."""
    from lab.routing.dataset import TEST_PATH, TRAIN_PATH, load_jsonl
    from tandem.main import main

    train = write_jsonl(folder / "train.jsonl", load_jsonl(TRAIN_PATH)[:SMALL_ROUTER_TRAIN])
    test = write_jsonl(folder / "test.jsonl", load_jsonl(TEST_PATH)[:SMALL_ROUTER_TEST])
    out = folder / "model"
    assert main(["router", "train", "--data", str(train), "--test", str(test), "--out", str(out)]) == 0
    return out


def evaluate_small_router(model: Path, folder: Path) -> dict:
    """`tandem router evaluate --json` on the first SMALL_ROUTER_EVAL held-out records without their
    mode labels (so the modes are derived from each record's task and length)."""
    import json

    from lab.routing.dataset import TEST_PATH, load_jsonl
    from tandem.main import main

    unlabeled = [{k: v for k, v in r.items() if k != "mode"} for r in load_jsonl(TEST_PATH)[:SMALL_ROUTER_EVAL]]
    data = write_jsonl(folder / "eval.jsonl", unlabeled)
    report = folder / "report.json"
    assert main(["router", "evaluate", "--data", str(data), "--model", str(model / "default.skops"), "--json", str(report)]) == 0
    return json.loads(report.read_text())


def agreed(report: dict) -> int:
    """The mode confusion's diagonal: records whose decided mode is their label's."""
    matrix = report["mode_confusion"]["matrix"]
    return sum(matrix[i][i] for i in range(len(matrix)))


def shipped_router_report(model, held_out: list[dict]) -> dict:
    """The shipped router model on the held-out split, with the mode labels of the product's default
    task modes and the agreement head at the shipped policy's floor."""
    from lab.routing.dataset import TEST_PATH
    from lab.routing.label_agreement import labels_for, load_labels, with_labels
    from lab.routing.train import evaluate
    from policies.stores import default_policy
    from tests.router.helpers import policy

    return evaluate(model, with_labels(held_out, load_labels(labels_for(TEST_PATH))), policy=policy(agreement_floor=default_policy().agreement_floor))


def shipped_router_counts(report: dict) -> tuple[int, int]:
    """(right task predictions, agreeing modes) out of report["n"]."""
    return round(report["accuracy"] * report["n"]), round(report["mode_agreement"] * report["n"])


# ---- fp8 weights (tests/engines/model/test_quantization.py) ---------------------------------------
def fp8_top1(plain, fp8) -> tuple[int, int, list[float]]:
    """Teacher-forced over tests.engines.factories.PROMPTS: positions where fp8's most likely next
    token is float32's, positions, and each prompt's mean logit error over its logits' spread."""
    import torch

    from engines.batch.sequence_batch import SequenceBatch
    from tests.engines.factories import PROMPTS

    agree, total, error = 0, 0, []
    for text in PROMPTS:
        ids = torch.tensor([plain.tokenizer.encode(text)])
        with torch.inference_mode():
            a = SequenceBatch(plain.model, 1, plain.model.device).encode(ids, logits="all")[0]
            b = SequenceBatch(fp8.model, 1, fp8.model.device).encode(ids, logits="all")[0]
        agree += int((a.argmax(-1) == b.argmax(-1)).sum())
        total += a.shape[0]
        error.append(float((a - b).abs().mean() / a.std()))
    return agree, total, error


def measure_all() -> Iterator[tuple[str, int | float, int]]:
    """Every figure of tests/floors.py's MEASURED, by name, measured now: (name, figure, items)."""
    import contextlib
    import json
    import sys

    from engines import DiffusionEngine
    from engines.defaults import SHIPPED_CHECKPOINT
    from lab.routing.dataset import TEST_PATH, load_jsonl
    from router.decision.classifier import load_model

    quiet = contextlib.redirect_stdout(sys.stderr)  # the commands' own reports go to stderr: stdout is the table
    engine = shipped_engine()
    for family, mode in QUALITY:
        with quiet:
            right = shipped_right(engine, family, mode)
        yield f"shipped {family}/{mode}", right, SAMPLE  # outside `quiet`: the caller prints while the generator waits
    for family in STRUCTURED:
        with quiet:
            records = shipped_structured(engine, family)
        for mode, record in records.items():
            yield f"shipped {family}/{mode}", record["right"], record["n"]
    with quiet:
        rates = shipped_acceptance(engine)
    yield "shipped verified acceptance", round(sum(rates) / len(rates), 3), len(rates)
    with tempfile.TemporaryDirectory() as folder, quiet:
        model = train_small_router(Path(folder))
        meta = json.loads((model / "default.json").read_text())
        report = evaluate_small_router(model, Path(folder))
    yield "small router task accuracy", round(meta["metrics"]["accuracy"] * SMALL_ROUTER_TEST), SMALL_ROUTER_TEST
    yield "small router mode agreement", agreed(report), SMALL_ROUTER_EVAL
    with quiet:
        report = shipped_router_report(load_model(), load_jsonl(TEST_PATH))
    right, agreeing = shipped_router_counts(report)
    yield "shipped router task accuracy", right, report["n"]
    yield "shipped router mode agreement", agreeing, report["n"]
    with quiet:
        agree, total, _ = fp8_top1(shipped_engine(), DiffusionEngine.from_checkpoint(SHIPPED_CHECKPOINT, quantization="fp8"))  # fresh engines, as the
        # test's: on the engine the evaluations above used, the same prompts came to 104 positions, not 96 (cause not traced)
    yield "fp8 top-1 agreement", agree, total
