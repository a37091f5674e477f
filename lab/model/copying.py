"""Copy accuracy: how well a checkpoint copies the open values of schema and toolcall answers from
their prompts, read teacher-forced.

The open families score a field only when every token of its value is right, so ten decoded items
a family say little while a model is learning to copy (a value of eight tokens with one wrong is
a miss). Here the reference answer is fed through the AR path once per item and each answer token
is scored on whether the model's argmax at the position before is that token, grouped by its role
in a copied value: `first` (the value's first token, which the prompt writes with a leading space
and the JSON answer after a quote: a different token), `second`, `rest`, and `other` (keys, quotes,
braces, tool names: the skeleton). A model that copies by attention (an induction head) gets
`rest` near 1; one that only knows what values look like gets them at chance among look-alikes.

    python -m lab.model.copying --checkpoint DIR [--n 30] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from lab.model.items import TaskItem, encode_prompt
from lab.model.open_tasks import flatten_fields

ROLES = ("first", "second", "rest", "other")
COPY_FAMILIES = ("schema", "toolcall")


def value_spans(item: TaskItem) -> list[tuple[int, int]]:
    """Character spans, in `item.answer`, of the string values the prompt holds (list items one by
    one): what the model must copy. Enum choices and values of under 3 characters are left out."""
    spans = []
    for value in flatten_fields(item.meta["fields"]).values():
        for s in value if isinstance(value, list) else [value]:
            if isinstance(s, str) and len(s) >= 3 and s in item.prompt:
                at = item.answer.find(json.dumps(s, ensure_ascii=False))
                if at >= 0:
                    spans.append((at + 1, at + 1 + len(s)))
    return spans


def token_roles(tokenizer, item: TaskItem) -> tuple[list[int], list[str]]:
    """The answer's token ids and each one's role (ROLES) in the copied value it writes part of."""
    enc = tokenizer(item.answer, add_special_tokens=False, return_offsets_mapping=True)
    spans, offsets = value_spans(item), enc["offset_mapping"]
    roles = []
    for k, (start, end) in enumerate(offsets):
        # the value this token writes part of (one that starts before it, a quote merged with the first letter, counts)
        span = next(((s, e) for s, e in spans if start < e and end > s), None)
        if span is None:
            roles.append("other")
            continue
        nth = sum(1 for s2, e2 in offsets[:k] if e2 > span[0])  # the value's tokens before this one
        roles.append(ROLES[min(nth, 2)])
    return enc["input_ids"], roles


@torch.no_grad()
def predicted_answer(model, tokenizer, item: TaskItem) -> tuple[list[int], list[int]]:
    """(the reference answer's ids, the model's argmax at each of them given the prompt and the
    reference before it): one teacher-forced pass of the AR path."""
    prompt = encode_prompt(tokenizer, item.messages, item.tools)
    answer = tokenizer(item.answer, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([prompt + answer], device=model.device)
    positions = torch.arange(ids.shape[1], device=model.device)[None]
    hidden = model.model.encoder(input_ids=ids, position_ids=positions).last_hidden_state
    return answer, model.lm_head(hidden[0, len(prompt) - 1 : -1]).argmax(-1).tolist()  # soft-capping keeps the argmax


def copy_accuracy(model, tokenizer, items: list[TaskItem]) -> dict:
    """{role: share of its tokens the model predicts, teacher-forced} and {role + "_n": count}."""
    was_training = model.training
    model.eval()
    right = dict.fromkeys(ROLES, 0)
    total = dict.fromkeys(ROLES, 0)
    for item in items:
        answer, predicted = predicted_answer(model, tokenizer, item)
        for want, got, role in zip(answer, predicted, token_roles(tokenizer, item)[1]):
            right[role] += want == got
            total[role] += 1
    model.train(was_training)
    return {r: round(right[r] / total[r], 4) for r in ROLES if total[r]} | {f"{r}_n": total[r] for r in ROLES}


def main(argv: list[str] | None = None) -> int:
    from transformers import AutoTokenizer, DiffusionGemmaForBlockDiffusion

    from lab.model.tasks import generate_suite

    p = argparse.ArgumentParser(prog="python -m lab.model.copying", description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--n", type=int, default=30, help="test items per family (schema, toolcall)")
    p.add_argument("--split", default="test")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    if not (Path(args.checkpoint) / "config.json").is_file():
        p.error(f"--checkpoint: not a checkpoint directory (no config.json): {args.checkpoint}")
    torch.set_num_threads(args.threads)
    tokenizer = AutoTokenizer.from_pretrained(args.checkpoint, local_files_only=True)
    model = DiffusionGemmaForBlockDiffusion.from_pretrained(args.checkpoint, local_files_only=True)
    report = {"checkpoint": args.checkpoint, "split": args.split, "n": args.n}
    for family in COPY_FAMILIES:
        report[family] = copy_accuracy(model, tokenizer, generate_suite(args.n, args.split, 0, (family,)))
        print(family, " ".join(f"{r} {report[family][r]:.3f} ({report[family][r + '_n']})" for r in ROLES if r in report[family]))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
