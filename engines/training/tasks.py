"""The task suite the embedded model is trained and evaluated on: seven families of chat tasks.

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

Splits: an item's split is a hash of its content key (the user message), so train, validation
and test never share an item, whatever seed produced them.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

SPLITS = ("train", "val", "test")
SHORT_FAMILIES = ("extract", "classify", "summarize", "plan", "code")
LONG_FAMILIES = ("reason", "write")

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
class TaskItem:
    family: str  # one of FAMILIES
    messages: list[dict]  # chat turns, the last one from the user
    answer: str  # the reference output: a function of the prompt
    key: str  # content key: the split is a hash of it, and items with equal keys are the same item
    meta: dict = field(default_factory=dict)  # what the family scorer needs (fields, facts, lines)
    output_tokens: int | None = None  # answer length in tokens, filled by `count_tokens`

    @property
    def prompt(self) -> str:
        return self.messages[-1]["content"]

    @property
    def split(self) -> str:
        return split_of(self.key)

    def count_tokens(self, tokenizer) -> int:
        """Answer length in tokens with `tokenizer` (no special tokens); cached on the item."""
        self.output_tokens = len(tokenizer(self.answer, add_special_tokens=False)["input_ids"])
        return self.output_tokens


@dataclass
class Score:
    exact: bool  # equal to the reference after whitespace normalisation
    family_score: float  # partial credit in [0, 1]: field, line or fact accuracy (1.0 when exact)


def normalize(text: str) -> str:
    """Collapse every whitespace run to one space and strip the ends."""
    return " ".join(text.split())


def split_of(key: str) -> str:
    """80/10/10 train/val/test by a stable hash of the item's content key."""
    bucket = int(hashlib.sha1(key.encode()).hexdigest()[:8], 16) % 10
    return "test" if bucket == 0 else "val" if bucket == 1 else "train"


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
        Family("reason", _reason, _score_lines, True),
        Family("write", _write, _score_sentences, True),
    )
}


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
    make = FAMILIES[family].make
    while True:
        item = make(rng)
        if item.split == split:
            return item


__all__ = [
    "FAMILIES", "SHORT_FAMILIES", "LONG_FAMILIES", "SPLITS", "Family", "TaskItem", "Score",
    "generate_suite", "iter_items", "sample_item", "score", "normalize", "split_of", "line_accuracy",
]
