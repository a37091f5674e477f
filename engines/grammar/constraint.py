"""Grammar-constrained decoding: llguidance's token mask over the model's next-token logits.

A request's `grammar` is an llguidance grammar (serialized; the gateway builds it from a JSON
Schema, tool definitions or a Lark grammar). Each row that has one owns a `TokenConstraint`: a
matcher that knows which tokens may come next. AR mode masks every step's logits before the
token choice; verified mode masks the AR choice after each draft token, so constrained verified
output equals constrained AR output under greedy decoding. Block mode follows a grammar only
through a skeleton-seeded canvas, checked by it (engines.modes.seeded).

An answer under a grammar always ends valid within max_new_tokens (engines.grammar.closer):
- before decoding, `GrammarTokenizer.constraint` walks the closer from the start: a grammar the
  library cannot compile or that allows no answer, or a max_new_tokens below the shortest answer
  the closer writes, is a 400 naming the numbers;
- while decoding, `keep_room` takes the chosen token only if the closer's path after it still
  fits in the tokens left, else the closer's own token; in the last tokens (`closing_window`)
  the closer's token wins outright, so most answers end a little before the limit.

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

from engines.grammar.closer import GAVE_UP, OUTSIDE, OVER_LIMIT, Closer, String, after_text
from engines.errors import InvalidRequestError
from engines.grammar_check import grammar_param, grammar_problems

# In the last tokens of max_new_tokens (CLOSING_SHARE of them, at most CLOSING_TOKENS), a
# constrained answer is steered to close: the closer's next token wins (the end of the answer
# where it may end). The model still writes its values until then; `closed_early` says it happened.
CLOSING_TOKENS = 64
CLOSING_SHARE = 0.5
SEARCH_LIMIT = 4096  # tokens the closer walks from the start before it calls the shortest answer "longer than this"
LIMITS = llguidance.LLParserLimits(verbose_errors=False)  # errors name the problem, not the parser's state


def closing_window(max_new_tokens: int) -> int:
    return min(CLOSING_TOKENS, max(8, int(max_new_tokens * CLOSING_SHARE)))


def _reason(error: str) -> str:
    error = error.replace("<non-verbose/>", "").strip()
    if error == "NoExtensionBias":  # llguidance: nothing can ever be written
        return "it allows no value at all (an empty or endlessly recursive schema)"
    return error or "unknown error"


class GrammarTokenizer:
    """The engine's tokenizer as llguidance sees it, with its closer: built once per engine (a few ms)."""

    def __init__(self, hf_tokenizer, model_vocab_size: int):
        self.tokenizer = llguidance.hf.from_tokenizer(hf_tokenizer)
        self.model_vocab_size = model_vocab_size  # logits may be wider than the tokenizer's vocabulary
        n = min(model_vocab_size, len(hf_tokenizer))
        self.texts = [hf_tokenizer.decode([t]) for t in range(n)]  # what each token writes, to follow JSON strings
        self.eos = self.tokenizer.eos_token
        self.closer = Closer(self.texts, self.tokenizer.vocab_size, self.eos, set(hf_tokenizer.all_special_ids))

    def constraint(self, grammar: str, max_new_tokens: int, opener: str | None = None) -> "TokenConstraint":
        """The grammar state of one row. Raises InvalidRequestError (400) before any decoding when the
        grammar cannot be compiled, allows no answer, or its shortest answer is over max_new_tokens;
        with an `opener` (tool_choice auto: a call or free text), also when the shortest answer that
        begins with it (the shortest call) does not fit or cannot be found: a call the grammar or the
        budget rules out would otherwise vanish into an empty or text answer, silently."""
        param = grammar_param(grammar)
        problems = grammar_problems(grammar)
        if problems:
            raise InvalidRequestError(f"the output grammar cannot be used: {'; '.join(problems)}", param=param, code="invalid_grammar")
        matcher = llguidance.LLMatcher(self.tokenizer, grammar, log_level=0, limits=LIMITS)
        if matcher.is_error():
            raise InvalidRequestError(f"the output grammar cannot be used: {_reason(matcher.get_error())}", param=param,
                                      code="invalid_grammar")
        limit = max(SEARCH_LIMIT, max_new_tokens)
        path, why = self.closer.path(matcher, OUTSIDE, limit)
        what = "the tool definitions" if param == "tools" else "the response_format schema"
        if path is None and why == OVER_LIMIT:
            raise InvalidRequestError(f"max_tokens {max_new_tokens} is below the shortest answer under {what} (more than {limit} tokens)",
                                      param="max_tokens", code="max_tokens_too_small")
        if path is None and why == GAVE_UP:
            raise InvalidRequestError(f"{what}: no way to end an answer was found within the closer's search budget (engines.grammar.closer)",
                                      param=param, code="unsupported_schema")
        if path is None:
            raise InvalidRequestError(f"{what} cannot be decoded under a grammar: {_reason(why)}", param=param, code="unsatisfiable_schema")
        if len(path) > max_new_tokens:
            raise InvalidRequestError(f"max_tokens {max_new_tokens} is below the {len(path)} tokens the shortest answer under {what} takes; "
                                      f"ask for at least {len(path)}", param="max_tokens", code="max_tokens_too_small")
        if opener is not None:
            self._check_opener(matcher, opener, limit, max_new_tokens, what)
        return TokenConstraint(matcher, self, max_new_tokens, path)

    def _check_opener(self, matcher: llguidance.LLMatcher, opener: str, limit: int, max_new_tokens: int, what: str) -> None:
        """A 400 unless the shortest answer that begins with `opener` (a tool call under tool_choice
        auto) fits max_new_tokens: the same refusals as a required call gets."""
        ids = self.tokenizer.tokenize_str(opener)
        m = matcher.deep_copy()
        if not m.consume_tokens(ids):
            raise InvalidRequestError(f"{what}: the output grammar does not begin a call with {opener!r}", param="tools", code="invalid_grammar")
        path, why = self.closer.path(m, after_text(OUTSIDE, opener), limit - len(ids))
        if path is None and why == GAVE_UP:
            raise InvalidRequestError(f"{what}: no way to end a tool call was found within the closer's search budget "
                                      "(engines.grammar.closer), so no call could be made", param="tools", code="unsupported_schema")
        if path is None and why != OVER_LIMIT:
            raise InvalidRequestError(f"{what}: no tool call can be decoded under a grammar: {_reason(why)}", param="tools",
                                      code="unsatisfiable_schema")
        shortest = len(ids) + len(path) if path is not None else limit + 1
        if shortest > max_new_tokens:
            least = f"the {shortest}" if path is not None else f"more than {limit}"
            raise InvalidRequestError(f"max_tokens {max_new_tokens} is below {least} tokens the shortest tool call under {what} takes, "
                                      f"so tool_choice auto could never call a tool; ask for at least {shortest}" if path is not None else
                                      f"max_tokens {max_new_tokens} is below {least} tokens the shortest tool call under {what} takes",
                                      param="max_tokens", code="max_tokens_too_small")


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
    """One row's grammar state. `mask_` limits logits to the tokens allowed next; `keep_room` keeps
    the chosen token only where the answer can still end in the tokens left; `consume` advances
    over committed tokens; `rollback` undoes lookahead (verified mode's checks).

    Each state (a prefix of the answer) has a way to end that fits the tokens left, or None: the
    start's is the closer's path; a child's is derived from its parent's (the rest of it when the
    token is its first, the same path when it still works after the token, else the closer's path
    from the child), and remembered by prefix. So a state's path depends on its prefix alone, and
    verified mode, walking and rolling back drafts, makes AR mode's choices exactly."""

    def __init__(self, matcher: llguidance.LLMatcher, vocab: GrammarTokenizer, max_new_tokens: int, path: list[int] | None):
        self.matcher = matcher
        self.vocab = vocab
        self.vocab_size = vocab.tokenizer.vocab_size
        self.bitmask = llguidance.torch.allocate_token_bitmask(1, self.vocab_size)  # (1, ceil(V / 32)) int32
        self.max_new_tokens = max_new_tokens
        self.window = closing_window(max_new_tokens)
        self.closed_early = False  # the closer chose a token because max_new_tokens ran low
        self._string: list[String] = [OUTSIDE]  # (inside a JSON string, after a backslash), per token consumed
        self._states = [0]  # the id of each prefix consumed so far (0: the empty answer)
        self._paths: dict[int, list[int] | None] = {0: path}  # prefix id -> its way to end (None: none known that fits)
        self._children: dict[tuple[int, int], int] = {}  # (prefix id, token) -> the id of prefix + token

    def _left(self) -> int:
        return self.max_new_tokens - (len(self._states) - 1)  # tokens consumed: the output and any lookahead

    def closing_path(self) -> list[int] | None:
        """The way to end from here (fits the tokens left), or None."""
        return self._paths[self._states[-1]]

    def _after(self, token: int) -> list[int] | None:
        """The way to end after `token` from here, derived once per prefix."""
        key = (self._states[-1], int(token))
        if key not in self._children:
            here, limit = self.closing_path(), self._left() - 1
            self._children[key] = child = len(self._children) + 1
            self._paths[child] = here[1:] if here and token == here[0] else self._path_after(token, here, limit)
        return self._paths[self._children[key]]

    def _path_after(self, token: int, here: list[int] | None, limit: int) -> list[int] | None:
        """A way to end after `token` in at most `limit` tokens: the path from here if it still works
        (a character inside a string, a digit), else the closer's from there; None if neither fits."""
        m = self.matcher.deep_copy()
        if not m.consume_token(int(token)):
            return None
        if here is not None and len(here) <= limit and m.validate_tokens([*here, self.vocab.eos]) == len(here) + 1:
            return list(here)
        state = after_text(self._string[-1], self.vocab.texts[token] if token < len(self.vocab.texts) else "")
        path, _ = self.vocab.closer.path(m, state, limit)
        return path if path is not None and len(path) <= limit else None

    def mask_(self, logits: torch.Tensor, tokens_left: int | None = None) -> torch.Tensor:
        """Set disallowed tokens of `logits` (V,) to -inf, in place; returns it. With `tokens_left`
        within the closing window, the closer's next token (the end, where allowed) is made to win."""
        llguidance.torch.fill_next_token_bitmask(self.matcher, self.bitmask, 0)
        view = logits[: self.vocab_size].unsqueeze(0)  # (1, V)
        apply_bitmask_(view, self.bitmask.to(logits.device))
        if logits.shape[0] > self.vocab_size:
            logits[self.vocab_size :] = float("-inf")  # padding rows of the embedding are never text
        path = self.closing_path()
        if tokens_left is not None and tokens_left <= self.window and path is not None:
            closing = path[0] if path else self.vocab.eos
            if bool(torch.isfinite(logits[closing])):
                logits[closing] += 1e4  # -inf stays -inf
                self.closed_early = True
        return logits

    def keep_room(self, token: int) -> int:
        """`token` if the answer can still end in the tokens left after it; else the closer's next
        token (the end, where the answer may end). The start's way to end fit max_new_tokens
        (checked before decoding), and each kept token keeps one that fits: every answer ends valid."""
        here = self.closing_path()
        if token == self.vocab.eos or here is None or self._after(token) is not None:
            return token
        self.closed_early = True
        return here[0] if here else self.vocab.eos

    def room_prefix(self, tokens: list[int]) -> int:
        """How many leading `tokens` (allowed by the grammar) can be committed so that the answer can
        still end in the tokens left: all of them when they fit; else the longest prefix found by
        halving the excess (a seeded canvas's answer that outgrew max_new_tokens, finished by AR)."""
        left = self._left()
        k = min(len(tokens), left)
        while k > 0:
            m = self.matcher.deep_copy()
            if m.consume_tokens([int(t) for t in tokens[:k]]):
                state = after_text(self._string[-1], "".join(self.vocab.texts[t] for t in tokens[:k] if t < len(self.vocab.texts)))
                path, _ = self.vocab.closer.path(m, state, left - k)
                if path is not None and len(path) <= left - k:
                    return k
            k -= max(1, k // 2) if k > 8 else 1
        return 0

    def consume(self, token: int) -> bool:
        """Advance over `token`; False if the grammar does not allow it (the row then stops)."""
        self._after(token)  # its way to end, from the state before it
        if not self.matcher.consume_token(int(token)):
            return False
        text = self.vocab.texts[token] if token < len(self.vocab.texts) else ""
        self._string.append(after_text(self._string[-1], text))
        self._states.append(self._children[(self._states[-1], int(token))])
        return True

    def accepts(self, tokens: list[int]) -> int:
        """How many leading `tokens` the grammar allows from here; the state does not change (a refused
        `consume` would leave the matcher in its error state for good)."""
        return self.matcher.validate_tokens([int(t) for t in tokens]) if tokens else 0

    def rollback(self, n: int) -> None:
        if n:
            self.matcher.rollback(n)
            del self._string[-n:], self._states[-n:]

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
