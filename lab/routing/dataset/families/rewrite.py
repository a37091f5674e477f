"""rewrite: restyle, correct, shorten or translate a text (the answer is about as long as the input).

`generate` draws a text (1-6 sentences, or about one time in five 16-28, for long rewrites) and one
of ten kinds of rewrite; the expected length is the input's length times a factor per kind (about
half for "concise", more for translations). For "grammar" the text gets typos first, so there is
something to fix. About one time in eight the instruction moves into the system prompt.
`payload_instruction` asks for a rewrite of the shared payload instead.

Input length uses router.decision.features.approx_tokens (characters / 4), the estimate the router itself sees.
"""

from __future__ import annotations

from router.decision.features import approx_tokens

from ..noise import typos
from ..parts import prose
from ..rng import Rng
from ..sample import Sample

# answer length / input length, per kind of rewrite; the rest keep about the input's length
LENGTH_FACTOR = {"concise": (0.4, 0.6), "translate": (1.1, 1.3), "bullets": (0.8, 1.1), "casual": (0.8, 1.0)}
DEFAULT_FACTOR = (0.95, 1.2)


def generate(rng: Rng) -> Sample:
    long = rng.chance(0.22)
    text = prose(rng, rng.integer(16, 28)) if long else prose(rng, rng.integer(1, 6))
    n = approx_tokens(text)  # prose() is never empty, so this is >= 1
    kind = rng.choice(["formal", "casual", "grammar", "concise", "translate", "plain", "friendly", "bullets", "passive",
                       "professional"])
    if kind == "grammar":
        text = typos(rng, text, k=max(2, n // 15))
    # built whole every time: the two translate phrasings draw their language even for other kinds
    ask = {
        "formal": ["Rewrite this paragraph to sound more formal:", "Make this more professional and formal please",
                   "Formalize the tone of:"],
        "casual": ["Rewrite this in a relaxed, casual tone:", "make it sound less stiff, more like a text to a friend:"],
        "grammar": ["Fix the grammar and spelling:", "Proofread this and correct the mistakes, keep my wording otherwise:",
                    "correct the typos in"],
        "concise": ["Shorten this to about half the length:", "Make this more concise:", "Trim this down, it's too wordy:"],
        "translate": [f"Translate into {rng.choice(['French', 'Spanish', 'German', 'Portuguese', 'Italian'])}:",
                      f"Can you put this in {rng.choice(['French', 'Spanish', 'German', 'Japanese'])}?"],
        "plain": ["Rephrase in plain English that a 10-year-old could follow:", "Simplify the wording of this text:"],
        "friendly": ["Make this email friendlier:", "Rewrite to sound warmer and more polite:"],
        "bullets": ["Convert this text to bullet points:", "Turn this paragraph into a bulleted list:"],
        "passive": ["Rewrite the following in the passive voice:", "Change this to passive voice:"],
        "professional": ["Paraphrase the following so it fits a LinkedIn post:", "Reword this for a client-facing email:",
                         "Paraphrase this:"],
    }[kind]
    factor = LENGTH_FACTOR.get(kind, DEFAULT_FACTOR)
    tokens = int(n * rng.uniform(*factor)) + rng.integer(2, 8)
    a = rng.choice(ask)
    user = rng.choice([f"{a}\n\n{text}", f"{a} \"{text}\"", f"{text}\n\n^ {a[0].lower() + a[1:].rstrip(':')}"])
    sys = None
    if rng.chance(0.12):  # the instruction moves into the system prompt
        sys, user = f"You are an editor. {a.rstrip(':')} whatever the user sends; return only the rewritten text.", text
    return Sample("rewrite", user, tokens, system=sys)


def payload_instruction(rng: Rng, payload_tokens: int) -> tuple[str, int]:
    """A rewrite instruction for the shared payload; the answer is `payload_tokens` times the phrasing's factor."""
    # built whole every time: the translate phrasing draws its language whichever phrasing is picked
    ins, factor = rng.choice([("Rewrite this more politely", (1.0, 1.3)), ("Make this sound more professional", (1.0, 1.3)),
                              ("Rephrase", (0.9, 1.1)), ("Paraphrase this", (0.9, 1.1)), ("Reword the following", (0.9, 1.1)),
                              (f"Translate to {rng.choice(['Spanish', 'French', 'German', 'Italian', 'Dutch'])}", (1.1, 1.4)),
                              ("Polish this text", (0.95, 1.15)), ("Proofread and correct", (0.95, 1.05)),
                              ("Simplify this for a child", (0.9, 1.3)), ("Make it punchier", (0.6, 0.9)),
                              ("Tone this down", (0.9, 1.1)), ("Turn this into a formal complaint", (1.1, 1.6)),
                              ("Edit this for clarity", (0.9, 1.1)), ("Make this shorter", (0.4, 0.7)),
                              ("Rewrite in the first person", (0.95, 1.1))])
    return ins, int(payload_tokens * rng.uniform(*factor)) + rng.integer(2, 6)
