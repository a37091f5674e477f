"""Grammar-constrained decoding: llguidance's token mask over the model's next-token logits.

A request's `grammar` is an llguidance grammar (serialized; the gateway builds it from a JSON
Schema, tool definitions or a Lark grammar). Each row that has one owns a `TokenConstraint`: a
matcher that knows which tokens may come next. AR mode masks every step's logits before the
token choice; verified mode masks the AR choice after each draft token, so constrained verified
output equals constrained AR output under greedy decoding. Block mode takes no grammar: the
router sends constrained requests to a mode that can honour one.

llguidance was picked over xgrammar for what it reports (docs/serving.md has the measurement):
xgrammar's mask is several times cheaper per token, but both cost a few percent of an AR step or
less here, and llguidance names the JSON Schema features it does not implement, so an
unsupported schema is a 400 before any decoding instead of output that silently ignores the
keyword.
"""

from __future__ import annotations

import llguidance
import llguidance.hf
import llguidance.torch
import torch

from engines.errors import InvalidRequestError

# In the last tokens of max_new_tokens (CLOSING_SHARE of them, at most CLOSING_TOKENS), a
# constrained answer is steered to close: among the tokens the grammar allows, the end of the
# answer wins, then (inside a JSON string) a token that ends the string, then closing brackets,
# then a comma, then the shortest values (a digit, an empty string, true/false/null). A model that never ends a
# string would otherwise be cut mid-JSON; this way it ends as valid JSON before max_new_tokens
# (finish_reason "stop"; the stats say `closed_early`).
CLOSING_TOKENS = 64
CLOSING_SHARE = 0.5


def closing_window(max_new_tokens: int) -> int:
    return min(CLOSING_TOKENS, max(8, int(max_new_tokens * CLOSING_SHARE)))


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
        n = min(model_vocab_size, len(hf_tokenizer))
        self.texts = [hf_tokenizer.decode([t]) for t in range(n)]  # what each token writes, to follow JSON strings
        # closing preference (V,): outside a JSON string, tokens of only ] } and spaces; inside one,
        # tokens that start by ending it; the end of the answer above both.
        self.close_outside, self.close_inside = torch.zeros(model_vocab_size), torch.zeros(model_vocab_size)
        for t, text in enumerate(self.texts):
            if text.strip() and all(ch in "]} " for ch in text):
                self.close_outside[t] = 2 + text.count("]") + text.count("}")
            elif text.strip() == ",":  # ends a value when the object still needs keys: beats starting another value
                self.close_outside[t] = 1.5
            elif text.strip() in ("0", "1", '""', '"', "true", "false", "null"):
                self.close_outside[t] = 1
            if text.startswith('"') and all(ch in ']} ' for ch in text[1:]):
                self.close_inside[t] = 10 + text.count("]") + text.count("}")
        eos = self.tokenizer.eos_token
        self.close_outside[eos] = self.close_inside[eos] = 100

    def constraint(self, grammar: str, max_new_tokens: int) -> "TokenConstraint":
        problems = grammar_problems(grammar)
        if problems:
            raise InvalidRequestError(f"the output grammar cannot be used: {'; '.join(problems)}", param="response_format",
                                      code="invalid_grammar")
        constraint = TokenConstraint(llguidance.LLMatcher(self.tokenizer, grammar, log_level=0), self)
        constraint.window = closing_window(max_new_tokens)
        return constraint


def apply_bitmask_(logits: torch.Tensor, bitmask: torch.Tensor) -> None:
    """Set to -inf, in place, the entries of `logits` (B, V) whose bit in `bitmask` (B, ceil(V/32)) int32 is 0.
    llguidance.torch.apply_token_bitmask_inplace does the same under torch.compile, whose C++ build
    at every engine start cost 4 s idle and 30 s on a loaded 2-core machine (a replica restart
    waited for it); eager, these few ops take well under a millisecond at the vocabularies served."""
    bits = (bitmask.unsqueeze(-1) >> torch.arange(32, device=bitmask.device, dtype=torch.int32)) & 1  # (B, W, 32)
    allowed = bits.flatten(1)[:, : logits.shape[1]].bool()  # (B, min(V, 32 W))
    n = allowed.shape[1]
    logits[:, :n].masked_fill_(~allowed, float("-inf"))
    logits[:, n:] = float("-inf")  # tokens past the mask's words are never allowed


class TokenConstraint:
    """One row's grammar state. `mask_` limits logits to the tokens allowed next; `consume`
    advances over committed tokens; `rollback` undoes lookahead (verified mode's checks)."""

    def __init__(self, matcher: llguidance.LLMatcher, vocab: GrammarTokenizer):
        self.matcher = matcher
        self.vocab = vocab
        self.vocab_size = vocab.tokenizer.vocab_size
        self.bitmask = llguidance.torch.allocate_token_bitmask(1, self.vocab_size)  # (1, ceil(V / 32)) int32
        self.closed_early = False  # the answer was steered to close because max_new_tokens ran out
        self.window = CLOSING_TOKENS  # set per request: closing_window(max_new_tokens)
        self._string = [(False, False)]  # (inside a JSON string, after a backslash), per token consumed

    def mask_(self, logits: torch.Tensor, tokens_left: int | None = None) -> torch.Tensor:
        """Set disallowed tokens of `logits` (V,) to -inf, in place; returns it. With `tokens_left`
        under CLOSING_TOKENS, allowed closing tokens are made to win."""
        llguidance.torch.fill_next_token_bitmask(self.matcher, self.bitmask, 0)
        view = logits[: self.vocab_size].unsqueeze(0)  # (1, V)
        apply_bitmask_(view, self.bitmask.to(logits.device))
        if logits.shape[0] > self.vocab_size:
            logits[self.vocab_size :] = float("-inf")  # padding rows of the embedding are never text
        if tokens_left is not None and tokens_left <= self.window:
            bonus = (self.vocab.close_inside if self._string[-1][0] else self.vocab.close_outside)[: logits.shape[0]]
            bonus = bonus.to(logits.device)
            if bool(torch.isfinite(logits[bonus > 0]).any()):
                logits += bonus * 1e4  # -inf stays -inf
                self.closed_early = True
        return logits

    def consume(self, token: int) -> bool:
        """Advance over `token`; False if the grammar does not allow it (the row then stops)."""
        if not self.matcher.consume_token(int(token)):
            return False
        inside, escaped = self._string[-1]
        for ch in self.vocab.texts[token] if token < len(self.vocab.texts) else "":
            if escaped:
                escaped = False
            elif inside and ch == "\\":
                escaped = True
            elif ch == '"':
                inside = not inside
        self._string.append((inside, escaped))
        return True

    def accepts(self, tokens: list[int]) -> int:
        """How many leading `tokens` the grammar allows from here; the state does not change (a refused
        `consume` would leave the matcher in its error state for good)."""
        return self.matcher.validate_tokens([int(t) for t in tokens]) if tokens else 0

    def rollback(self, n: int) -> None:
        if n:
            self.matcher.rollback(n)
            del self._string[-n:]

    @property
    def accepting(self) -> bool:
        """The answer may end here (the grammar is complete, though it may allow more)."""
        return self.matcher.is_accepting()

    @property
    def done(self) -> bool:
        """The grammar is complete and allows nothing more than the end of the answer."""
        return self.matcher.is_stopped()

    @property
    def error(self) -> str:
        return self.matcher.get_error() or ""
