"""summarize: condense a text (one line to a paragraph: 8-170 tokens).

`generate` picks one of nine variants: a company's facts -> one line (variant 0 is the embedded task
suite's format), meeting notes -> N bullet points, an article, an email thread, a headline, an
executive summary, and a system prompt that carries the instruction. `payload_instruction` asks
for a summary of the shared payload instead (see families.over_payload).
"""

from __future__ import annotations

from ..parts import facts, fill, person_name, prose
from ..pools import COMPANIES, FILLER
from ..rng import Rng
from ..sample import Sample


def generate(rng: Rng) -> Sample:
    v = rng.integer(0, 8)
    if v <= 2:  # a company's facts -> one line
        company = rng.choice(COMPANIES)
        text = f"{company} held its annual review. " + facts(rng, rng.integer(3, 7))
        user = rng.choice([f"Summarize in one line:\n{text}", f"{text}\n\nOne-line summary:",
                           f"Give me a one-sentence summary of this: {text}", f"tl;dr? {text}",
                           f"Write a single-line summary of the following facts.\n{text}"]) if v else (
            f"Summarize in one line.\n{text}")
        return Sample("summarize", user, rng.integer(14, 38), style="suite" if v == 0 else "natural")
    if v == 3:  # meeting notes -> N bullet points, about 12 tokens each
        notes = "\n".join(f"- {fill(rng, s)}" for s in rng.sample(FILLER, rng.integer(5, 10)))
        n = rng.integer(2, 5)
        user = rng.choice([f"Give me the gist of these meeting notes in {n} bullet points:\n{notes}",
                           f"Summarize the notes below into {n} key takeaways.\n\n{notes}",
                           f"Can you condense these notes for people who missed the meeting?\n{notes}"])
        return Sample("summarize", user, 12 * n + rng.integer(0, 25))
    if v == 4:  # an article
        text = prose(rng, rng.integer(4, 9)) + " " + facts(rng, rng.integer(2, 5))
        user = rng.choice([f"Summarize this article in two sentences:\n\n{text}", f"Boil this down to a short paragraph: {text}",
                           f"What's the main point of this text?\n{text}", f"TL;DR please:\n{text}"])
        return Sample("summarize", user, rng.integer(30, 110))
    if v == 5:  # an email thread
        thread = "\n\n".join(f"From: {person_name(rng)}\n{prose(rng, rng.integer(1, 3))}" for _ in range(rng.integer(2, 5)))
        user = rng.choice([f"Summarise this email thread for my manager:\n\n{thread}",
                           f"Catch me up on this thread in a few lines.\n{thread}",
                           f"{thread}\n\n---\nWhat did everyone agree on? Summarize briefly."])
        return Sample("summarize", user, rng.integer(40, 120))
    if v == 6:  # a headline
        text = facts(rng, rng.integer(4, 8))
        user = rng.choice([f"Write a headline that sums up: {text}", f"Give this report a one-line title: {text}"])
        return Sample("summarize", user, rng.integer(8, 20))
    if v == 7:  # an executive summary: the longest answers of this task
        text = prose(rng, rng.integer(8, 14)) + " " + facts(rng, rng.integer(4, 8))
        user = rng.choice([f"Please write an executive summary (one paragraph) of the following report.\n\n{text}",
                           f"Summarize the following for a newsletter blurb, about 80 words:\n{text}"])
        return Sample("summarize", user, rng.integer(80, 170))
    # the system prompt carries the instruction; the user message is only the facts
    sys = rng.choice(["You write one-sentence summaries of whatever the user sends.",
                      "Summarize the user's text in at most two sentences.",
                      "You are a summarization assistant. Be brief and factual."])
    return Sample("summarize", facts(rng, rng.integer(3, 7)), rng.integer(16, 55), system=sys)


def payload_instruction(rng: Rng, payload_tokens: int) -> tuple[str, int]:
    """A summary instruction for the shared payload; each phrasing has its own answer-length range."""
    ins, (lo, hi) = rng.choice([("Summarize this in one sentence", (14, 35)), ("tl;dr", (12, 35)),
                                ("Sum up the key points", (25, 70)), ("Give me the gist", (15, 45)),
                                ("Recap this briefly", (20, 55)), ("Condense this into a single line", (12, 30)),
                                ("What's this about, in a nutshell?", (15, 40)), ("Summarise in two lines", (25, 55)),
                                ("Write a brief overview of", (30, 80)), ("Give me the main takeaways", (25, 75)),
                                ("Summarize the following in three bullet points", (30, 60)), ("Boil this down", (12, 40))])
    return ins, rng.integer(lo, hi)
