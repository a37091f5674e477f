"""Request factories for engine tests."""

from __future__ import annotations

from engines import GenerationRequest

PROMPTS = [
    "Extract the name and city: Alice Smith lives in Paris.",
    "Classify the review: the battery died after two days.",
    "Add step by step: 12 7 4 30 9",
    "def add(a, b):",
    "Summarize: the meeting moved to Tuesday.",
    "Write a story about a lighthouse, the sea and the wind, in many words.",
    "Plan: search the web, then email Bob.",
    "Hi",
]


def chat(text: str, **kwargs) -> GenerationRequest:
    return GenerationRequest(messages=[{"role": "user", "content": text}], **kwargs)
