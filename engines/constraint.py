"""Grammar-constrained decoding: llguidance's token mask over the model's next-token logits.

A request's `grammar` is an llguidance grammar (serialized; the gateway builds it from a JSON
Schema, tool definitions or a Lark grammar). Each row that has one owns a `TokenConstraint`: a
matcher that knows which tokens may come next. AR mode masks every step's logits before the
token choice; verified mode masks the AR choice after each draft token, so constrained verified
output equals constrained AR output under greedy decoding. Block mode takes no grammar: the
router sends constrained requests to a mode that can honour one.

llguidance was picked over xgrammar by measurement and by what it reports (docs/serving.md):
both cost well under a model call per token here, and llguidance names the JSON Schema features
it does not implement, so an unsupported schema is a 400 before any decoding instead of output
that silently ignores the keyword.
"""

from __future__ import annotations

import llguidance
import llguidance.hf
import llguidance.torch
import torch

from engines.errors import InvalidRequestError


def grammar_problems(grammar: str) -> list[str]:
    """What is wrong with `grammar` (unknown or unimplemented features, syntax); empty when usable."""
    try:
        is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar)
    except Exception as exc:  # malformed serialized grammar
        return [str(exc)]
    return list(messages) if is_error or messages else []


class GrammarTokenizer:
    """The engine's tokenizer as llguidance sees it: built once per engine (a few ms)."""

    def __init__(self, hf_tokenizer, model_vocab_size: int):
        self.tokenizer = llguidance.hf.from_tokenizer(hf_tokenizer)
        self.model_vocab_size = model_vocab_size  # logits may be wider than the tokenizer's vocabulary

    def constraint(self, grammar: str) -> "TokenConstraint":
        problems = grammar_problems(grammar)
        if problems:
            raise InvalidRequestError(f"the output grammar cannot be used: {'; '.join(problems)}", param="response_format",
                                      code="invalid_grammar")
        return TokenConstraint(llguidance.LLMatcher(self.tokenizer, grammar), self.tokenizer.vocab_size, self.model_vocab_size)


class TokenConstraint:
    """One row's grammar state. `mask_` limits logits to the tokens allowed next; `consume`
    advances over committed tokens; `rollback` undoes lookahead (verified mode's checks)."""

    def __init__(self, matcher: llguidance.LLMatcher, vocab_size: int, model_vocab_size: int):
        self.matcher = matcher
        self.vocab_size = vocab_size
        self.model_vocab_size = model_vocab_size
        self.bitmask = llguidance.torch.allocate_token_bitmask(1, vocab_size)  # (1, ceil(V / 32)) int32

    def mask_(self, logits: torch.Tensor) -> torch.Tensor:
        """Set disallowed tokens of `logits` (V,) to -inf, in place; returns it."""
        llguidance.torch.fill_next_token_bitmask(self.matcher, self.bitmask, 0)
        view = logits[: self.vocab_size].unsqueeze(0)  # (1, V)
        llguidance.torch.apply_token_bitmask_inplace(view, self.bitmask.to(logits.device))
        if logits.shape[0] > self.vocab_size:
            logits[self.vocab_size :] = float("-inf")  # padding rows of the embedding are never text
        return logits

    def consume(self, token: int) -> bool:
        """Advance over `token`; False if the grammar does not allow it (the row then stops)."""
        return bool(self.matcher.consume_token(int(token)))

    def rollback(self, n: int) -> None:
        if n:
            self.matcher.rollback(n)

    @property
    def done(self) -> bool:
        """The grammar is complete and allows nothing more than the end of the answer."""
        return self.matcher.is_stopped()

    @property
    def error(self) -> str:
        return self.matcher.get_error() or ""
