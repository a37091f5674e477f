"""short_qa: factual questions with a short answer (2-95 tokens; mostly block mode).

`generate` picks one of eleven variants: capitals, authors, acronyms, unit conversions, dates of
events, definitions, science facts, arithmetic, "the difference between X and Y" (the longest), a
filled template, and a system prompt that sets the answer style. `extra_phrasings` adds a pool of
other trivia questions. `generate` also supplies the unrelated earlier turn of some chats
(request.py).
"""

from __future__ import annotations

from ..parts import fill
from ..pools import ACRONYMS, ANIMALS, BOOKS, CITIES, COUNTRIES, ELEMENTS, EVENTS, PAIRS, TERMS, UNITS
from ..rng import Rng
from ..sample import Sample


def generate(rng: Rng) -> Sample:
    v = rng.integer(0, 10)
    if v == 0:  # capitals
        country, _ = rng.choice(COUNTRIES)
        q, t = rng.choice([f"What is the capital of {country}?", f"capital of {country}?",
                           f"which city is the capital of {country}", f"What's {country}'s capital city?"]), rng.integer(3, 14)
    elif v == 1:  # authors
        book, _ = rng.choice(BOOKS)
        q, t = rng.choice([f"Who wrote {book}?", f"who is the author of {book}", f"{book} - who wrote it?"]), rng.integer(4, 16)
    elif v == 2:  # acronyms (each phrasing draws its own)
        q, t = rng.choice([f"What does {rng.choice(ACRONYMS)} stand for?", f"{rng.choice(ACRONYMS)} meaning?",
                           f"what's {rng.choice(ACRONYMS)} short for"]), rng.integer(4, 20)
    elif v == 3:  # unit conversions
        small, big = rng.choice(UNITS)
        q, t = rng.choice([f"How many {small} are in a {big}?", f"how many {small} in one {big}",
                           f"1 {big} = how many {small}?"]), rng.integer(3, 14)
    elif v == 4:  # years of events
        ev, _ = rng.choice(EVENTS)
        q, t = rng.choice([f"When did {ev}?", f"What year did {ev}?", f"in which year did {ev}"]), rng.integer(3, 18)
    elif v == 5:  # definitions: a sentence or two
        term = rng.choice(TERMS)
        q, t = rng.choice([f"Define {term} in one sentence.", f"What is {term}?", f"Explain {term} briefly.",
                           f"what's {term}, in a nutshell"]), rng.integer(18, 70)
    elif v == 6:  # science facts
        el = rng.choice(ELEMENTS)
        animal, _ = rng.choice(ANIMALS)
        q, t = rng.choice([f"What is the chemical symbol for {el}?", f"How many legs does a {animal} have?",
                           f"Is {el} a metal?", "what is the boiling point of water in fahrenheit",
                           "How far is the Moon from Earth?"]), rng.integer(3, 22)
    elif v == 7:  # arithmetic, answer only
        a, b = rng.integer(2, 99), rng.integer(2, 99)
        q, t = rng.choice([f"What's {a} times {b}? Just the answer.", f"{a} + {b} = ?", f"quick: {a}*{b}",
                           f"What is {a} divided by {b}, roughly?"]), rng.integer(2, 12)
    elif v == 8:  # the difference between two things: the longest answers of this task
        x, y = rng.choice(PAIRS)
        q, t = rng.choice([f"What's the difference between {x} and {y}?",
                           f"{x} vs {y} - what's the difference, briefly?"]), rng.integer(35, 95)
    elif v == 9:  # filled templates
        q, t = fill(rng, rng.choice(["What time zone is {city} in?", "What language do they speak in {city}?",
                                     "Who founded {company}?", "Is {city} bigger than {city2}?",
                                     "What currency is used in {city}?", "How tall is Mount Everest?"])), rng.integer(4, 30)
    else:  # the system prompt sets the answer style; the question is terse
        sys = rng.choice(["You answer trivia questions with a single short phrase.", "Answer factual questions in one sentence."])
        country, _ = rng.choice(COUNTRIES)
        q = rng.choice([f"capital of {country}", f"{rng.choice(BOOKS)[0]} author", f"{rng.choice(ACRONYMS)}?"])
        return Sample("short_qa", q, rng.integer(2, 12), system=sys)
    return Sample("short_qa", q, t)


def extra_phrasings(rng: Rng) -> Sample:
    """Other trivia questions; every slot is drawn whichever question is picked."""
    q = rng.choice(["Who painted {art}?", "what is the tallest mountain in {continent}",
                    "How many players are on a {sport} team?", "Which planet is {planet}?", "What is the plural of {word}?",
                    "What's the speed of {thing}?", "When was {tech} first released?", "Who invented {inv}?",
                    "What is the largest {big} in the world?", "how do you say {phrase} in {lang}",
                    "What's the population of {city}, roughly?", "Which ocean is the {adj}?", "How old is the universe?",
                    "what's the main ingredient in {dish}"])
    q = q.format(art=rng.choice(["the Mona Lisa", "Starry Night", "Guernica", "The Scream"]),
                 continent=rng.choice(["Africa", "Europe", "South America", "Asia"]),
                 sport=rng.choice(["soccer", "basketball", "rugby", "volleyball"]),
                 planet=rng.choice(["closest to the sun", "the largest", "known as the red planet"]),
                 word=rng.choice(["cactus", "mouse", "octopus", "criterion"]), thing=rng.choice(["light", "sound"]),
                 tech=rng.choice(["Python", "Linux", "the iPhone", "Windows"]),
                 inv=rng.choice(["the telephone", "the light bulb", "the World Wide Web", "penicillin"]),
                 big=rng.choice(["desert", "country", "lake", "animal"]),
                 phrase=rng.choice(["thank you", "good morning", "cheers"]),
                 lang=rng.choice(["Japanese", "Italian", "Swahili"]), city=rng.choice(CITIES),
                 adj=rng.choice(["largest", "deepest", "smallest"]), dish=rng.choice(["guacamole", "hummus", "pesto", "risotto"]))
    return Sample("short_qa", q, rng.integer(3, 30))
