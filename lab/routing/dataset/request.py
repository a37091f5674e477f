"""Wrap a generated `Sample` into a labeled chat-completion request.

Three steps, in this order (the order of the draws):

1. `_messages`: noise on the user message, a system prompt (the sample's own, else a generic one
   three times in ten) and, one time in four, an earlier exchange: pleasantries or an unrelated
   short question;
2. `_options`: request options - `max_tokens` (which also caps the expected answer length),
   `response_format` (the sample's), `tools` (the sample's, else rarely two unrelated tools, so tools
   alone do not mean "plan"), `stop`;
3. the labels `task`, `output_tokens`, `style` (`mode` is added by `generate()`).
"""

from __future__ import annotations

from . import families
from .families import short_qa
from .noise import add_noise
from .parts import fill, tool_specs
from .pools import TOOLS
from .rng import Rng
from .sample import Sample

GENERIC_SYSTEMS = [
    "You are a helpful assistant.", "You are Tandem, a concise and friendly assistant.", "Answer as briefly as possible.",
    "You are an AI assistant for {company}. Be polite and accurate.", "You are a helpful, harmless and honest assistant.",
    "Keep answers short unless the user asks for detail.", "You are an assistant inside a productivity app.",
    "Respond in English. Use markdown when it helps.",
]
PLEASANTRIES = [("hi", "Hello! How can I help you today?"), ("hello, are you there?", "Yes, I'm here. What do you need?"),
                ("I have a task for you", "Sure, go ahead."), ("can you help me with something", "Of course! What is it?")]
MAX_TOKENS = [64, 128, 256, 512, 1024, 2048, 4096]
STOPS = [["\n\n"], ["###"], ["</answer>"], ["User:", "Human:"]]


def draw_request(rng: Rng, task: str) -> dict:
    """One labeled request of `task`: `messages`, the options set, `task`, `output_tokens`, `style`."""
    s = families.draw_sample(rng, task)
    rec: dict = {"messages": _messages(rng, s)}
    tokens = _options(rng, s, rec)
    rec.update(task=s.task, output_tokens=int(tokens), style=s.style)
    return rec


def _messages(rng: Rng, s: Sample) -> list[dict]:
    user = add_noise(rng, s.user)
    messages: list[dict] = []
    system = s.system or (fill(rng, rng.choice(GENERIC_SYSTEMS)) if rng.chance(0.3) else None)
    if system:
        messages.append({"role": "system", "content": system})
    if rng.chance(0.25):  # earlier turns: pleasantries or an unrelated earlier question
        if rng.chance(0.5):
            u, a = rng.choice(PLEASANTRIES)
        else:
            other = short_qa.generate(rng)
            u, a = other.user, "Sure - " + rng.choice(["here you go.", "done.", "that's it.", "hope that helps."])
        messages += [{"role": "user", "content": u}, {"role": "assistant", "content": a}]
    messages.append({"role": "user", "content": user})
    return messages


def _options(rng: Rng, s: Sample, rec: dict) -> int:
    """Set the request options on `rec`; returns the expected answer length under its max_tokens."""
    tokens = s.tokens
    if rng.chance(0.3):
        rec["max_tokens"] = rng.choice(MAX_TOKENS)
        tokens = min(tokens, rec["max_tokens"])
    if s.response_format is not None:
        rec["response_format"] = s.response_format
    tools = s.tools or (tool_specs(rng.sample(list(TOOLS), 2)) if rng.chance(0.04) else None)
    if tools:
        rec["tools"] = tools
    if rng.chance(0.1):
        rec["stop"] = list(rng.choice(STOPS))  # a copy: records must not share the pool's lists
    return tokens
