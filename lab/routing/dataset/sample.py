"""`Sample`: what a task-family generator returns, before chat wrapping, noise and request options."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Sample:
    """One generated request before chat wrapping and noise."""

    task: str  # one of policies.schema.TASKS
    user: str  # the final user message
    tokens: int  # expected answer length in tokens, before any max_tokens cap
    system: str | None = None  # a task-specific system prompt (else the wrapper may add a generic one)
    history: list[dict] = field(default_factory=list)  # earlier turns
    response_format: dict | None = None
    tools: list[dict] | None = None
    style: str = "natural"  # "suite" for the embedded task-suite format
