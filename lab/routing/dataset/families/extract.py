"""extract: pull named fields out of a text as JSON (short structured answers: block mode).

`generate` picks one of twelve variants: facts about a person -> JSON fields (variant 0 is the
embedded task suite's format), an invoice, a meeting email, an email signature, a product listing,
a JSON schema in `response_format` with a short instruction, lists of people or dates (longer arrays),
and a system prompt that carries the instruction. `payload_instruction` asks for fields of the
shared payload instead (see families.over_payload).

Expected length: about 4 tokens of braces plus 6-11 per field.
"""

from __future__ import annotations

import json

from ..parts import person_name, prose
from ..pools import CITIES, COMPANIES, COUNTRIES, FIRST, JOBS, PRODUCTS
from ..rng import Rng
from ..sample import Sample


def generate(rng: Rng) -> Sample:
    # one person's details, drawn up front: the bio variants use them, the others draw their own
    name, city, job, company = person_name(rng), rng.choice(CITIES), rng.choice(JOBS), rng.choice(COMPANIES)
    first = name.split()[0]
    age, year = rng.integer(19, 78), rng.integer(1995, 2024)
    email = f"{first.lower()}.{name.split()[1].lower().replace(chr(39), '')}@{company.split()[0].lower()}.com"
    phone = f"+1 {rng.integer(200, 999)}-{rng.integer(200, 999)}-{rng.integer(1000, 9999)}"
    facts = {"name": f"{name} is {age} years old.", "city": f"{first} lives in {city}.",
             "job": f"{first} works as a {job}.", "company": f"{first} has been at {company} since {year}.",
             "email": f"You can reach {first} at {email}.", "phone": f"{first}'s phone number is {phone}."}
    keys = ["name", "age", "city", "job", "company", "email", "phone", "start_year"]
    v = rng.integer(0, 11)
    fmt = None
    if v <= 3:  # facts -> JSON with named fields (the embedded task suite's format when v == 0)
        fields = ["name"] + rng.sample(keys[1:], rng.integer(1, 4))
        sents = [facts["name"]] + [facts[k] for k in ["city", "job", "company", "email", "phone"] if rng.chance(0.7)]
        rng.shuffle(sents)
        text = " ".join(sents)
        fl = ", ".join(fields)
        user = rng.choice([
            f"Extract {fl} as a JSON object.\n{text}",
            f"{text}\n\nReturn a JSON object with the keys {', '.join(json.dumps(k) for k in fields)}.",
            f"Pull the {fl} out of this text and give me json:\n{text}",
            f"Text: {text}\nFields: {fl}\nJSON:",
            f"From the passage below, identify the person's {fl}. Output a JSON object only, no commentary.\n"
            f"\"\"\"{text}\"\"\"",
            f"can you turn this into structured data ({fl})?\n\n{text}",
            f"I need these fields filled in from the bio: {fl}. Use null when something isn't mentioned.\n---\n{text}",
        ]) if v else f"Extract {fl} as JSON.\n{text}"
        tokens = 4 + sum(rng.integer(6, 11) for _ in fields)
        style = "suite" if v == 0 else "natural"
        if rng.chance(0.35):
            fmt = {"type": "json_object"}
        return Sample("extract", user, tokens, response_format=fmt, style=style)
    if v == 4:  # an invoice
        vendor, total = rng.choice(COMPANIES), f"{rng.integer(20, 9000)}.{rng.integer(10, 99)}"
        inv = (f"INVOICE #{rng.integer(10000, 99999)}\nFrom: {vendor}, {rng.choice(CITIES)}\n"
               f"Date: 2024-{rng.integer(1, 12):02d}-{rng.integer(1, 28):02d}\n"
               f"Items: {rng.integer(1, 9)} x {rng.choice(PRODUCTS)}\nTotal due: ${total}\n"
               f"Due date: 2024-{rng.integer(1, 12):02d}-{rng.integer(1, 28):02d}")
        user = rng.choice(["Parse this invoice into JSON with vendor, invoice_number, total and due_date:\n\n",
                           "Get the vendor, the invoice number, the amount and the due date from this. JSON please.\n",
                           "Read the invoice below and return "
                           "{\"vendor\": ..., \"invoice_number\": ..., \"total\": ..., \"due_date\": ...}\n"]) + inv
        return Sample("extract", user, rng.integer(30, 55),
                      response_format={"type": "json_object"} if rng.chance(0.4) else None)
    if v == 5:  # a meeting email
        when = (f"{rng.choice(['Monday', 'Tuesday', 'Thursday', 'Friday'])} at "
                f"{rng.integer(8, 17)}:{rng.choice(['00', '30', '15'])}")
        mail = (f"Hi {rng.choice(FIRST)},\n\nFollowing up on our call: let's meet {when} in the "
                f"{rng.choice(['blue', 'main', 'small'])} room at our {rng.choice(CITIES)} office. "
                f"{prose(rng, rng.integer(1, 3))}\n\nBest,\n{person_name(rng)}")
        user = rng.choice(["Get the meeting date, time and location from this email as JSON:\n\n",
                           "What's the day, time and place of the meeting in the message below? Answer as a JSON object.\n",
                           "extract meeting details (day, time, location, organizer) -> json\n\n"]) + mail
        return Sample("extract", user, rng.integer(28, 50))
    if v == 6:  # an email signature
        sig = (f"--\n{name}\n{job.title()} | {company}\n{phone}\n{email}\n"
               f"{rng.integer(1, 999)} {rng.choice(['Main', 'Oak', 'Harbor', 'King'])} St, {city}")
        user = rng.choice(["Extract the contact details from this signature into JSON "
                           "(name, title, company, phone, email, address).\n\n",
                           "who is this and how do I reach them? return json with name, phone, email\n",
                           "Parse this email signature:\n"]) + sig
        return Sample("extract", user, rng.integer(40, 80))
    if v == 7:  # a product listing
        prod = rng.choice(PRODUCTS)
        listing = (f"{prod.title()} - now only ${rng.integer(15, 400)}.99! "
                   f"Available in {rng.choice(['black', 'white', 'red', 'navy'])} and "
                   f"{rng.choice(['grey', 'green', 'silver'])}. "
                   f"Free shipping to {rng.choice(COUNTRIES)[0]}. {rng.integer(1, 5)}-year warranty. "
                   f"Rated {rng.integer(3, 4)}.{rng.integer(0, 9)} stars by {rng.integer(20, 5000)} customers.")
        user = rng.choice(["From this product listing, extract name, price, colors, warranty and rating as JSON.\n",
                           "Turn the listing into a JSON record (product, price_usd, colors[], warranty_years, rating):\n",
                           "scrape the key attributes from this listing into json\n\n"]) + listing
        return Sample("extract", user, rng.integer(35, 75))
    if v == 8:  # the schema says what to fill; the instruction is short
        props = rng.sample(keys, rng.integer(2, 5))
        schema = {"type": "json_schema", "json_schema": {"name": "record", "schema": {
            "type": "object", "properties": {k: {"type": "string"} for k in props}, "required": props}}}
        text = " ".join(facts[k] for k in ["name", "city", "job", "company", "email"] if rng.chance(0.8))
        user = rng.choice([f"Fill in the schema from this text: {text}", text, f"Use this bio: {text}",
                           f"Here's the profile.\n{text}"])
        return Sample("extract", user, 4 + 8 * len(props), response_format=schema)
    if v == 9:  # list extraction: longer JSON arrays
        people = [(person_name(rng), rng.choice(JOBS)) for _ in range(rng.integer(3, 8))]
        text = " ".join(f"{n} joined as {j}." if k % 2 else f"Our new {j} is {n}." for k, (n, j) in enumerate(people))
        user = rng.choice([f"List every person and their role in the text below as a JSON array of objects.\n\n{text}",
                           f"Give me a JSON list of {{name, role}} pairs from: {text}",
                           f"{text}\n\nExtract all names with job titles. Format: JSON array."])
        return Sample("extract", user, 6 + 14 * len(people))
    if v == 10:  # every date in a paragraph
        dates = [f"{rng.integer(1, 28)} {rng.choice(['January', 'March', 'June', 'September', 'November'])} "
                 f"{rng.integer(2019, 2026)}" for _ in range(rng.integer(2, 6))]
        starts = ['The kickoff was on', 'A review is planned for', 'Payment is due', 'We shipped on']
        text = " ".join(f"{rng.choice(starts)} {d}." for d in dates)
        user = rng.choice([f"What are all the dates in this paragraph? Return them as a JSON list in ISO format.\n{text}",
                           f"Extract every date mentioned (as YYYY-MM-DD strings in a JSON array): {text}"])
        return Sample("extract", user, 4 + 7 * len(dates))
    # the system prompt carries the instruction; the user message is only the text
    text = " ".join(facts[k] for k in ["name", "city", "job", "company"] if rng.chance(0.8)) or facts["name"]
    sys = rng.choice(["You are an information extraction engine. Reply with JSON only.",
                      "Extract structured data from the user's text. "
                      "Output a single JSON object with the fields name, city, job, company.",
                      "You convert free text into JSON records. Never add explanations."])
    return Sample("extract", text, rng.integer(25, 50), system=sys,
                  response_format={"type": "json_object"} if rng.chance(0.5) else None)


def payload_instruction(rng: Rng, payload_tokens: int) -> tuple[str, int]:
    """An extraction instruction for the shared payload and its expected answer length."""
    f = rng.sample(["name", "date", "total", "city", "price", "email", "company", "title", "time", "location", "amount",
                    "phone", "age", "salary"], rng.integer(1, 4))
    fl = ", ".join(f)
    ins = rng.choice([f"Extract the {fl} as JSON", f"Pull out the {fl} from this", f"Get me the {fl}. JSON please",
                      f"Identify the {fl} and output a JSON object", f"Return JSON with fields {fl} for this",
                      f"Parse this into structured fields ({fl})", f"Grab the {fl} from the text below as a json object",
                      f"What are the {fl} here? Reply with JSON", f"Fill in a JSON record ({fl}) from",
                      f"find the {fl} and give them as key/value pairs", f"Capture {fl} from this message into JSON",
                      "List every number in this text as a JSON array",
                      "Extract all the entities (people, places, organizations) as JSON",
                      f"Convert this into a JSON object with keys {fl}"])
    # the open-ended lists (every number, all entities) run longer than a fixed set of fields
    tokens = 4 + 8 * len(f) if "every" not in ins and "entities" not in ins else rng.integer(20, 90)
    return ins, tokens
