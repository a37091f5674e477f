"""The task vocabulary of routing policies: the task types the router predicts, the mode each
defaults to, and the check every policy field keyed by task type shares (its message names the
valid task types)."""

from __future__ import annotations

TASKS: tuple[str, ...] = ("extract", "classify", "summarize", "rewrite", "plan", "short_qa", "reason", "code", "write")

DEFAULT_TASK_MODES: dict[str, str] = {
    "extract": "block",
    "classify": "block",
    "summarize": "block",
    "rewrite": "block",
    "plan": "block",
    "short_qa": "block",
    "code": "verified",
    "reason": "ar",
    "write": "ar",
}


def check_task_keys(mapping: dict, what: str) -> None:
    """Refuse task types outside TASKS among `mapping`'s keys (`what` names the field)."""
    unknown = sorted(set(mapping) - set(TASKS))
    if unknown:
        raise ValueError(f"unknown task type(s) {', '.join(unknown)} in {what}; valid task types: {', '.join(TASKS)}")
