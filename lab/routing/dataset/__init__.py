"""The routing data set: labeled chat requests for training and evaluating the router.

`python -m lab.routing.dataset` (or `build()`) writes `lab/routing/data/routing.jsonl` (train) and
`lab/routing/data/routing_test.jsonl` (held out). It is synthetic, seeded and deterministic: the same
seed gives byte-identical files.

Each line is one request plus its labels:

    {"id": "r00042", "messages": [...], "max_tokens": 256, "response_format": {...}, "tools": [...],
     "stop": [...], "task": "extract", "output_tokens": 57, "mode": "block", "style": "natural"}

- `task` is one of the nine task types (policies.schema.TASKS);
- `output_tokens` is the expected answer length in tokens (the embedded tokenizer splits digits,
  so numbers cost a token per digit), capped by `max_tokens` when the request sets one;
- `mode` is what the product's default policy (`Policy()`, the schema's defaults) gives for
  (task, output_tokens): block for short structured answers, AR for reasoning, writing and
  anything long.

Variety comes from composition, not one template per class: many instruction phrasings per task
type, real-world subjects drawn from pools, content built from parts (facts, reviews, tickets,
notes, code), chat structure (system prompts that sometimes carry the instruction, earlier turns,
topic switches), noise (typos, casing, chatty prefixes and suffixes, extra whitespace) and request
options (max_tokens, JSON response formats, tools, stop). About one prompt in ten follows
the format of the embedded model's own task suite (`style: "suite"`): facts -> JSON extraction,
review/ticket -> one label, facts -> one-line summary, goal + tools -> JSON list of calls, a
one-line spec -> a short Python function, adding 8-25 numbers with a running total per line, and
long templated stories/reports. Beside them, each file carries real requests of that suite
(`style: "task_suite"`, `suite_records`): 60 per family from its train split in the train file,
20 from its test split in the held-out file, with answer lengths in the shipped tokenizer.

The held-out split is a seeded random 25% after removing duplicate prompts, so no prompt text
appears in both files; it shares the generator's templates, which makes its accuracy an upper
bound on what real traffic would see (docs/router.md says so next to the numbers).

Where things are:

- `families/` - one generator module per task type (`families/extract.py`, ...);
- `parts.py` - content parts (names, facts, prose, reviews, the shared payload, tool specs);
- `pools.py` - the word pools; `noise.py` - typos, casing, chatty prefixes;
- `request.py` - chat structure and request options around a generated sample;
- `rng.py` - the seeded random source (every draw goes through it, in a fixed order);
- this file - `generate`, the split and the files (`build`), `suite_records`, the CLI.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from engines.defaults import SHIPPED_CHECKPOINT

from .request import draw_request
from .rng import Rng
from .sample import Sample

__all__ = ["DATA_DIR", "TEST_PATH", "TRAIN_PATH", "Sample", "build", "generate", "labeling_policy", "load_jsonl",
           "main", "suite_records"]

DATA_DIR = Path(__file__).resolve().parents[1] / "data"  # lab/routing/data, beside this package
TRAIN_PATH = DATA_DIR / "routing.jsonl"
TEST_PATH = DATA_DIR / "routing_test.jsonl"


def generate(n: int, seed: int = 20260) -> list[dict]:
    """`n` labeled requests, tasks in equal shares, duplicates (same messages) removed."""
    from policies.schema import TASKS

    rng = Rng(seed)
    policy = labeling_policy()
    seen: set[str] = set()
    out: list[dict] = []
    k = 0
    while len(out) < n:
        task = TASKS[k % len(TASKS)]
        k += 1
        rec = draw_request(rng, task)
        key = json.dumps(rec["messages"], sort_keys=True)
        if key in seen:  # a duplicate still used its draws; the next task comes next in turn
            continue
        seen.add(key)
        rec["mode"] = policy.route_for(rec["task"], rec["output_tokens"])[0]
        out.append(rec)
    return out


def labeling_policy():
    """The policy the `mode` labels follow: the schema's product defaults (short structured jobs on
    block, one canvas at most), so the labels do not move with one checkpoint's measurements."""
    from policies.schema import Policy

    return Policy()


def suite_records(n_per_family: int, split: str, seed: int = 0) -> list[dict]:
    """Requests of the embedded model's own task suite (`lab.model.tasks`, one split), labeled with
    their family as task and the reference answer's length in the shipped checkpoint's tokenizer.
    The synthetic suite-style prompts above only resemble them; these are the prompts the model
    was trained on (train split) and is benchmarked on (test split)."""
    from transformers import AutoTokenizer

    from lab.model.tasks import TASK_FAMILIES, generate_suite

    tokenizer = AutoTokenizer.from_pretrained(SHIPPED_CHECKPOINT)
    policy = labeling_policy()
    out = []
    for item in generate_suite(n_per_family, split=split, seed=seed, families=TASK_FAMILIES):
        tokens = item.count_tokens(tokenizer) + 1  # the answer and its end-of-turn token
        out.append({"messages": item.messages, "task": item.family, "output_tokens": tokens, "style": "task_suite",
                    "mode": policy.route_for(item.family, tokens)[0]})
    return out


def build(n: int = 4000, test_share: float = 0.25, seed: int = 20260, out_dir: Path = DATA_DIR,
          suite_per_family: tuple[int, int] = (60, 20)) -> tuple[Path, Path]:
    """Write the train and held-out files; returns their paths. Each gets `suite_per_family` task-suite
    requests per family from the suite's own train / test split (no prompt in both)."""
    recs = generate(n, seed)
    random.Random(seed + 1).shuffle(recs)
    n_test = int(len(recs) * test_share)
    test_recs = recs[:n_test] + suite_records(suite_per_family[1], "test", seed=seed)
    train_recs = recs[n_test:] + suite_records(suite_per_family[0], "train", seed=seed)
    random.Random(seed + 2).shuffle(train_recs)
    random.Random(seed + 3).shuffle(test_recs)
    for j, rec in enumerate(test_recs + train_recs):
        rec["id"] = f"r{j:05d}"
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    train, test = out_dir / TRAIN_PATH.name, out_dir / TEST_PATH.name
    for path, part in ((test, test_recs), (train, train_recs)):
        with open(path, "w") as fh:
            for rec in part:
                fh.write(json.dumps({"id": rec.pop("id"), **rec}, ensure_ascii=False) + "\n")
    return train, test


def load_jsonl(path: str | Path) -> list[dict]:
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lab.routing.dataset",
                                 description="write the routing data set (train + held-out JSONL)")
    ap.add_argument("--n", type=int, default=4000, help="total requests before the split")
    ap.add_argument("--seed", type=int, default=20260)
    ap.add_argument("--out", type=Path, default=DATA_DIR)
    args = ap.parse_args(argv)
    train, test = build(args.n, seed=args.seed, out_dir=args.out)
    print(f"wrote {train} and {test}")
    return 0
