"""`wild`: an auxiliary training family of schema requests written the way people write, for the
copying to carry past the suite's templates (issue 37's realistic requests).

The suite's `schema` family (lab/model/open_tasks.py) writes one sentence per field from a fixed
list, values made of syllables (`"Cenfar Labs"`, `"w.kocol@fimon.co"`), ISO dates only, and never
two values of the kind a key asks for. The copy-first checkpoint learned to copy there (0.94 field
exact in AR) and not on 40 hand-written requests (0.15: docs/benchmarks.md). What those have and
the suite lacks, and this family adds:

- values of the shapes people write: hyphenated or three-part names with an accent now and then,
  e-mail addresses built from the name, dates as `9 June 2027`, `June 9, 2027`, `09/06/2027` or
  `9 June`, codes such as `HK/8812-B` or `INV-2027-00418`, phone numbers in several formats;
- the genres: an e-mail with a greeting and a signature, a notice, a chat message;
- a distractor of the same kind as an asked field in half the items, told apart by its role
  (`left our hub on 3 June, expected at the depot by 9 June`);
- the ask in words that name the fields (`Give me the tracking code and the arrival date.`).

Opt-in for training (`--family-weights '{"wild": 2}'`); never served, never in the suite's
evaluation or the router's data. Its texts are generated here: none is taken from
`tandem/bench/data/realistic_structured.jsonl`, which stays a set the model never sees.
"""

from __future__ import annotations

import json
import random

from engines.skeleton import schema_instruction
from lab.model.items import TaskItem
from lab.model.open_tasks import _CENTS, _LETTERS, _digits, _word

_ACCENTS = {"a": "á", "e": "é", "o": "ø", "n": "ñ", "c": "ç", "u": "ü", "i": "í"}
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December")
_TLDS = ("com", "io", "net", "org", "de", "co.uk", "fr", "nl", "es", "se")
_TRADES = ("Joinery", "Water Authority", "Dental", "Freight", "Studio", "Analytics", "Bakery", "Consulting", "Fixings", "Print Works")
_SUFFIXES = ("Ltd", "GmbH", "Inc.", "LLC", "& Sons", "AB", "")


def _cap(word: str) -> str:
    return word[:1].upper() + word[1:]


def _person(rng: random.Random) -> str:
    first = _cap(_word(rng, rng.choice((1, 2, 2))))
    last = _cap(_word(rng, rng.choice((1, 2))))
    if rng.random() < 0.3:
        last += "-" + _cap(_word(rng, rng.choice((1, 2))))
    if rng.random() < 0.15:
        first += " " + _cap(_word(rng, 1))
    if rng.random() < 0.12 and len(first) > 1:
        at = rng.randrange(1, len(first))
        if first[at] in _ACCENTS:
            first = first[:at] + _ACCENTS[first[at]] + first[at + 1 :]
    return f"{first} {last}"


def _company(rng: random.Random) -> str:
    return " ".join(p for p in (_cap(_word(rng, rng.choice((2, 3)))), rng.choice(_TRADES), rng.choice(_SUFFIXES)) if p)


def _email_of(rng: random.Random, person: str) -> str:
    plain = "".join(c for c in person.lower() if c.isascii() and (c.isalpha() or c in " -"))
    first, last = plain.split(" ")[0], plain.split(" ")[-1].split("-")[0]
    local = rng.choice([f"{first}.{last}", f"{first[0]}.{last}", first, f"{first[0]}{last}", f"{last}.{first[0]}"])
    domain = _word(rng, 2) + (f"-{_word(rng, 1)}" if rng.random() < 0.3 else "")
    return f"{local}@{domain}.{rng.choice(_TLDS)}"


def _date(rng: random.Random) -> str:
    year, month, day = rng.randint(2025, 2031), rng.randint(1, 12), rng.randint(1, 28)
    return rng.choice([f"{day} {_MONTHS[month - 1]} {year}", f"{_MONTHS[month - 1]} {day}, {year}", f"{year}-{month:02d}-{day:02d}",
                       f"{day:02d}/{month:02d}/{year}", f"{day} {_MONTHS[month - 1]}"])


def _code(rng: random.Random) -> str:
    letters = lambda n: "".join(rng.choice(_LETTERS) for _ in range(n))  # noqa: E731
    return rng.choice([f"{letters(3)}-{rng.randint(2025, 2031)}-{_digits(rng, 5)}", f"{letters(2)}/{_digits(rng, 4)}-{letters(1)}",
                       f"{letters(3)}-{_digits(rng, 2)}{letters(1)}-{_digits(rng, 5)}", f"{letters(2)}-{_digits(rng, 5)}-{letters(1)}",
                       f"{letters(1)}{_digits(rng, 7)}", f"{letters(2)}{_digits(rng, 4)}{letters(2)}"])


def _phone(rng: random.Random) -> str:
    return rng.choice([f"0{_digits(rng, 3)} {_digits(rng, 3)} {_digits(rng, 3)}", f"+{rng.randint(1, 49)} ({_digits(rng, 3)}) {_digits(rng, 3)}-{_digits(rng, 4)}",
                       f"0{_digits(rng, 4)} {_digits(rng, 3)} {_digits(rng, 3)}", f"+{rng.randint(30, 49)} {_digits(rng, 2)} {_digits(rng, 3)} {_digits(rng, 2)} {_digits(rng, 2)}"])


def _amount(rng: random.Random) -> float:
    return float(f"{rng.choice([rng.randint(5, 99), rng.randint(100, 999), rng.randint(1000, 9999)])}.{rng.choice(_CENTS):02d}")


def _place(rng: random.Random) -> str:
    return _cap(_word(rng, 2)) + rng.choice(["", "", " Bay", "ville", "holm", " Heath", "wick"])


# role -> (value kind, how the text says it ({v}), the words an ask uses); roles of one kind are told apart by their phrase
_ROLES = {
    "sender_name": ("person", ("Thanks,\n{v}", "Best,\n{v}", "Kind regards, {v}"), "the sender's name"),
    "contact_name": ("person", ("Please contact {v} with any questions.", "Your contact person is {v}.", "Ask for {v} at the desk."), "the contact person"),
    "customer_name": ("person", ("Customer: {v}.", "This order was placed by {v}.", "Booked in the name of {v}."), "the customer's name"),
    "email": ("email", ("You can reach me at {v}.", "Replies to {v}, please.", "E-mail: {v}."), "the e-mail address"),
    "company": ("company", ("We are writing on behalf of {v}.", "Supplier: {v}.", "The work was done by {v}."), "the company"),
    "invoice_number": ("code", ("Invoice {v} is attached.", "Re: invoice {v}", "Our reference for this invoice is {v}."), "the invoice number"),
    "tracking_code": ("code", ("Consignment {v} has left the hub.", "Tracking: {v}.", "Your parcel {v} is on its way."), "the tracking code"),
    "phone": ("phone", ("Call us on {v}.", "Phone: {v}.", "My number is {v}."), "the phone number"),
    "amount_due": ("amount", ("The amount due is {v} EUR.", "Please pay {v} by bank transfer.", "Total to pay: {v}."), "the amount due"),
    "due_date": ("date", ("Payment is due by {v}.", "Please settle this before {v}.", "Due: {v}."), "the due date"),
    "arrival_date": ("date", ("It is expected to arrive on {v}.", "Estimated delivery: {v}.", "It should reach you by {v}."), "the arrival date"),
    "meeting_date": ("date", ("The meeting is on {v}.", "Let's meet on {v}.", "We moved the review to {v}."), "the meeting date"),
    "town": ("place", ("The site is in {v}.", "Delivery address: somewhere near {v}.", "We are based in {v}."), "the town"),
}
# a same-kind value with another role: (kind, phrases)
_DISTRACTORS = {
    "person": ("I am away, so do not write to {v}.", "{v} is copied on this message.", "Last time this was handled by {v}."),
    "date": ("It left our warehouse on {v}.", "This replaces the plan of {v}.", "The request came in on {v}."),
    "code": ("This replaces the old reference {v}.", "Ignore the earlier number {v}.", "Your customer number is {v}."),
    "amount": ("A late fee of {v} applies afterwards.", "You already paid {v} in March.", "The deposit was {v}."),
    "phone": ("The old number {v} is no longer in use.", "Our fax is {v}.", "Evenings only: {v}."),
    "email": ("Please no longer use {v}.", "A copy went to {v}.", "The old address {v} is closed."),
}
_GREETINGS = ("Hi team,", "Hello,", "Dear customer,", "Good morning,", "Hi there,", "")
_FILLERS = ("Sorry for the short notice.", "Let me know if anything is unclear.", "The rest of the order is unchanged.",
            "We appreciate your patience.", "Attached is the updated document.", "The office is closed on Friday.")


def _value(rng: random.Random, kind: str, people: list[str]):
    if kind == "person":
        people.append(_person(rng))
        return people[-1]
    if kind == "email":
        return _email_of(rng, people[0] if people and rng.random() < 0.7 else _person(rng))
    return {"company": _company, "code": _code, "phone": _phone, "amount": _amount, "date": _date, "place": _place}[kind](rng)


def _shown(value) -> str:
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def _ask(rng: random.Random, names: list[str]) -> str:
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return rng.choice(["Extract {f}.", "Give me {f}.", "What are {f}?", "Pull out {f}.", "I need {f} from this."]).format(f=listed)


def make_wild(rng: random.Random) -> TaskItem:
    """A message in one of three genres with 1-4 asked values and, in half the items, a value of an
    asked kind in another role -> the object of the asked values."""
    roles = rng.sample(sorted(_ROLES), rng.choices((1, 2, 3, 4), (0.2, 0.35, 0.3, 0.15))[0])
    kinds = [_ROLES[r][0] for r in roles]
    if len(set(kinds)) < len(kinds):  # two asked values of one kind would need their roles told apart by the ask alone
        seen: set = set()
        roles = [r for r, k in zip(roles, kinds) if not (k in seen or seen.add(k))]
    people: list[str] = []
    obj = {r: _value(rng, _ROLES[r][0], people) for r in roles}
    lines = [rng.choice(_ROLES[r][1]).format(v=_shown(obj[r])) for r in roles]
    signature = [line for r, line in zip(roles, lines) if r == "sender_name"]
    lines = [line for r, line in zip(roles, lines) if r != "sender_name"]
    confusable = [_ROLES[r][0] for r in roles if _ROLES[r][0] in _DISTRACTORS]
    if confusable and rng.random() < 0.5:
        kind = rng.choice(confusable)
        other = _value(rng, kind, [])
        while other in obj.values():
            other = _value(rng, kind, [])
        lines.insert(rng.randint(0, len(lines)), rng.choice(_DISTRACTORS[kind]).format(v=_shown(other)))
    if rng.random() < 0.4:
        lines.insert(rng.randint(0, len(lines)), rng.choice(_FILLERS))
    genre = rng.choice(("email", "notice", "chat"))
    if genre == "email":
        body = "\n\n".join(p for p in (rng.choice(_GREETINGS), " ".join(lines), *signature) if p)
    elif genre == "notice":
        body = rng.choice(("NOTICE", "Update:", "Shipping notice:", "Reminder:")) + " " + " ".join(lines + signature)
    else:  # a chat message: one line, in lower case now and then (the values too, as the text writes them)
        body = " ".join(line.replace("\n", " ") for line in lines + signature)
        if rng.random() < 0.2:
            body, obj = body.lower(), {r: v.lower() if isinstance(v, str) else v for r, v in obj.items()}
    user = f"{body}\n\n{_ask(rng, [_ROLES[r][2] for r in roles])}"
    props = {r: {"type": "number"} if isinstance(obj[r], float) else {"type": "string"} for r in roles}
    schema = {"type": "object", "properties": props, "required": list(roles), "additionalProperties": False}
    messages = [{"role": "system", "content": schema_instruction(schema)}, {"role": "user", "content": user}]
    key = json.dumps({"messages": messages}, ensure_ascii=False)
    return TaskItem("wild", messages, json.dumps(obj, ensure_ascii=False), key=key, meta={"schema": schema, "fields": obj})
