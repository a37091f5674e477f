"""Content parts the task-family generators build requests from.

- `person_name`, `fill` (a template's {city}, {first}, {company}, ... slots), `facts` (filler
  sentences), `prose` (plain sentences): small draws over the pools;
- `review`: a product review and its sentiment label;
- `payload`: a text from a pool shared by every task type, so that the instruction wrapped around it,
  not the text, tells the tasks apart (see families.over_payload);
- `tool_specs`: OpenAI `tools` entries for the pool's tool signatures (no draws).

`fill` draws every slot, used or not, so a template's draw count never depends on its wording.
"""

from __future__ import annotations

from .pools import CITIES, COMPANIES, COUNTRIES, FILLER, FIRST, JOBS, LAST, NEG, NEU, POS, PRODUCTS, PROSE, TICKETS, TOOLS
from .rng import Rng


def person_name(rng: Rng) -> str:
    return f"{rng.choice(FIRST)} {rng.choice(LAST)}"


def fill(rng: Rng, template: str) -> str:
    return template.format(city=rng.choice(CITIES), city2=rng.choice(CITIES), first=rng.choice(FIRST),
                           first2=rng.choice(FIRST), company=rng.choice(COMPANIES), product=rng.choice(PRODUCTS),
                           num=rng.integer(1000, 99999), pct=rng.integer(2, 40))


def facts(rng: Rng, n: int) -> str:
    """`n` distinct filler sentences ("Costs rose by 12 percent ..."), slots filled."""
    return " ".join(fill(rng, s) for s in rng.sample(FILLER, n))


def prose(rng: Rng, sentences: int) -> str:
    """`sentences` plain sentences (repeats allowed), capitalized and full-stopped."""
    out = []
    for _ in range(sentences):
        s = rng.choice(PROSE)
        out.append(s[0].upper() + s[1:] + ".")
    return " ".join(out)


def review(rng: Rng) -> tuple[str, str]:
    """A short product review and its label (positive, negative or neutral)."""
    label = rng.choice(["positive", "negative", "neutral"])
    phrase = rng.choice({"positive": POS, "negative": NEG, "neutral": NEU}[label])
    prod = rng.choice(PRODUCTS)
    text = rng.choice([f"I bought the {prod} last month and {phrase}.",
                       f"{phrase.capitalize()}. The {prod} is {rng.choice(['my first', 'a gift', 'a replacement'])}.",
                       f"{prod.capitalize()}: {phrase}!",
                       f"Honestly? {phrase}. {rng.choice(['Shipping was fast.', 'Two stars for the box.', ''])}"])
    return text.strip(), label


def payload(rng: Rng) -> str:
    """A text to work on, from a pool shared by all task types, so that the words of the
    instruction - not the payload - tell the task apart. Never empty."""
    k = rng.integer(0, 13)
    # drawn for every kind, used by some: the draw count per kind stays fixed
    name, city, company, prod = person_name(rng), rng.choice(CITIES), rng.choice(COMPANIES), rng.choice(PRODUCTS)
    first = name.split()[0]
    if k == 0:  # a one-line bio
        return f"{name} is {rng.integer(20, 70)} years old and works as a {rng.choice(JOBS)} at {company} in {city}."
    if k == 1:  # a product line
        return (f"{prod.title()}, ${rng.integer(10, 900)}.{rng.integer(10, 99)}, {rng.choice(['black', 'white', 'blue'])}, "
                f"{rng.integer(1, 3)}-year warranty, ships from {city}.")
    if k == 2:  # a short email
        return f"Hi {first}, {prose(rng, rng.integer(1, 3))} Best, {rng.choice(FIRST)}"
    if k == 3:  # facts in one line
        return "; ".join(fill(rng, s).rstrip(".") for s in rng.sample(FILLER, rng.integer(2, 5))) + "."
    if k == 4:
        return review(rng)[0]
    if k == 5:  # a support ticket
        return rng.choice(rng.choice(list(TICKETS.values()))).capitalize() + "."
    if k == 6:  # a notification (all three drawn, one kept)
        return rng.choice([f"Your flight {rng.choice(['LH', 'BA', 'AF', 'UA'])}{rng.integer(100, 999)} departs "
                           f"{rng.integer(6, 22)}:{rng.integer(10, 59)} from gate {rng.choice('ABCD')}{rng.integer(1, 40)}.",
                           f"Your code is {rng.integer(100000, 999999)}. It expires in {rng.integer(5, 15)} minutes.",
                           f"Package {rng.integer(10**8, 10**9)} will arrive {rng.choice(['today', 'tomorrow', 'on Friday'])} "
                           f"between {rng.integer(8, 12)} and {rng.integer(13, 18)}."])
    if k == 7:  # a receipt
        return (f"{rng.choice(['FreshMart', 'Corner Cafe', 'BuildIt', 'PageTurner Books'])} "
                f"{rng.integer(1, 28):02d}/{rng.integer(1, 12):02d}/2024 {rng.integer(1, 6)} items "
                f"Total {rng.integer(3, 250)}.{rng.integer(10, 99)}")
    if k == 8:  # a postal address
        return (f"{rng.integer(1, 999)} {rng.choice(['Baker', 'Elm', 'Harbor', 'Station'])} Street, {city} "
                f"{rng.integer(10000, 99999)}, {rng.choice(COUNTRIES)[0]}")
    if k == 9:  # a paper abstract
        return (f"We propose a {rng.choice(['simple', 'new', 'scalable'])} method for "
                f"{rng.choice(['faster training', 'cheaper inference', 'better retrieval'])} "
                f"and show a {rng.integer(2, 9)}x speedup with {rng.choice(['no', 'little', 'a small'])} loss in accuracy "
                f"on {rng.integer(3, 12)} benchmarks.")
    if k == 10:  # an incident chat log
        a, b = rng.choice(FIRST), rng.choice(FIRST)
        lines = ["deploy failed", "rollback done", "root cause was a missing env var", "adding a check to CI",
                 "who is on call?", "I'll write the postmortem", "customers noticed at 9am", "fixed now"]
        return " ".join(f"{x}: {y}" for x, y in zip([a, b, a, b], rng.sample(lines, 4)))
    if k == 11:  # a story outline
        return rng.choice(["The hero leaves his village, fights a dragon, loses his sword and returns home wiser.",
                           f"A {rng.choice(JOBS)} in {city} finds an old letter and tracks down its author.",
                           "Two rival bakers are forced to share a kitchen and end up opening a shop together."])
    if k == 12:  # a job ad
        return (f"{rng.choice(JOBS).title()} wanted at {company}, {city} ({rng.choice(['remote', 'hybrid', 'on-site'])}). "
                f"Salary {rng.integer(40, 120)}-{rng.integer(121, 180)}k.")
    return prose(rng, rng.integer(2, 5))


def tool_specs(names: list[str]) -> list[dict]:
    """OpenAI `tools` entries for the named pool tools; every argument is a string."""
    specs = []
    for n in names:
        args = TOOLS[n][len(n) + 1 : -1].split(", ")
        specs.append({"type": "function", "function": {"name": n, "description": f"{n.replace('_', ' ')}",
                      "parameters": {"type": "object", "properties": {a: {"type": "string"} for a in args}}}})
    return specs
