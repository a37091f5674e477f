"""What every task family builds on (and `open_tasks` imports without importing the suite): the
item, its split, and the text format of tool calls in an answer."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field

SPLITS = ("train", "val", "test")


@dataclass
class TaskItem:
    family: str  # one of FAMILIES
    messages: list[dict]  # chat turns, the last one from the user
    answer: str  # the reference output: a function of the prompt
    key: str  # content key: the split is a hash of it, and items with equal keys are the same item
    meta: dict = field(default_factory=dict)  # what the family scorer needs (fields, facts, lines)
    output_tokens: int | None = None  # answer length in tokens, filled by `count_tokens`
    tools: list[dict] | None = None  # OpenAI function definitions for the chat template's `tools` (family "tool")

    @property
    def prompt(self) -> str:
        return self.messages[-1]["content"]

    @property
    def split(self) -> str:
        return split_of(self.key)

    def count_tokens(self, tokenizer) -> int:
        """Answer length in tokens with `tokenizer` (no special tokens); cached on the item."""
        self.output_tokens = len(tokenizer(self.answer, add_special_tokens=False)["input_ids"])
        return self.output_tokens


def encode_prompt(tokenizer, messages: list[dict], tools: list[dict] | None = None) -> list[int]:
    """Chat-template the messages (and `tools`, OpenAI function definitions; BOS included by the
    template) and add the model-turn opener: the prompt ids training and the lab's checks feed."""
    kwargs = {"tools": tools} if tools else {}
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False, **kwargs)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def split_of(key: str) -> str:
    """80/10/10 train/val/test by a stable hash of the item's content key."""
    bucket = int(hashlib.sha1(key.encode()).hexdigest()[:8], 16) % 10
    return "test" if bucket == 0 else "val" if bucket == 1 else "train"


# A tool-calling answer: for each call in order, `<tool_call>{"name": NAME, "arguments": ARGS}</tool_call>`
# with ARGS in the order of the tool's `properties`, the bytes the chat template writes for `tool_calls`.
TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
_TOOL_CALL_RE = re.compile(re.escape(TOOL_CALL_OPEN) + r"(.*?)" + re.escape(TOOL_CALL_CLOSE), re.DOTALL)


def tool_call_text(calls: list[dict]) -> str:
    """The model's answer for `calls` ([{"name", "arguments"}]): one `<tool_call>` block per call, nothing between."""
    return "".join(
        f'{TOOL_CALL_OPEN}{{"name": {json.dumps(c["name"])}, "arguments": {json.dumps(c["arguments"], ensure_ascii=False)}}}{TOOL_CALL_CLOSE}'
        for c in calls
    )


def parse_tool_calls(text: str) -> list[dict] | None:
    """The calls in `text` as [{"name", "arguments"}] (a block that is not valid JSON becomes
    {"name": None, "arguments": None}); None when `text` has no `<tool_call>` block."""
    blocks = _TOOL_CALL_RE.findall(text)
    if not blocks:
        return None
    calls = []
    for block in blocks:
        try:
            got = json.loads(block)
        except json.JSONDecodeError:
            got = None
        if isinstance(got, dict):
            calls.append({"name": got.get("name"), "arguments": got.get("arguments")})
        else:
            calls.append({"name": None, "arguments": None})
    return calls
