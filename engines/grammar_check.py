"""What is wrong with an llguidance grammar, told before any decoding: the gateway refuses an unusable
schema or tool set with a 400 naming it, and the engine checks again when it builds a row's matcher
(engines.grammar.constraint). Needs only llguidance's core: the gateway imports this, and not llguidance.torch,
which loads torch's compiler stack (3 of the 4 s a Gateway replica took to import its code, measured
on the 2-core VM)."""

from __future__ import annotations

import llguidance


def grammar_problems(grammar: str) -> list[str]:
    """What is wrong with `grammar` (unknown or unimplemented features, syntax); empty when usable."""
    try:
        is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar)
    except Exception as exc:  # malformed serialized grammar
        return [str(exc)]
    return list(messages) if is_error or messages else []


def grammar_param(grammar: str) -> str:
    """The request field a grammar came from (router.structured writes tools as Lark, schemas as JSON Schema)."""
    return "tools" if '"lark_grammar"' in grammar else "response_format"
