"""A given answer scored under the model's AR distribution: one encoder pass over prompt + answer.

- `agreement`: how many leading answer tokens the model's greedy AR choice would accept, as
  verified mode's commit pass does (shadow verification of block answers).
- `answer_logprobs`: each answer token's log-probability before temperature and grammar, with the
  most likely alternatives, in OpenAI's `logprobs.content` shape. In AR and verified mode every
  token was chosen from exactly that distribution.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from engines.batch.sequence_batch import SequenceBatch


def answer_logits(model, prompt_ids: list[int], answer_ids: list[int]) -> torch.Tensor:
    """The AR logits for every answer position (A, V): one causal encoder pass over prompt + answer."""
    batch = SequenceBatch(model, 1, model.device)
    with torch.inference_mode():
        logits = batch.encode(torch.tensor([prompt_ids + answer_ids], device=model.device), logits="all")  # (1, L, V)
    return logits[0, len(prompt_ids) - 1 : -1]  # the logits before each answer token


def agreement(model, prompt_ids: list[int], answer_ids: list[int], stop_ids: frozenset[int] = frozenset()) -> int:
    """How many leading tokens of `answer_ids` the greedy AR choice accepts (0 for no answer). An
    answer may end on the stop token that ended it: it is accepted where AR's choice is any of
    `stop_ids` (a block answer that stopped where AR goes on is not AR's answer, even when every
    token it wrote is)."""
    if not answer_ids:
        return 0
    choice = answer_logits(model, prompt_ids, answer_ids).argmax(-1)  # (A,) AR choice at every answer position
    answer = torch.tensor(answer_ids, device=choice.device)
    same = choice == answer
    if stop_ids:
        stops = torch.tensor(sorted(stop_ids), device=choice.device)
        same |= torch.isin(answer, stops) & torch.isin(choice, stops)
    return int(same.long().cumprod(-1).sum())  # 1 up to the first miss


def answer_logprobs(model, decode: Callable[[list[int]], str], prompt_ids: list[int], answer_ids: list[int], top: int) -> list[dict]:
    """Per answer token: its text, log-probability and bytes, with the `top` most likely tokens
    (`top_logprobs`, [] for top=0). `decode` turns token ids into text."""
    if not answer_ids:
        return []
    logp = torch.log_softmax(answer_logits(model, prompt_ids, answer_ids).float(), dim=-1)  # (A, V)
    chosen = logp.gather(-1, torch.tensor(answer_ids, device=logp.device)[:, None])[:, 0].tolist()
    best = logp.topk(top, dim=-1) if top else None

    def entry(token_id: int, value: float) -> dict:
        text = decode([token_id])
        return {"token": text, "logprob": round(value, 6), "bytes": list(text.encode("utf-8"))}

    out = []
    for i, (token_id, value) in enumerate(zip(answer_ids, chosen)):
        tops = [entry(int(t), float(v)) for v, t in zip(best.values[i], best.indices[i])] if best is not None else []
        out.append(entry(token_id, value) | {"top_logprobs": tops})
    return out
