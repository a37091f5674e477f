"""The task suite the embedded model is trained and evaluated on: eleven families of chat tasks.

Every item is generated from a seeded `random.Random`, so a suite is a pure function of
(family, split, seed). The answer is a function of the prompt (no free choices), so a tiny
model can learn it exactly. Prompts vary in wording, order, length and distractor sentences,
so neither the model nor the router can key on one template.

Families (answer lengths measured with the shipped tokenizer, see docs/model.md):
- extract   facts in varied sentences -> JSON object with the requested fields, copied
- classify  review or support ticket -> one label from the set the prompt gives
- summarize a few fact sentences -> a one-line summary in a fixed shape
- plan      a goal and a tool list -> JSON list of tool calls
- code      a one-line spec -> a short Python function
- reason    add 8-25 small numbers, one running total per line (long, each line depends on the last)
- write     a templated story or report of 5-10 paragraphs (long: more than one 256-token canvas)
- tool      OpenAI-style tools in the chat template -> `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`
            per call, or a text answer from a tool result, or JSON with the keys the user names
            (the items carry `tools`: render them with `apply_chat_template(messages, tools=item.tools)`)
- schema    a message + a JSON schema (system turn) -> the JSON object, values copied (open vocabulary)
- toolcall  made-up tools + a request one answers -> its `<tool_call>`, argument values copied (open vocabulary)
- label     a message + a label set -> {"<key>": "<label>"} under an enum schema
            (these three are in open_tasks.py; opt-in for training, outside TASK_FAMILIES)

Splits: an item's split is a hash of its content key (the user message), so train, validation
and test never share an item, whatever seed produced them.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

# The item, its split and the tool-call text live in `items`, which `open_tasks` imports too (no cycle).
from lab.model.items import SPLITS, TOOL_CALL_CLOSE, TOOL_CALL_OPEN, TaskItem, parse_tool_calls, split_of, tool_call_text
from lab.model.open_tasks import make_copy, make_label, make_schema, make_toolcall, score_fields
from lab.model.wild_tasks import make_wild

# Open-vocabulary families (lab/model/open_tasks.py): values are generated, so the model must
# copy them from the prompt. Appended last with weight 0 by default (train.OPT_IN_FAMILIES), so
# `rng.choices(SHORT_FAMILIES, weights)` draws what it drew before they existed.
OPEN_FAMILIES = ("schema", "toolcall", "label")
SHORT_FAMILIES = ("extract", "classify", "summarize", "plan", "code", "tool") + OPEN_FAMILIES
LONG_FAMILIES = ("reason", "write")
# Families that are plain chat requests, one per routed task type: what the cost profile, the
# router's data set and `bench serve` draw from. "tool" requests are structured (a grammar decides
# their mode), so they are benchmarked on their own (`tandem bench structured`).
TASK_FAMILIES = ("extract", "classify", "summarize", "plan", "code", "reason", "write")

# --------------------------------------------------------------------------------------------
# Vocabulary of entities: a few hundred at most, so names stay one or two BPE pieces.

FIRST_NAMES = (
    "Ana Ben Carla David Elena Farid Grace Hugo Ines Jonas Kira Leo Maya Nina Omar Paula Quinn Rosa Sam Tara "
    "Umar Vera Wendy Xavier Yara Zoe Adam Bella Chen Dora Emil Fiona Gabe Hana Ivan Julia Karl Lena Marco Nora "
    "Oscar Petra Raj Sara Tom Ula Victor Willa Yuri Zara Alex Bruno Clara Dmitri Eva Felix Gina Hans Ida Jack "
    "Kofi Lucia Mats Nadia Otto Pia Rami Sofia Theo Una Vik Wanda Amir Beth Cora Diego Erik Freya Gus Holly"
).split()
LAST_NAMES = (
    "Smith Lopez Chen Novak Patel Kim Silva Brown Rossi Müller Garcia Jensen Okafor Tanaka Costa Weber Dubois "
    "Khan Ivanova Larsen Moreau Nguyen Santos Fischer Haddad Kowalski Ortiz Berg Quinn Reyes Sato Torres Vogel "
    "Walsh Young Adler Baker Cruz Diaz Evans Ford Gray Hill Ito Jones Klein Lund Mendes Nash Park"
).split()
CITIES = (
    "Paris Lima Rome Oslo Cairo Delhi Tokyo Berlin Madrid Lisbon Vienna Prague Dublin Seoul Quito Accra Nairobi "
    "Sydney Boston Denver Austin Chicago Toronto Montreal Warsaw Athens Riga Tallinn Helsinki Bergen Porto "
    "Seville Lyon Milan Naples Munich Hamburg Zurich Geneva Krakow Budapest Sofia Istanbul Dubai Mumbai Manila "
    "Hanoi Bangkok Jakarta Perth Auckland Santiago Bogota Havana Dakar Tunis Casablanca Kyoto Osaka"
).split()
COMPANIES = (
    "Acme Globex Initech Umbrella Stark Wayne Hooli Vandelay Cyberdyne Tyrell Soylent Wonka Dunder Pied Contoso "
    "Fabrikam Northwind Tailspin Litware Proseware Zenith Orbital Nimbus Quantum Apex Summit Beacon Harbor Falcon "
    "Granite"
).split()
ROLES = (
    "engineer teacher nurse designer chef pilot lawyer baker writer analyst farmer doctor architect plumber "
    "librarian manager painter driver scientist editor"
).split()
DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
PRODUCTS = (
    "laptop phone headset keyboard kettle blender camera printer monitor router charger backpack lamp speaker "
    "watch tablet mouse heater fan toaster"
).split()
PETS = "dog cat parrot horse rabbit goat".split()
PET_NAMES = "Rex Luna Max Bella Coco Milo Nala Bruno Kiwi Pepper Ziggy Olive".split()
OBJECTS = "an old map|a silver key|a broken compass|a red notebook|a tiny lantern|a wooden box|a lost letter|a golden coin".split("|")
SEASONS = "spring summer autumn winter".split()
FILLER = (
    "The weather was mild that week.",
    "Nothing else changed in the office.",
    "The form was filed on paper.",
    "Coffee was served at noon.",
    "A short note follows.",
    "This record was updated recently.",
    "Please keep this private.",
    "The line was busy for a while.",
)


def _full_name(rng: random.Random) -> str:
    return f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"


def _join_and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


# --------------------------------------------------------------------------------------------
# Items and scores


@dataclass
class Score:
    exact: bool  # equal to the reference after whitespace normalisation
    family_score: float  # partial credit in [0, 1]: field, line or fact accuracy (1.0 when exact)


def normalize(text: str) -> str:
    """Collapse every whitespace run to one space and strip the ends."""
    return " ".join(text.split())


def _user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def _arrange(rng: random.Random, instruction: str, body: str) -> str:
    """Instruction before or after the body, with varied separators."""
    sep = rng.choice(["\n\n", "\n", " "])
    return f"{instruction}{sep}{body}" if rng.random() < 0.6 else f"{body}{sep}{instruction}"


# --------------------------------------------------------------------------------------------
# extract

_EXTRACT_FACTS = {
    "name": ("This note is about {name}.", "Meet {name}.", "{name} filled in the form today.", "Our new contact is {name}.", "Name: {name}."),
    "age": ("{first} is {age} years old.", "Age: {age}.", "{first} turned {age} this year.", "{first} is aged {age}."),
    "city": ("{first} lives in {city}.", "Home city: {city}.", "{first} moved to {city} last year.", "{first} is based in {city}."),
    "company": ("{first} works at {company}.", "Employer: {company}.", "{first} joined {company}.", "{first} is employed by {company}."),
    "role": ("{first} works as a {role}.", "Job title: {role}.", "By trade, {first} is a {role}.", "{first} is a {role}."),
    "year": ("{first} started in {year}.", "Start year: {year}.", "{first} began the job in {year}.", "Since {year}, {first} has held the post."),
}
_EXTRACT_ASK = (
    "Extract {fields} from the text as a JSON object.",
    "Return JSON with the keys {fields}.",
    "Read the note and give {fields} in JSON.",
    "From the text below, pull out {fields}. Answer with a JSON object only.",
    "Fill a JSON object with these fields: {fields}.",
)


def _extract(rng: random.Random) -> TaskItem:
    first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
    values = {
        "name": f"{first} {last}",
        "age": rng.randint(18, 79),
        "city": rng.choice(CITIES),
        "company": rng.choice(COMPANIES),
        "role": rng.choice(ROLES),
        "year": rng.randint(1990, 2024),
    }
    others = [f for f in _EXTRACT_FACTS if f != "name"]
    asked = rng.sample(others, rng.randint(2, 4))
    if rng.random() < 0.8:
        asked.insert(rng.randint(0, 1), "name")
    stated = set(asked) | set(rng.sample(others, rng.randint(0, 2)))  # unrequested facts are distractors
    subs = dict(values, first=first)
    sentences = [rng.choice(_EXTRACT_FACTS["name"]).format(**subs)]
    rest = [rng.choice(_EXTRACT_FACTS[f]).format(**subs) for f in _EXTRACT_FACTS if f in stated and f != "name"]
    rng.shuffle(rest)
    sentences += rest
    if rng.random() < 0.4:
        sentences.insert(rng.randint(1, len(sentences)), rng.choice(FILLER))
    style = rng.random()
    names = [f'"{f}"' for f in asked] if style < 0.5 else asked
    fields = _join_and(names) if rng.random() < 0.5 else ", ".join(names)
    prompt = _arrange(rng, rng.choice(_EXTRACT_ASK).format(fields=fields), " ".join(sentences))
    answer = json.dumps({f: values[f] for f in asked})
    return TaskItem("extract", _user(prompt), answer, key=prompt, meta={"fields": {f: values[f] for f in asked}})


def _score_extract(item: TaskItem, output: str) -> float:
    try:
        got = json.loads(output)
    except (json.JSONDecodeError, TypeError):
        return 0.0
    if not isinstance(got, dict):
        return 0.0
    want = item.meta["fields"]
    return sum(got.get(k) == v for k, v in want.items()) / len(want)


# --------------------------------------------------------------------------------------------
# classify

_SENTIMENT = {
    "positive": ("works great", "I love it", "best purchase this year", "totally worth the money", "very happy with it", "excellent quality"),
    "negative": ("broke after two days", "a waste of money", "I want my money back", "terrible quality", "stopped working", "very disappointed"),
    "neutral": ("it does the job", "nothing special", "about what I expected", "it is okay", "average at best, not bad either", "fine for the price"),
}
_TICKETS = {
    "billing": ("I was charged twice this month", "my invoice shows the wrong amount", "the card payment failed"),
    "shipping": ("my parcel has not arrived", "the delivery is late", "the package went to the wrong address"),
    "login": ("I cannot sign in", "the password reset link does not work", "my account is locked after a login attempt"),
    "refund": ("I returned the item and want my money back", "the refund has not reached my card", "please refund my order"),
    "bug": ("the app crashes when I open settings", "the screen freezes on start", "the save button does nothing"),
}
_CLASSIFY_ASK = (
    "Classify the {what}. Labels: {labels}. Answer with the label only.",
    "Which label fits this {what}: {labels}?",
    "Pick one of {labels} for the {what} below.",
    "Label the {what} as one of: {labels}.",
)


def _classify(rng: random.Random) -> TaskItem:
    if rng.random() < 0.5:
        label = rng.choice(sorted(_SENTIMENT))
        labels = sorted(_SENTIMENT)
        product = rng.choice(PRODUCTS)
        opener = rng.choice([f"I bought this {product} last month.", f"Review of the {product}:", f"My new {product}.", f"Got the {product} as a gift."])
        phrases = rng.sample(_SENTIMENT[label], rng.randint(1, 2))
        body = " ".join([opener] + [p[0].upper() + p[1:] + "." for p in phrases])
        what = rng.choice(["review", "product review"])
    else:
        label = rng.choice(sorted(_TICKETS))
        labels = [label] + rng.sample([t for t in _TICKETS if t != label], rng.randint(2, 4))
        greeting = rng.choice(["Hello,", "Hi team,", "Dear support,", f"This is {rng.choice(FIRST_NAMES)}."])
        issue = rng.choice(_TICKETS[label])
        extra = rng.choice(["", f" My order is {rng.randint(1000, 9999)}.", " Please help.", f" I live in {rng.choice(CITIES)}."])
        body = f"{greeting} {issue[0].upper() + issue[1:]}.{extra}"
        what = rng.choice(["support ticket", "ticket", "customer message"])
    rng.shuffle(labels)
    prompt = _arrange(rng, rng.choice(_CLASSIFY_ASK).format(what=what, labels=", ".join(labels)), body)
    return TaskItem("classify", _user(prompt), label, key=prompt, meta={"labels": labels})


def _score_classify(item: TaskItem, output: str) -> float:
    return float(re.sub(r"[^a-z]", "", output.lower()) == item.answer)


# --------------------------------------------------------------------------------------------
# summarize

_EVENTS = (
    "open a bakery", "run a marathon", "start a podcast", "plant a garden", "sell the old car", "paint the house",
    "learn to sail", "host a dinner", "visit a museum", "repair the roof", "adopt a dog", "write a book",
)
_REASONS = ("help the family", "save money", "meet new people", "stay healthy", "have some fun", "learn something new", "support the town")
_SUMMARY_FACTS = {
    "event": ("The plan is to {event}.", "{first} wants to {event}.", "{first} has decided to {event}."),
    "city": ("It will happen in {city}.", "The place is {city}.", "All of this takes place in {city}."),
    "day": ("The day is {day}.", "{first} picked {day}.", "It is set for {day}."),
    "reason": ("The goal is to {reason}.", "{first} does it to {reason}.", "Why? To {reason}."),
}
_SUMMARY_ASK = (
    "Summarize the facts in one line.",
    "Write a one-line summary.",
    "Give a one-sentence summary of these notes.",
    "Sum this up in a single line.",
)


def _summarize(rng: random.Random) -> TaskItem:
    first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
    facts = {"name": f"{first} {last}", "event": rng.choice(_EVENTS), "city": rng.choice(CITIES), "day": rng.choice(DAYS), "reason": rng.choice(_REASONS)}
    intro = rng.choice(["{name} has a plan.", "This is about {name}.", "Notes on {name}.", "{name} shared some news."]).format(**facts)
    rest = [rng.choice(t).format(first=first, **facts) for t in _SUMMARY_FACTS.values()]
    rng.shuffle(rest)
    if rng.random() < 0.4:
        rest.insert(rng.randint(0, len(rest)), rng.choice(FILLER))
    prompt = _arrange(rng, rng.choice(_SUMMARY_ASK), " ".join([intro] + rest))
    answer = "{name} will {event} in {city} on {day} to {reason}.".format(**facts)
    return TaskItem("summarize", _user(prompt), answer, key=prompt, meta={"facts": list(facts.values())})


def _score_summarize(item: TaskItem, output: str) -> float:
    out = normalize(output)
    return sum(f in out for f in item.meta["facts"]) / len(item.meta["facts"])


# --------------------------------------------------------------------------------------------
# plan

_TOOLS = {
    "get_weather": "get_weather(city, day)",
    "send_message": "send_message(to, about)",
    "search_flights": "search_flights(origin, destination, day)",
    "book_flight": "book_flight(origin, destination, day)",
    "find_contact": "find_contact(name)",
    "create_event": "create_event(with, day, topic)",
    "search_products": "search_products(query)",
    "add_to_cart": "add_to_cart(item, quantity)",
    "web_search": "web_search(query)",
    "save_note": "save_note(topic)",
}
_TOPICS = ("the budget", "the launch", "hiring", "the roadmap", "a new client", "the trip")


def _call(tool: str, **args) -> dict:
    return {"tool": tool, "args": args}


def _plan(rng: random.Random) -> TaskItem:
    kind = rng.choice(["weather", "flight", "meeting", "shopping", "lookup"])
    if kind == "weather":
        city, day, who = rng.choice(CITIES), rng.choice(DAYS), rng.choice(FIRST_NAMES)
        goal = rng.choice([f"Check the weather in {city} on {day} and tell {who} about it.", f"{who} wants to know the weather for {city} on {day}; find it and send it.", f"Find out how the weather is in {city} on {day}, then message {who}."])
        calls = [_call("get_weather", city=city, day=day), _call("send_message", to=who, about="weather")]
    elif kind == "flight":
        a, b = rng.sample(CITIES, 2)
        day = rng.choice(DAYS)
        goal = rng.choice([f"Book a flight from {a} to {b} on {day}.", f"I need to fly {a} to {b} on {day}. Find and book it.", f"Get me on a plane from {a} to {b}, {day}."])
        calls = [_call("search_flights", origin=a, destination=b, day=day), _call("book_flight", origin=a, destination=b, day=day)]
        if rng.random() < 0.5:
            who = rng.choice(FIRST_NAMES)
            goal += rng.choice([f" Then tell {who}.", f" Let {who} know afterwards."])
            calls.append(_call("send_message", to=who, about="flight"))
    elif kind == "meeting":
        name, day, topic = _full_name(rng), rng.choice(DAYS), rng.choice(_TOPICS)
        goal = rng.choice([f"Set up a meeting with {name} on {day} about {topic}.", f"Schedule time with {name} on {day} to discuss {topic}.", f"Put a call about {topic} with {name} in the calendar for {day}."])
        calls = [_call("find_contact", name=name), _call("create_event", **{"with": name, "day": day, "topic": topic})]
    elif kind == "shopping":
        product, qty = rng.choice(PRODUCTS), rng.randint(1, 5)
        goal = rng.choice([f"Order {qty} {product} for the office.", f"Buy {qty} of the {product} and put them in the cart.", f"We need {qty} new {product}; add them to the cart."])
        calls = [_call("search_products", query=product), _call("add_to_cart", item=product, quantity=qty)]
    else:
        city = rng.choice(CITIES)
        what = rng.choice(["population", "history", "best museums", "train lines"])
        goal = rng.choice([f"Look up the {what} of {city} and save a note.", f"Research the {what} of {city}, then keep a note on it.", f"Find the {what} of {city} and store it in my notes."])
        calls = [_call("web_search", query=f"{what} of {city}"), _call("save_note", topic=f"{what} of {city}")]
    needed = list(dict.fromkeys(c["tool"] for c in calls))
    tools = needed + rng.sample([t for t in _TOOLS if t not in needed], rng.randint(1, 3))
    rng.shuffle(tools)
    tool_list = rng.choice(["\n".join(f"- {_TOOLS[t]}" for t in tools), "; ".join(_TOOLS[t] for t in tools)])
    ask = rng.choice(["Answer with a JSON list of tool calls.", "Reply with the tool calls as a JSON list.", "Plan the steps as a JSON list of calls."])
    intro = rng.choice(["Tools:", "Available tools:", "You can call:"])
    goal_line = rng.choice(["Goal: ", "Task: ", ""]) + goal
    parts = [f"{intro}\n{tool_list}", goal_line]
    if rng.random() < 0.5:
        parts.reverse()
    prompt = "\n".join(parts + [ask])
    return TaskItem("plan", _user(prompt), json.dumps(calls), key=prompt, meta={"calls": calls})


def _score_plan(item: TaskItem, output: str) -> float:
    try:
        got = json.loads(output)
    except (json.JSONDecodeError, TypeError):
        return 0.0
    if not isinstance(got, list):
        return 0.0
    want = item.meta["calls"]
    return sum(g == w for g, w in zip(got, want)) / max(len(want), len(got))


# --------------------------------------------------------------------------------------------
# code

_VERBS = "compute get make find calc check apply scale shift count".split()
_NOUNS = "total value score price size result level rate step limit".split()
# (description, body); {a} and {b} are argument names, {k} a constant
_CODE_OPS = (
    ("returns {a} plus {k}", "return {a} + {k}", 1),
    ("returns {a} minus {k}", "return {a} - {k}", 1),
    ("returns {a} times {k}", "return {a} * {k}", 1),
    ("returns the square of {a}", "return {a} * {a}", 1),
    ("returns True when {a} is even", "return {a} % 2 == 0", 1),
    ("returns the sum of the list {a}", "return sum({a})", 1),
    ("returns the largest item of {a}", "return max({a})", 1),
    ("returns the length of {a}", "return len({a})", 1),
    ("returns {a} in upper case", "return {a}.upper()", 1),
    ("returns {a} reversed", "return {a}[::-1]", 1),
    ("returns the first item of {a}", "return {a}[0]", 1),
    ("returns the sum of {a} and {b}", "return {a} + {b}", 2),
    ("returns the larger of {a} and {b}", "return max({a}, {b})", 2),
    ("returns {a} divided by {b}", "return {a} / {b}", 2),
)
_ARGS = "x y n value items text data a b s".split()


def _code(rng: random.Random) -> TaskItem:
    desc, body, arity = rng.choice(_CODE_OPS)
    name = f"{rng.choice(_VERBS)}_{rng.choice(_NOUNS)}"
    a, b = rng.sample(_ARGS, 2)
    subs = {"a": a, "b": b, "k": rng.randint(2, 99)}
    args = a if arity == 1 else f"{a}, {b}"
    desc = desc.format(**subs)
    prompt = rng.choice(
        [
            f"Write a Python function {name}({args}) that {desc}.",
            f"Define `{name}` taking {args}; it {desc}.",
            f"Python: implement {name}({args}), which {desc}. Only the code.",
            f"I need a function called {name} with parameters {args}. It {desc}.",
        ]
    )
    answer = f"def {name}({args}):\n    {body.format(**subs)}"
    return TaskItem("code", _user(prompt), answer, key=prompt)


# --------------------------------------------------------------------------------------------
# reason


def _reason(rng: random.Random) -> TaskItem:
    nums = [rng.randint(1, 99) for _ in range(rng.randint(8, 25))]
    listed = rng.choice([", ".join, " ".join, " + ".join])(str(n) for n in nums)
    ask = rng.choice(
        [
            "Add these numbers step by step, one running total per line:",
            "Compute the sum, showing each partial sum on its own line:",
            "Add up the following, line by line:",
            "Work out the total step by step:",
        ]
    )
    prompt = f"{ask} {listed}" if rng.random() < 0.7 else f"{listed}\n{ask.rstrip(':')}."
    lines, total = [], nums[0]
    for i, n in enumerate(nums[1:], start=1):
        lines.append(f"Step {i}: {total} + {n} = {total + n}")
        total += n
    lines.append(f"Answer: {total}")
    return TaskItem("reason", _user(prompt), "\n".join(lines), key=prompt)


# --------------------------------------------------------------------------------------------
# write

_STORY = (
    "{name} was a {role} who lived in {city}. Every morning {first} walked to work with a {pet} named {pet_name}. "
    "The {season} air was cool, and the streets of {city} were quiet. One day {first} found {object} under a bench. "
    "Nobody knew where it came from, so {first} decided to keep it safe.",
    "At work, the other people asked {first} about {object}. {first} said that {pet_name} had found it first. "
    "They all laughed, because {pet_name} was a very curious {pet}. Still, {first} could not stop thinking about it. "
    "That night {first} looked at {object} for a long time.",
    "The next week, {first} took {object} to the old library of {city}. The librarian had seen something like it "
    "before. She said it belonged to a {role} from long ago. {first} was surprised to hear that the story was so old. "
    "{pet_name} waited by the door the whole time.",
    "On the way home, {first} met a stranger who also knew about {object}. The stranger told {first} to look for a "
    "second clue near the river. {first} and {pet_name} walked to the river before the sun went down. The water was calm "
    "and the {season} light was soft.",
    "Near the river, {first} found a small stone with a name carved on it. The name was {name}, the same as {first}. "
    "It was a strange and happy moment. {first} felt that {object} had been waiting for the right person. "
    "{pet_name} barked twice, as if to agree.",
    "In the end, {first} gave {object} to the museum of {city}, where everyone could see it. A small card next to it "
    "told the story of {name} and {pet_name}. People in {city} still talk about that {season}. And {first} still "
    "walks to work every morning with {pet_name}.",
    "Weeks later, a letter arrived from a school in {city}. The children wanted to hear the story of {object}. "
    "{first} agreed to visit them on a {season} afternoon. {pet_name} came along and sat in the front row. "
    "The children asked many questions, and {first} answered every one.",
    "A writer from the local paper also came to the school. She wrote a short article about {name}, the {role} "
    "with the curious {pet}. The article was read all over {city}. Soon people smiled at {first} in the street.",
    "Not everyone was happy, though. An old collector wanted to buy {object} for a lot of money. {first} said no, "
    "politely but firmly. The collector left {city} the same day. {pet_name} watched him go without a sound.",
    "Years later, {first} still tells the story on quiet {season} evenings. {pet_name} is older now and sleeps "
    "by the fire. The card in the museum has not changed. And {object} still waits there for the next curious visitor.",
)
_REPORT = (
    "Report for {city}, prepared by {name}, {role}. This report covers the {season} season. The team in {city} "
    "worked on three goals: better service, lower costs and a calmer office. Each goal is described below.",
    "Service. The team answered more requests than in the last {season}. {first} led the weekly review. "
    "Most customers in {city} were happy with the speed. A few asked for longer opening hours.",
    "Costs. Spending on supplies went down. {first} replaced {object} with a cheaper option. The budget for the "
    "{season} stayed within the plan. The savings will be used for training.",
    "Office. The office in {city} moved to a quieter floor. {first} brought a {pet} named {pet_name} on Fridays, "
    "which the team enjoyed. People said the new space helped them focus.",
    "Risks. The main risk is a lack of staff during the holidays. {first} suggests hiring one more {role} in {city}. "
    "Another risk is the old equipment, which may fail before the next {season}.",
    "Next steps. {first} will share this report with the board. The team in {city} will meet again next {season} to "
    "check progress. Questions about this report can be sent to {name}.",
    "Training. Two workshops were held in {city} this {season}. {first} taught the first one, about safety at work. "
    "The second one covered new tools. Everyone who took part passed the short test at the end.",
    "Customers. The number of regular customers in {city} grew a little. {first} called ten of them to ask for "
    "feedback. Most said the service was friendly. Two asked for a simpler bill, which is now being tested.",
    "Suppliers. The team changed one supplier this {season}. The new one delivers to {city} twice a week. "
    "{first} checked the first five orders by hand. All of them arrived on time and complete.",
    "Summary. The {season} season in {city} went well. The three goals moved forward, and costs stayed low. "
    "{name} thanks the whole team, and {pet_name} the {pet} sends a happy bark as well.",
)


def _write(rng: random.Random) -> TaskItem:
    first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
    facts = {
        "name": f"{first} {last}", "first": first, "role": rng.choice(ROLES), "city": rng.choice(CITIES),
        "pet": rng.choice(PETS), "pet_name": rng.choice(PET_NAMES), "object": rng.choice(OBJECTS), "season": rng.choice(SEASONS),
    }
    kind = rng.choice(["story", "report"])
    paragraphs = rng.randint(5, 10)
    details = [
        f"the main person is {facts['name']}, a {facts['role']}",
        f"the place is {facts['city']}",
        f"there is a {facts['pet']} called {facts['pet_name']}",
        f"the object is {facts['object']}",
        f"the season is {facts['season']}",
    ]
    rng.shuffle(details)
    ask = rng.choice([f"Write a {kind} in {paragraphs} paragraphs.", f"Please write a {paragraphs}-paragraph {kind}.", f"Compose a {kind} of {paragraphs} paragraphs."])
    body = rng.choice(["Details: ", "Use these facts: ", ""]) + "; ".join(details) + "."
    prompt = _arrange(rng, ask, body)
    template = _STORY if kind == "story" else _REPORT
    answer = "\n\n".join(p.format(**facts) for p in template[:paragraphs])
    return TaskItem("write", _user(prompt), answer, key=prompt)


# --------------------------------------------------------------------------------------------
# tool: OpenAI-style tool calling through the chat template's `tools`, and JSON with named keys
#
# Tools are OpenAI function definitions, {"name", "description", "parameters": JSON Schema}, as
# agent frameworks (LangChain's bind_tools / with_structured_output) send them; the chat template
# lists them in a system turn. When the model calls tools its whole answer is, for each call in
# order, `<tool_call>{"name": NAME, "arguments": ARGS}</tool_call>` with ARGS =
# json.dumps(arguments, ensure_ascii=False) in the order of the tool's `properties`: the same
# bytes the template writes for an assistant turn's `tool_calls`. Item kinds:
# - call      1-4 tools, a request one of them answers -> one call, arguments copied from the request
# - parallel  a request that asks two things -> two calls in the order asked
# - result    a finished tool round in the history (call + tool result) -> a short text answer from the result
# - chat      tools given, none needed (greeting, thanks, a joke, or no tool for what is asked) -> text
# - json      no tools; "answer as JSON with keys ..." -> a JSON object with exactly those keys, in that order
# (`tool_call_text` and `parse_tool_calls`, which write and read that answer, are in `items`.)

# Values the requests mention (copied verbatim into the arguments)
_US_PLACES = (
    "San Francisco, CA", "New York, NY", "Boston, MA", "Austin, TX", "Seattle, WA", "Chicago, IL", "Denver, CO",
    "Miami, FL", "Portland, OR", "Los Angeles, CA", "Phoenix, AZ", "Atlanta, GA", "Nashville, TN", "San Diego, CA",
)
_WORLD_PLACES = (
    "Paris, France", "Tokyo, Japan", "London, UK", "Berlin, Germany", "São Paulo, Brazil", "Zürich, Switzerland",
    "Kraków, Poland", "Sydney, Australia", "Cape Town, South Africa", "Toronto, Canada", "Mexico City, Mexico",
    "Seoul, South Korea", "Reykjavík, Iceland", "Málaga, Spain",
)
_CJK = "你好啊世界中国北京上海天地科技集团公司电子网络银行商店茶书明月光华东方美食云海山水龙凤金星"
_KANA = "こんにちはさくらやまかわみどりあおぞらトヨタソニーカメラパンケーキ"
_LATIN_NAMES = (
    "Zoë", "José García", "Müller GmbH", "Łukasz Nowak", "François Dupont", "Søren Holm", "Ærø Fisk", "Ñandú SA",
    "Björk Guðmundsdóttir", "Çelik Ltd.", "Ångström AB", "Dvořák & Co", "Straße AG", "Renée Côté", "İstanbul Kebap",
)
_CUSTOMER_ADJ = ("Chinese", "Japanese", "German", "French", "small", "family-run", "local", "online", "new", "Swiss", "Polish", "Brazilian")
_CUSTOMER_KIND = (
    "technology company", "bakery", "bookshop", "law firm", "coffee roaster", "trading company", "design studio",
    "shoe store", "tea house", "bank", "restaurant", "software startup", "car dealer", "flower shop",
)
_GLOSSES = ("Hello Group", "Sunrise Ltd", "Blue Sky", "Golden Star", "Mountain Water", "Good Food")
_CURRENCIES = ("USD", "EUR", "GBP", "JPY", "CHF", "CAD", "AUD", "CNY", "INR", "SEK")
_TASKS_TODO = ("call mom", "buy milk", "water the plants", "send the report", "book the dentist", "pay the rent", "take out the trash", "call Sam back", "renew my passport", "stretch")
_TIMES = ("5 pm", "9:30", "7am", "noon", "tomorrow at 8am", "18:45", "Friday at 10", "in 20 minutes", "3:15 pm")
_ROOMS = ("kitchen", "living room", "bedroom", "office", "garage", "hallway", "bathroom", "porch")
_SUBJECTS = ("Meeting tomorrow", "Invoice 4821", "Lunch on Friday", "Project update", "Quick question", "Trip plans", "Welcome!", "Your order")
_BODIES = ("See you at 10.", "Please find the invoice attached.", "Are you free at noon?", "All tasks are done.", "Can we talk later today?", "Thanks for your help!", "The train leaves at 9.")
_TICKERS = (("Apple", "AAPL"), ("Microsoft", "MSFT"), ("Tesla", "TSLA"), ("Nvidia", "NVDA"), ("Amazon", "AMZN"), ("Google", "GOOGL"), ("Netflix", "NFLX"), ("IBM", "IBM"))
_RESTAURANTS = ("Luigi's", "The Green Fork", "Sakura", "Chez Marie", "Blue Moon Diner", "Casa Pepe", "Golden Dragon")
_QUERIES = ("best pizza in Naples", "python list comprehension", "how to fix a flat tire", "cheap flights to Oslo", "LangChain tool calling", "history of the bicycle", "vegan lasagna recipe")
_LANGUAGES = ("French", "Spanish", "German", "Italian", "Japanese", "Portuguese")
_PHRASES = ("good morning", "thank you", "where is the station?", "I love this city", "see you tomorrow", "how much is it?")
_DATES = ("2025-03-14", "2025-07-01", "2024-12-24", "May 3", "June 21", "next Friday", "tomorrow", "2025-11-09")
_CONDITIONS = ("sunny", "cloudy", "rainy", "windy", "snowy", "foggy", "clear", "stormy")
_JOKES = {
    "cats": ("Why don't cats play poker in the jungle?", "Too many cheetahs."),
    "dogs": ("What do you call a dog magician?", "A labracadabrador."),
    "cows": ("Where do cows go for entertainment?", "The moo-vies."),
    "computers": ("Why did the computer go to the doctor?", "It had a virus."),
    "programmers": ("Why do programmers prefer dark mode?", "Because light attracts bugs."),
    "fish": ("Why are fish so smart?", "They live in schools."),
    "bears": ("What do you call a bear with no teeth?", "A gummy bear."),
    "math": ("Why was six afraid of seven?", "Because seven ate nine."),
    "coffee": ("Why did the coffee file a police report?", "It got mugged."),
    "birds": ("Why do birds fly south for the winter?", "It's too far to walk."),
    "bananas": ("Why did the banana go to the doctor?", "It wasn't peeling well."),
    "ghosts": ("Why are ghosts bad liars?", "You can see right through them."),
}


def _location(rng: random.Random) -> str:
    r = rng.random()
    return rng.choice(_US_PLACES) if r < 0.4 else rng.choice(_WORLD_PLACES) if r < 0.7 else rng.choice(CITIES)


def _unicode_name(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.3:
        return "".join(rng.choice(_CJK) for _ in range(rng.randint(2, 4))) + rng.choice(["", "", "集团", "公司", "有限公司"])
    if r < 0.5:
        return "".join(rng.choice(_KANA) for _ in range(rng.randint(3, 5))) + rng.choice(["", "株式会社"])
    if r < 0.75:
        return rng.choice(_LATIN_NAMES)
    return _full_name(rng) if rng.random() < 0.5 else f"{rng.choice(COMPANIES)} {rng.choice(['Inc.', 'Ltd', 'GmbH', 'LLC', 'Group'])}"


def _email(rng: random.Random) -> str:
    return f"{rng.choice(FIRST_NAMES).lower()}{rng.choice(['', '.', '_'])}{rng.choice(LAST_NAMES).lower().replace('ü', 'u')}@{rng.choice(COMPANIES).lower()}.com"


def _amount(rng: random.Random) -> int | float:
    return rng.choice([rng.randint(1, 999), rng.randint(1, 99) * 10, rng.randint(1, 500) + rng.randint(1, 9) / 10])


# One tool the model can be given: its schema, the requests it answers, and what a call returns.
# `ask(rng)` -> (request, arguments in `params` order); `reply(rng, args)` -> (tool result, final text answer).
@dataclass(frozen=True)
class _ToolSpec:
    name: str
    descriptions: tuple[str, ...]  # one is picked per item
    params: tuple[tuple[str, dict, bool], ...]  # (name, JSON Schema of the value, required)
    ask: Callable[[random.Random], tuple[str, dict]]
    reply: Callable[[random.Random, dict], tuple[str, str]] | None = None
    group: str = ""  # tools of one group are never offered together (two weather tools, say)


def _ask_weather(rng: random.Random, with_unit: bool = True) -> tuple[str, dict]:
    loc = _location(rng)
    unit = rng.choice(["celsius", "fahrenheit"]) if with_unit and rng.random() < 0.3 else None
    text = rng.choice(
        [
            "What is the weather in {loc}?", "What's the weather like in {loc}?", "what's the weather in {loc} today",
            "How is the weather in {loc} right now?", "Is it raining in {loc}?", "Check the weather for {loc}.",
            "Weather in {loc}?", "Tell me the current weather in {loc}.", "I'm heading to {loc}. What's the weather there?",
            "Could you look up the weather in {loc} for me?", "What is the temperature in {loc}?",
        ]
    ).format(loc=loc)
    if unit:
        text = text.rstrip("?.") + rng.choice([f" in {unit}?", f"? Use {unit}.", f" ({unit}, please)?"])
    return text, {"location": loc} | ({"unit": unit} if unit else {})


def _reply_weather(rng: random.Random, args: dict) -> tuple[str, str]:
    loc, cond, t = args["location"], rng.choice(_CONDITIONS), rng.randint(-5, 35)
    unit = {"celsius": "°C", "fahrenheit": "°F"}.get(args.get("unit"), " degrees")
    return rng.choice(
        [
            (f"It's {cond}.", f"It's {cond} in {loc}."),
            (json.dumps({"condition": cond, "temperature": t}), f"It's {cond} and {t}{unit} in {loc}."),
            (f"{cond}, {t}{unit}", f"It's {cond} and {t}{unit} in {loc}."),
        ]
    )


def _ask_current_weather(rng: random.Random) -> tuple[str, dict]:
    text, args = _ask_weather(rng)
    unit = args.get("unit") or rng.choice(["celsius", "fahrenheit"])
    if "unit" not in args:  # required here: the request states it
        text = text.rstrip("?.") + rng.choice([f" in {unit}?", f"? Use {unit}.", f" ({unit}, please)?"])
    return text, {"location": args["location"], "unit": unit}


def _ask_magic(rng: random.Random) -> tuple[str, dict]:
    n = rng.choice([rng.randint(0, 20), rng.randint(0, 999), -rng.randint(1, 50)])
    text = rng.choice(
        [
            "What is the value of magic_function({n})? Use the tool.", "What is magic_function({n})?", "Call magic_function on {n}.",
            "Use the tool to compute magic_function of {n}.", "Apply the magic function to {n}.", "what is the value of magic_function({n})",
            "Please evaluate magic_function({n}) with the tool.",
        ]
    ).format(n=n)
    return text, {"input": n}


def _reply_magic(rng: random.Random, args: dict) -> tuple[str, str]:
    r = args["input"] + 2
    return str(r), rng.choice([f"The value of magic_function({args['input']}) is {r}.", f"magic_function({args['input']}) = {r}."])


def _no_arg_ask(*texts: str) -> Callable[[random.Random], tuple[str, dict]]:
    return lambda rng: (rng.choice(texts), {})


def _ask_customer(rng: random.Random) -> tuple[str, dict]:
    name = _unicode_name(rng)
    desc = f"{rng.choice(['a', 'a', 'an old'])} {rng.choice(_CUSTOMER_ADJ)} {rng.choice(_CUSTOMER_KIND)}"
    desc = desc.replace("a online", "an online")
    gloss = f" ({rng.choice(_GLOSSES)})" if rng.random() < 0.25 else ""
    text = rng.choice(
        [
            "Create a customer named '{name}'{gloss} - {desc}", "Create a customer named '{name}'{gloss} - {desc}.",
            "Add a new customer called \"{name}\"{gloss}. Description: {desc}.", "Please register the customer '{name}'{gloss}: {desc}.",
            "New customer: {name}{gloss}. Description: {desc}.", "Make a customer record for '{name}'{gloss}, description '{desc}'.",
        ]
    ).format(name=name, gloss=gloss, desc=desc)
    return text, {"customer_name": name, "description": desc}


def _reply_customer(rng: random.Random, args: dict) -> tuple[str, str]:
    cid = rng.randint(100, 99999)
    return rng.choice(
        [
            (f"Customer created with id {cid}.", f"I created the customer '{args['customer_name']}' (id {cid})."),
            (json.dumps({"id": cid, "status": "created"}), f"Done: '{args['customer_name']}' is now customer {cid}."),
        ]
    )


def _ask_flights(rng: random.Random) -> tuple[str, dict]:
    a, b = rng.sample(CITIES, 2)
    date = rng.choice(_DATES)
    text = rng.choice(
        [
            "Find flights from {a} to {b} on {d}.", "Search for flights {a} to {b}, {d}.", "Are there any flights from {a} to {b} on {d}?",
            "I need to fly from {a} to {b} on {d}. What are my options?", "Look up flights to {b} from {a} for {d}.",
        ]
    ).format(a=a, b=b, d=date)
    return text, {"origin": a, "destination": b, "date": date}


def _reply_flights(rng: random.Random, args: dict) -> tuple[str, str]:
    code, price = f"{rng.choice(['LH', 'AF', 'BA', 'KL', 'IB', 'UA'])}{rng.randint(100, 999)}", rng.randint(60, 900)
    return (
        json.dumps([{"flight": code, "price": price}]),
        f"The best flight from {args['origin']} to {args['destination']} on {args['date']} is {code} for {price}.",
    )


def _ask_email(rng: random.Random) -> tuple[str, dict]:
    to, subject, body = _email(rng), rng.choice(_SUBJECTS), rng.choice(_BODIES)
    text = rng.choice(
        [
            "Send an email to {to} with the subject '{s}' saying '{b}'", "Email {to}: subject \"{s}\", body \"{b}\".",
            "Please send {to} an email. Subject: {s}. Body: {b}", "Write an email to {to} with subject '{s}' and the message '{b}'.",
        ]
    ).format(to=to, s=subject, b=body)
    return text, {"to": to, "subject": subject, "body": body}


def _reply_email(rng: random.Random, args: dict) -> tuple[str, str]:
    return rng.choice(["Email sent.", "sent", json.dumps({"status": "sent"})]), f"I sent the email to {args['to']}."


def _ask_order(rng: random.Random) -> tuple[str, dict]:
    oid = rng.choice([f"ORD-{rng.randint(10000, 99999)}", f"A{rng.randint(1000, 99999)}", str(rng.randint(100000, 999999))])
    text = rng.choice(
        ["Where is my order {o}?", "Check the status of order {o}.", "Can you look up order {o}?", "What's happening with my order {o}? It hasn't arrived.",
         "Order {o} - has it shipped yet?"]
    ).format(o=oid)
    return text, {"order_id": oid}


def _reply_order(rng: random.Random, args: dict) -> tuple[str, str]:
    status, day = rng.choice(["shipped", "delivered", "processing"]), rng.choice(DAYS)
    answer = {"shipped": f"Order {args['order_id']} has shipped and should arrive on {day}.",
              "delivered": f"Order {args['order_id']} was delivered on {day}.",
              "processing": f"Order {args['order_id']} is still processing; it should ship on {day}."}[status]
    return json.dumps({"status": status, "day": day}), answer


def _ask_currency(rng: random.Random) -> tuple[str, dict]:
    amount, (a, b) = _amount(rng), rng.sample(_CURRENCIES, 2)
    text = rng.choice(["Convert {x} {a} to {b}.", "How much is {x} {a} in {b}?", "What's {x} {a} in {b}?", "Please convert {x} {a} into {b}."]).format(x=amount, a=a, b=b)
    return text, {"amount": amount, "from": a, "to": b}


def _reply_currency(rng: random.Random, args: dict) -> tuple[str, str]:
    r = round(args["amount"] * rng.uniform(0.5, 1.5), 2)
    return str(r), f"{args['amount']} {args['from']} is {r} {args['to']}."


def _ask_reminder(rng: random.Random) -> tuple[str, dict]:
    task, time_ = rng.choice(_TASKS_TODO), rng.choice(_TIMES)
    text = rng.choice(["Remind me to {t} at {w}.", "Set a reminder for {w} to {t}.", "Can you remind me to {t}? Time: {w}.", "reminder: {t}, {w}"]).format(t=task, w=time_)
    return text, {"text": task, "time": time_}


def _reply_reminder(rng: random.Random, args: dict) -> tuple[str, str]:
    return rng.choice(["Reminder set.", "ok", json.dumps({"ok": True})]), f"OK, I will remind you to {args['text']} at {args['time']}."


def _ask_add(rng: random.Random) -> tuple[str, dict]:
    a, b = rng.randint(0, 999), rng.randint(0, 999)
    text = rng.choice(["What is {a} + {b}?", "What is {a} plus {b}?", "Add {a} and {b}.", "Use the tool to add {a} and {b}.", "what's {a}+{b}"]).format(a=a, b=b)
    return text, {"a": a, "b": b}


def _ask_multiply(rng: random.Random) -> tuple[str, dict]:
    a, b = rng.randint(0, 99), rng.randint(0, 99)
    text = rng.choice(["What is {a} * {b}?", "What is {a} times {b}?", "Multiply {a} by {b}.", "Use the tool to multiply {a} and {b}.", "what's {a}*{b}"]).format(a=a, b=b)
    return text, {"a": a, "b": b}


def _reply_arith(op: str) -> Callable[[random.Random, dict], tuple[str, str]]:
    def reply(rng: random.Random, args: dict) -> tuple[str, str]:
        r = args["a"] + args["b"] if op == "+" else args["a"] * args["b"]
        return str(r), rng.choice([f"{args['a']} {op} {args['b']} = {r}.", f"The answer is {r}."])

    return reply


def _ask_lights(rng: random.Random) -> tuple[str, dict]:
    room, on = rng.choice(_ROOMS), rng.random() < 0.5
    word = "on" if on else "off"
    text = rng.choice(["Turn {w} the lights in the {r}.", "Switch {w} the {r} light.", "Please turn the {r} lights {w}.", "{r} lights {w}"]).format(w=word, r=room)
    return text, {"room": room, "on": on}


def _reply_lights(rng: random.Random, args: dict) -> tuple[str, str]:
    return rng.choice(["ok", "done", json.dumps({"ok": True})]), f"The {args['room']} lights are now {'on' if args['on'] else 'off'}."


def _ask_translate(rng: random.Random) -> tuple[str, dict]:
    phrase, lang = rng.choice(_PHRASES), rng.choice(_LANGUAGES)
    text = rng.choice(["Translate '{p}' into {l}.", "How do you say \"{p}\" in {l}?", "Translate to {l}: {p}"]).format(p=phrase, l=lang)
    return text, {"text": phrase, "target_language": lang}


def _ask_stock(rng: random.Random) -> tuple[str, dict]:
    company, ticker = rng.choice(_TICKERS)
    text = rng.choice(["What is the stock price of {t}?", "How much is {c} ({t}) trading at?", "Get me the latest price for {t}.", "{t} stock price?"]).format(c=company, t=ticker)
    return text, {"ticker": ticker}


def _reply_stock(rng: random.Random, args: dict) -> tuple[str, str]:
    p = round(rng.uniform(20, 900), 2)
    return str(p), f"{args['ticker']} is trading at {p}."


def _ask_table(rng: random.Random) -> tuple[str, dict]:
    rest, n, time_ = rng.choice(_RESTAURANTS), rng.randint(1, 12), rng.choice(_TIMES)
    text = rng.choice(["Book a table for {n} at {r} at {t}.", "Reserve {r} for {n} people, {t}.", "Can you get us a table at {r}? We are {n}, at {t}."]).format(n=n, r=rest, t=time_)
    return text, {"restaurant": rest, "party_size": n, "time": time_}


def _reply_table(rng: random.Random, args: dict) -> tuple[str, str]:
    return rng.choice(["Confirmed.", json.dumps({"confirmed": True})]), f"Your table for {args['party_size']} at {args['restaurant']} at {args['time']} is booked."


def _ask_search(rng: random.Random) -> tuple[str, dict]:
    q = rng.choice(_QUERIES)
    text = rng.choice(["Search the web for {q}.", "Look up {q} online.", "Can you search for \"{q}\"?", "google {q}"]).format(q=q)
    return text, {"query": q}


def _ask_joke(rng: random.Random) -> tuple[str, dict]:
    topic = rng.choice(sorted(_JOKES))
    setup, punchline = _JOKES[topic]
    text = rng.choice(["Tell me a joke about {t}.", "Tell me a joke about {t}", "I want to hear a joke about {t}.", "Make me laugh with a joke about {t}."]).format(t=topic)
    return text, {"setup": setup, "punchline": punchline}


def _s(description: str | None = None, **extra) -> dict:
    return {"type": "string", **extra} | ({"description": description} if description else {})


def _i(description: str | None = None) -> dict:
    return {"type": "integer"} | ({"description": description} if description else {})


_TOOL_SPECS: tuple[_ToolSpec, ...] = (
    _ToolSpec("get_weather", ("Get the current weather for a location.", "Get the weather in a given location.", "Look up the weather."),
              (("location", _s("The city and state, e.g. San Francisco, CA"), True), ("unit", _s("Temperature unit", enum=["celsius", "fahrenheit"]), False)),
              _ask_weather, _reply_weather, group="weather"),
    _ToolSpec("get_current_weather", ("Get the current weather in a given location.",),
              (("location", _s("The city and state, e.g. San Francisco, CA"), True), ("unit", _s(enum=["celsius", "fahrenheit"]), True)),
              _ask_current_weather, _reply_weather, group="weather"),
    _ToolSpec("magic_function", ("Applies a magic function to an input.",), (("input", _i(), True),), _ask_magic, _reply_magic, group="magic"),
    _ToolSpec("magic_function_no_args", ("Calculates a magic function.",), (), _no_arg_ask("What is the value of magic_function_no_args()? Use the tool.", "Call magic_function_no_args.", "What does magic_function_no_args return?"),
              lambda rng, a: (str(rng.randint(1, 9)), "The value of magic_function_no_args() is {}.")),
    _ToolSpec("unicode_customer", ("Create a customer with a name and a description.", "Create a new customer record."),
              (("customer_name", _s("The customer's name."), True), ("description", _s("What the customer does."), True)), _ask_customer, _reply_customer),
    _ToolSpec("search_flights", ("Search for flights between two cities on a date.",),
              (("origin", _s("Departure city"), True), ("destination", _s("Arrival city"), True), ("date", _s("Travel date"), True)), _ask_flights, _reply_flights),
    _ToolSpec("send_email", ("Send an email.", "Send an email to a recipient."),
              (("to", _s("Recipient email address"), True), ("subject", _s(), True), ("body", _s(), True)), _ask_email, _reply_email),
    _ToolSpec("lookup_order", ("Look up the status of an order.", "Get an order by its id."), (("order_id", _s("The order id"), True),), _ask_order, _reply_order),
    _ToolSpec("convert_currency", ("Convert an amount between currencies.",),
              (("amount", {"type": "number"}, True), ("from", _s("ISO currency code"), True), ("to", _s("ISO currency code"), True)), _ask_currency, _reply_currency),
    _ToolSpec("set_reminder", ("Set a reminder.", "Create a reminder for the user."), (("text", _s("What to remind about"), True), ("time", _s("When"), True)), _ask_reminder, _reply_reminder),
    _ToolSpec("add", ("Adds a and b.", "Add two integers."), (("a", _i(), True), ("b", _i(), True)), _ask_add, _reply_arith("+"), group="add"),
    _ToolSpec("multiply", ("Multiplies a and b.", "Multiply two integers together."), (("a", _i(), True), ("b", _i(), True)), _ask_multiply, _reply_arith("*"), group="multiply"),
    _ToolSpec("set_light", ("Turn the lights in a room on or off.",), (("room", _s(), True), ("on", {"type": "boolean"}, True)), _ask_lights, _reply_lights),
    _ToolSpec("translate_text", ("Translate text into another language.",),
              (("text", _s(), True), ("target_language", _s(enum=list(_LANGUAGES)), True)), _ask_translate),
    _ToolSpec("get_stock_price", ("Get the latest stock price for a ticker symbol.",), (("ticker", _s("e.g. AAPL"), True),), _ask_stock, _reply_stock),
    _ToolSpec("book_table", ("Book a restaurant table.",),
              (("restaurant", _s(), True), ("party_size", _i("Number of people"), True), ("time", _s(), True)), _ask_table, _reply_table),
    _ToolSpec("web_search", ("Search the web.", "Search the internet for a query."), (("query", _s("The search query"), True),), _ask_search),
    _ToolSpec("get_current_time", ("Get the current time.",), (), _no_arg_ask("What time is it?", "What's the time right now?", "Tell me the current time.", "what time is it now"),
              lambda rng, a: (f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}", "It is {} now.")),
    _ToolSpec("roll_dice", ("Roll a six-sided die.",), (), _no_arg_ask("Roll a die for me.", "Roll the dice!", "Can you roll a die?"),
              lambda rng, a: (str(rng.randint(1, 6)), "You rolled a {}.")),
    _ToolSpec("Joke", ("Joke to tell user.",),
              (("setup", _s("The setup of the joke"), True), ("punchline", _s("The punchline to the joke"), True)), _ask_joke, group="joke"),
)
_TOOLS_BY_NAME = {t.name: t for t in _TOOL_SPECS}


def _schema(spec: _ToolSpec, rng: random.Random, style: dict) -> dict:
    """The OpenAI function definition of `spec` in one of the styles frameworks send: OpenAI's own
    ({"type", "properties", "required"}) or pydantic's ({"properties", "required", "type"}, each
    property's description first), with or without property descriptions and `required`."""
    props = {}
    for name, schema, _ in spec.params:
        p = {k: v for k, v in schema.items() if k != "description" or style["descs"]}
        if style["pydantic"] and "description" in p:
            p = {"description": p["description"]} | {k: v for k, v in p.items() if k != "description"}
        props[name] = p
    required = [name for name, _, req in spec.params if req]
    if style["pydantic"]:
        parameters = {"properties": props} | ({"required": required} if required else {}) | {"type": "object"}
    else:
        parameters = {"type": "object", "properties": props} | ({"required": required} if required and style["required"] else {})
    return {"name": spec.name, "description": rng.choice(spec.descriptions), "parameters": parameters}


# Tools made up per item (names, parameters and requests from parts), so that the model learns to
# read names and parameters from the schema rather than remember a few tools.
_GEN_VERBS = ("get", "find", "create", "update", "delete", "list", "check", "cancel", "archive", "fetch")
_GEN_NOUNS = ("user", "invoice", "ticket", "file", "note", "playlist", "account", "booking", "report", "device", "task", "project")
_GEN_PARAMS = (
    ("id", "integer"), ("{noun}_id", "integer"), ("name", "string"), ("email", "string"), ("title", "string"), ("limit", "integer"),
    ("query", "string"), ("priority", "enum"), ("notify", "boolean"), ("owner", "string"), ("count", "integer"), ("tag", "string"),
)
_GEN_TITLES = ("Groceries", "Q3 plan", "Holiday photos", "Road trip", "Bug 1182", "Weekly sync", "Ideas", "Budget 2025")


def _gen_value(rng: random.Random, kind: str):
    if kind == "integer":
        return rng.choice([rng.randint(1, 99), rng.randint(100, 99999)])
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "enum":
        return rng.choice(["low", "medium", "high"])
    return rng.choice([_full_name(rng), rng.choice(_GEN_TITLES), _email(rng), rng.choice(_QUERIES), rng.choice(PET_NAMES)])


def _generated_tool(rng: random.Random) -> tuple[dict, str, dict]:
    """(tool schema, request, arguments) of a made-up verb_noun tool with one to three parameters."""
    verb, noun = rng.choice(_GEN_VERBS), rng.choice(_GEN_NOUNS)
    name = f"{verb}_{noun}" if rng.random() < 0.8 else f"{verb}{noun.capitalize()}"
    chosen = rng.sample(_GEN_PARAMS, rng.randint(1, 3))
    props, args = {}, {}
    for pname, kind in chosen:
        pname = pname.format(noun=noun)
        props[pname] = {"type": "string", "enum": ["low", "medium", "high"]} if kind == "enum" else {"type": kind}
        args[pname] = _gen_value(rng, kind)
    shown = [f"{k} {json.dumps(v) if isinstance(v, bool) else repr(v) if isinstance(v, str) and rng.random() < 0.5 else v}" for k, v in args.items()]
    text = rng.choice(
        [
            "{Verb} the {noun} with {params}.", "Call {name} with {params}.", "Use {name}: {params}.", "Please {verb} the {noun} ({params}).",
            "I need you to {verb} {a} {noun}, {params}.",
        ]
    ).format(Verb=verb.capitalize(), verb=verb, noun=noun, a="an" if noun[0] in "aeiou" else "a", name=name, params=_join_and(shown) if rng.random() < 0.5 else ", ".join(shown))
    # a value shown as repr() must still be copied as the string itself: repr of these strings is '...'
    tool = {"name": name, "description": f"{verb.capitalize()} {'an' if noun[0] in 'aeiou' else 'a'} {noun}.", "parameters": {"type": "object", "properties": props, "required": list(props)}}
    return tool, text, args


_SYSTEMS = (
    "You are a helpful assistant.", "You are a helpful assistant that can use tools.", "You are an agent. Use the tools when they help.",
    "You are a customer support assistant.", "Answer the user's questions. Call a tool when you need one.", "You are Tandem, a concise assistant.",
)
_GREETINGS = (("Hi!", "Hello! How can I help you today?"), ("Hello", "Hello! How can I help you today?"), ("hey there", "Hello! How can I help you today?"),
              ("Good morning!", "Good morning! How can I help you today?"), ("Thanks!", "You're welcome!"), ("Thank you so much.", "You're welcome!"),
              ("thx", "You're welcome!"), ("Who are you?", "I am a helpful assistant."), ("What is your name?", "I am a helpful assistant."),
              ("Bye!", "Goodbye! Have a nice day."))
_NO_TOOL = "Sorry, I don't have a tool for that."


def _offer_tools(rng: random.Random, needed: list[str], exclude_groups: set[str] = frozenset()) -> list[_ToolSpec]:
    """The needed tools plus 0-3 others (never two of one group), shuffled."""
    taken = {_TOOLS_BY_NAME[n].group for n in needed if _TOOLS_BY_NAME[n].group} | set(exclude_groups)
    pool = [t for t in _TOOL_SPECS if t.name not in needed and (not t.group or t.group not in taken)]
    total = rng.choices([1, 2, 3, 4], [0.33, 0.37, 0.22, 0.08])[0]
    extra = rng.sample(pool, max(0, total - len(needed)))
    tools = [_TOOLS_BY_NAME[n] for n in needed] + extra
    rng.shuffle(tools)
    return tools


def _history_prefix(rng: random.Random) -> list[dict]:
    """Sometimes an earlier, finished exchange before the request."""
    if rng.random() < 0.12:
        hi, reply = rng.choice(_GREETINGS[:4])
        return [{"role": "user", "content": hi}, {"role": "assistant", "content": reply}]
    return []


def _tool_item(kind: str, messages: list[dict], answer: str, tools: list[dict] | None, meta: dict) -> TaskItem:
    key = json.dumps({"tools": tools, "messages": messages}, ensure_ascii=False)
    return TaskItem("tool", messages, answer, key=key, meta={"kind": kind} | meta, tools=tools)


def _json_keys_item(rng: random.Random) -> TaskItem:
    """No tools: answer with a JSON object with exactly the keys asked for, in that order."""
    r = rng.random()
    if r < 0.4:
        topic = rng.choice(sorted(_JOKES))
        setup, punchline = _JOKES[topic]
        keys = ["setup", "punchline"] if rng.random() < 0.8 else ["punchline", "setup"]
        values = {"setup": setup, "punchline": punchline}
        quoted = [f"'{k}'" for k in keys] if rng.random() < 0.6 else [f'"{k}"' for k in keys]
        ask = rng.choice(
            [
                "Tell me a joke about {t}. Return the result as a JSON with {a} and {b} keys. Return nothing other than JSON.",
                "Tell me a joke about {t}. Answer in JSON with the keys {a} and {b}.",
                "Give me a joke about {t} as a JSON object with keys {a}, {b}. Only JSON.",
                "Respond with JSON only ({a} and {b} keys): a joke about {t}.",
            ]
        ).format(t=topic, a=quoted[0], b=quoted[1])
        fields = {k: values[k] for k in keys}
    else:
        first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
        values = {"name": f"{first} {last}", "age": rng.randint(18, 79), "city": rng.choice(CITIES), "company": rng.choice(COMPANIES),
                  "role": rng.choice(ROLES), "email": _email(rng), "pet": rng.choice(PET_NAMES)}
        sentences = {
            "name": f"{first} {last}" + rng.choice([" is new here.", " signed up today.", " joined the club."]),
            "age": rng.choice([f"{first} is {values['age']}.", f"Age: {values['age']}."]),
            "city": rng.choice([f"{first} lives in {values['city']}.", f"City: {values['city']}."]),
            "company": rng.choice([f"{first} works at {values['company']}.", f"Company: {values['company']}."]),
            "role": rng.choice([f"{first} is a {values['role']}.", f"Role: {values['role']}."]),
            "email": rng.choice([f"{first}'s email is {values['email']}.", f"Email: {values['email']}."]),
            "pet": rng.choice([f"{first} has a pet called {values['pet']}.", f"Pet: {values['pet']}."]),
        }
        keys = ["name"] + rng.sample([k for k in values if k != "name"], rng.randint(1, 3))
        if rng.random() < 0.3:
            keys = rng.sample(keys, len(keys))
        stated = [k for k in values if k in keys or rng.random() < 0.2]
        body = " ".join(sentences[k] for k in stated)
        quote = rng.choice(["'{}'", '"{}"', "{}"])
        names = [quote.format(k) for k in keys]
        listed = _join_and(names) if rng.random() < 0.5 else ", ".join(names)
        ask = rng.choice(
            [
                "Answer in JSON with keys {k}.", "Return the result as a JSON with {k} keys. Return nothing other than JSON.",
                "Give me a JSON object with the keys {k}.", "Reply with JSON only, keys: {k}.", "Output JSON with exactly these keys: {k}.",
            ]
        ).format(k=listed)
        ask = _arrange(rng, ask, body)
        fields = {k: values[k] for k in keys}
    messages = ([{"role": "system", "content": rng.choice(_SYSTEMS[:1] + _SYSTEMS[5:])}] if rng.random() < 0.2 else []) + _user(ask)
    return _tool_item("json", messages, json.dumps(fields, ensure_ascii=False), None, {"fields": fields})


def _tool(rng: random.Random) -> TaskItem:
    kind = rng.choices(["call", "generated", "parallel", "result", "chat", "json"], [0.36, 0.1, 0.08, 0.2, 0.12, 0.14])[0]
    if kind == "json":
        return _json_keys_item(rng)
    style = {"pydantic": rng.random() < 0.4, "descs": rng.random() < 0.7, "required": rng.random() < 0.8}
    system = [{"role": "system", "content": rng.choice(_SYSTEMS)}] if rng.random() < 0.35 else []
    prefix = _history_prefix(rng)

    def schemas(specs: list[_ToolSpec]) -> list[dict]:
        return [_schema(t, rng, style) for t in specs]

    if kind == "generated":
        tool, text, args = _generated_tool(rng)
        others = schemas(rng.sample(_TOOL_SPECS, rng.choices([0, 1, 2], [0.5, 0.35, 0.15])[0]))
        tools = others + [tool]
        rng.shuffle(tools)
        calls = [{"name": tool["name"], "arguments": args}]
        return _tool_item(kind, system + prefix + _user(text), tool_call_text(calls), tools, {"calls": calls})
    if kind == "parallel":
        if rng.random() < 0.5:
            names = ["multiply", "add"] if rng.random() < 0.5 else ["add", "multiply"]
            (t1, a1), (t2, a2) = (_TOOLS_BY_NAME[n].ask(rng) for n in names)
            text = t1 + rng.choice([" Also, ", " And ", " Then "]) + t2[0].lower() + t2[1:]
            calls = [{"name": names[0], "arguments": a1}, {"name": names[1], "arguments": a2}]
        else:
            spec = rng.choice([_TOOLS_BY_NAME[n] for n in ("get_weather", "get_stock_price", "lookup_order", "magic_function")])
            (t1, a1), (t2, a2) = spec.ask(rng), spec.ask(rng)
            if a1 == a2:
                return _tool(rng)
            text = t1 + rng.choice([" And ", " Also: ", " "]) + t2
            calls = [{"name": spec.name, "arguments": a1}, {"name": spec.name, "arguments": a2}]
        specs = _offer_tools(rng, list(dict.fromkeys(c["name"] for c in calls)))
        return _tool_item(kind, system + prefix + _user(text), tool_call_text(calls), schemas(specs), {"calls": calls})

    if kind == "chat":
        r = rng.random()
        if r < 0.45:
            text, answer = rng.choice(_GREETINGS)
            specs = _offer_tools(rng, [rng.choice([t.name for t in _TOOL_SPECS if t.group != "joke"])])
        elif r < 0.7:
            topic = rng.choice(sorted(_JOKES))
            text = rng.choice(["Tell me a joke about {t}.", "Tell me a joke about {t}", "Do you know a joke about {t}?"]).format(t=topic)
            answer = " ".join(_JOKES[topic])
            specs = _offer_tools(rng, [rng.choice([t.name for t in _TOOL_SPECS if t.group != "joke"])], exclude_groups={"joke"})
        else:  # asked for something no offered tool does
            spec = rng.choice([t for t in _TOOL_SPECS if t.group != "joke"])
            text, _ = spec.ask(rng)
            others = [t.name for t in _TOOL_SPECS if t.name != spec.name and (not t.group or t.group != spec.group) and t.group != "joke"]
            specs = _offer_tools(rng, [rng.choice(others)], exclude_groups={spec.group} if spec.group else set())
            specs = [t for t in specs if t.name != spec.name]
            answer = _NO_TOOL
        return _tool_item(kind, system + prefix + _user(text), answer, schemas(specs), {"facts": [answer]})

    spec = rng.choice([t for t in _TOOL_SPECS if kind == "call" or t.reply is not None])
    text, args = spec.ask(rng)
    specs = _offer_tools(rng, [spec.name])
    calls = [{"name": spec.name, "arguments": args}]
    if kind == "call":
        return _tool_item(kind, system + prefix + _user(text), tool_call_text(calls), schemas(specs), {"calls": calls})
    result, answer = spec.reply(rng, args)
    if "{}" in answer:
        answer = answer.format(result)
    history = [
        {"role": "user", "content": text},
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "name": spec.name, "content": result},
    ]
    return _tool_item(kind, system + prefix + history, answer, schemas(specs), {"facts": [answer]})


def _score_tool(item: TaskItem, output: str) -> float:
    """Tool calls: per call in order, half for the name and half for arguments equal to the
    reference's (as parsed JSON), over the longer of the two lists; a text answer where calls were
    wanted scores 0. JSON answers: half for exactly the keys in order, half for the share of equal
    values. Text answers: 1.0 only when equal; 0 when the output calls a tool instead."""
    kind = item.meta["kind"]
    if "calls" in item.meta:
        want, got = item.meta["calls"], parse_tool_calls(output)
        if not got:
            return 0.0
        credit = sum(0.5 * (g["name"] == w["name"]) + 0.5 * (g["arguments"] == w["arguments"]) for g, w in zip(got, want))
        return credit / max(len(want), len(got))
    if kind == "json":
        want = item.meta["fields"]
        try:
            got = json.loads(output)
        except (json.JSONDecodeError, TypeError):
            return 0.0
        if not isinstance(got, dict):
            return 0.0
        return 0.5 * (list(got) == list(want)) + 0.5 * sum(got.get(k) == v for k, v in want.items()) / len(want)
    return float(parse_tool_calls(output) is None and normalize(output) == normalize(item.answer))


# --------------------------------------------------------------------------------------------
# scorers shared by the long families


def line_accuracy(reference: str, output: str, sep: str = "\n") -> float:
    """Fraction of reference lines reproduced at the same position (normalised), over the longer of the two."""
    want = [normalize(x) for x in reference.split(sep) if x.strip()]
    got = [normalize(x) for x in output.split(sep) if x.strip()]
    if not want and not got:
        return 1.0
    return sum(g == w for g, w in zip(got, want)) / max(len(want), len(got))


def _score_lines(item: TaskItem, output: str) -> float:
    return line_accuracy(item.answer, output)


def _score_sentences(item: TaskItem, output: str) -> float:
    return line_accuracy(item.answer.replace("\n\n", " "), output.replace("\n\n", " "), sep=". ")


@dataclass(frozen=True)
class Family:
    name: str
    make: Callable[[random.Random], TaskItem]  # one item from a seeded RNG
    score: Callable[[TaskItem, str], float]  # family score in [0, 1]
    long: bool  # long outputs (more than one short canvas): block mode is expected to be weaker


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("extract", _extract, _score_extract, False),
        Family("classify", _classify, _score_classify, False),
        Family("summarize", _summarize, _score_summarize, False),
        Family("plan", _plan, _score_plan, False),
        Family("code", _code, _score_lines, False),
        Family("tool", _tool, _score_tool, False),
        Family("reason", _reason, _score_lines, True),
        Family("write", _write, _score_sentences, True),
        Family("schema", make_schema, score_fields, False),
        Family("toolcall", make_toolcall, score_fields, False),
        Family("label", make_label, score_fields, False),
    )
}


# Auxiliary training families: drawn by training steps when `family_weights` names them, never part
# of a suite, an evaluation or the router's data (so they stay out of FAMILIES). "copy" drills the
# copying of unseen values that schema and toolcall need (lab/model/open_tasks.py).
AUX_FAMILIES: dict[str, Family] = {"copy": Family("copy", make_copy, score_fields, False), "wild": Family("wild", make_wild, score_fields, False)}


def score(item: TaskItem, output: str) -> Score:
    """Exact match after whitespace normalisation, plus the family's partial credit."""
    exact = normalize(output) == normalize(item.answer)
    return Score(exact=exact, family_score=1.0 if exact else FAMILIES[item.family].score(item, output))


def iter_items(family: str, split: str, seed: int) -> Iterator[TaskItem]:
    """Endless, deterministic stream of distinct items of one family that fall in `split`."""
    assert split in SPLITS, f"split must be one of {SPLITS}, got {split!r}"
    assert family in FAMILIES, f"family must be one of {sorted(FAMILIES)}, got {family!r}"
    rng = random.Random(f"{seed}/{family}")
    seen: set[str] = set()
    make = FAMILIES[family].make
    while True:
        item = make(rng)
        if item.key in seen or item.split != split:
            continue
        seen.add(item.key)
        yield item


def generate_suite(n_per_family: int, split: str = "test", seed: int = 0, families: tuple[str, ...] | None = None) -> list[TaskItem]:
    """`n_per_family` distinct items of each family, all in `split`; the same arguments give the same list."""
    out: list[TaskItem] = []
    for family in families or tuple(FAMILIES):
        stream = iter_items(family, split, seed)
        out += [next(stream) for _ in range(n_per_family)]
    return out


def sample_item(family: str, rng: random.Random, split: str = "train") -> TaskItem:
    """One item of `family` in `split` drawn from `rng` (training streams use this, one RNG per step)."""
    make = (FAMILIES | AUX_FAMILIES)[family].make
    while True:
        item = make(rng)
        if item.split == split:
            return item


__all__ = [
    "FAMILIES", "AUX_FAMILIES", "SHORT_FAMILIES", "LONG_FAMILIES", "OPEN_FAMILIES", "SPLITS", "Family", "TaskItem", "Score",
    "generate_suite", "iter_items", "sample_item", "score", "normalize", "split_of", "line_accuracy",
    "tool_call_text", "parse_tool_calls", "TOOL_CALL_OPEN", "TOOL_CALL_CLOSE",
]
