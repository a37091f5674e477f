"""Noise on the final user message: typos, chatty prefixes and suffixes, casing, extra whitespace.

Real traffic is messy; the router must not key on clean template text. Each kind is an independent
coin flip, applied in a fixed order (typos first, so a prefix is never misspelled).
"""

from __future__ import annotations

from .parts import fill
from .rng import Rng

PREFIXES = ["hey, ", "Hi! ", "ok so ", "Quick question: ", "Hello there. ", "So, ", "Hi team - ", "Morning! ",
            "I need some help. ", "My boss asked me to do this: ", "For a project at {company}: ", "urgent: ",
            "I'm not sure how to do this. ", "Can you help? "]
SUFFIXES = [" Thanks!", " thx", " Thank you in advance.", " Cheers.", " Please and thank you!", " asap pls", " :)",
            "\n\nThanks a lot!", " Much appreciated."]


def typos(rng: Rng, text: str, k: int) -> str:
    """Up to `k` typos (swap two letters, drop one, double one) in words of 4+ letters; a draw that
    lands on a shorter word is skipped, not retried."""
    words = text.split(" ")
    for _ in range(k):
        j = rng.integer(0, len(words) - 1)
        w = words[j]
        if len(w) < 4:
            continue
        p = rng.integer(1, len(w) - 2)
        words[j] = rng.choice([w[:p] + w[p + 1] + w[p] + w[p + 2 :], w[:p] + w[p + 1 :], w[:p] + w[p] + w[p:]])
    return " ".join(words)


def add_noise(rng: Rng, text: str) -> str:
    if rng.chance(0.12):
        text = typos(rng, text, rng.integer(1, 3))
    if rng.chance(0.15):
        text = fill(rng, rng.choice(PREFIXES)) + text[0].lower() + text[1:]
    if rng.chance(0.15):
        text = text + rng.choice(SUFFIXES)
    if rng.chance(0.08):
        text = text.lower()
    elif rng.chance(0.01):
        text = text.upper()
    if rng.chance(0.05):
        text = "\n" + text.replace(". ", ".  ") + "\n"
    return text
