"""The routing data set: labeled chat requests for training and evaluating the router.

`python -m router.training.dataset` (or `build()`) writes `router/training/data/routing.jsonl` (train) and
`router/training/data/routing_test.jsonl` (held out). It is synthetic, seeded and deterministic: the same
seed gives byte-identical files.

Each line is one request plus its labels:

    {"id": "r00042", "messages": [...], "max_tokens": 256, "response_format": {...}, "tools": [...],
     "stop": [...], "task": "extract", "output_tokens": 57, "mode": "block", "style": "natural"}

- `task` is one of the nine task types (policies.schema.TASKS);
- `output_tokens` is the expected answer length in tokens (the embedded tokenizer splits digits,
  so numbers cost a token per digit), capped by `max_tokens` when the request sets one;
- `mode` is what the product's default policy (`Policy()`, the schema's defaults) gives for
  (task, output_tokens): block for short structured answers, AR for reasoning, writing and
  anything long.

Variety comes from composition, not one template per class: many instruction phrasings per task
type, real-world subjects drawn from pools, content built from parts (facts, reviews, tickets,
notes, code), chat structure (system prompts that sometimes carry the instruction, earlier turns,
topic switches), noise (typos, casing, chatty prefixes and suffixes, extra whitespace) and request
options (max_tokens, JSON response formats, tools, stop). About one prompt in ten follows
the format of the embedded model's own task suite (`style: "suite"`): facts -> JSON extraction,
review/ticket -> one label, facts -> one-line summary, goal + tools -> JSON list of calls, a
one-line spec -> a short Python function, adding 8-25 numbers with a running total per line, and
long templated stories/reports. Beside them, each file carries real requests of that suite
(`style: "task_suite"`, `suite_records`): 60 per family from its train split in the train file,
20 from its test split in the held-out file, with answer lengths in the shipped tokenizer.

The held-out split is a seeded random 25% after removing duplicate prompts, so no prompt text
appears in both files; it shares the generator's templates, which makes its accuracy an upper
bound on what real traffic would see (docs/router.md says so next to the numbers).
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from engines.defaults import SHIPPED_CHECKPOINT

DATA_DIR = Path(__file__).resolve().parent / "data"
TRAIN_PATH = DATA_DIR / "routing.jsonl"
TEST_PATH = DATA_DIR / "routing_test.jsonl"

# --- pools of real-world subjects ------------------------------------------------------------------

FIRST = ["Alice", "Bob", "Carlos", "Dana", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jamal", "Kofi", "Lena",
         "Maya", "Noah", "Olga", "Priya", "Quinn", "Rosa", "Sven", "Tomas", "Uma", "Victor", "Wei", "Yara", "Zoe",
         "Amara", "Ben", "Chloe", "Diego", "Emeka", "Fatima", "Gustav", "Hannah", "Ivan", "Julia", "Kenji", "Leila"]
LAST = ["Johnson", "Smith", "Mendes", "Lee", "Petrova", "Haddad", "O'Neill", "Tanaka", "Garcia", "Wright", "Mensah",
        "Fischer", "Patel", "Cohen", "Ivanova", "Sharma", "Murphy", "Diaz", "Larsen", "Silva", "Rao", "Lima", "Chen",
        "Nasser", "Martin", "Okafor", "Novak", "Dubois", "Rossi", "Kowalski", "Nguyen", "Andersson", "Yilmaz"]
CITIES = ["Paris", "Berlin", "Lisbon", "Nairobi", "Toronto", "Osaka", "Austin", "Lagos", "Melbourne", "Denver",
          "Madrid", "Seoul", "Boston", "Cape Town", "Dublin", "Warsaw", "Mumbai", "Lima", "Oslo", "Chicago",
          "Singapore", "Istanbul", "Bogota", "Prague", "Vancouver", "Cairo", "Helsinki", "Manila", "Zurich"]
COUNTRIES = [("France", "Paris"), ("Japan", "Tokyo"), ("Kenya", "Nairobi"), ("Canada", "Ottawa"), ("Brazil", "Brasilia"),
             ("Australia", "Canberra"), ("Egypt", "Cairo"), ("Norway", "Oslo"), ("Peru", "Lima"), ("Vietnam", "Hanoi"),
             ("Poland", "Warsaw"), ("Chile", "Santiago"), ("Ghana", "Accra"), ("Turkey", "Ankara"), ("Portugal", "Lisbon"),
             ("Mongolia", "Ulaanbaatar"), ("Morocco", "Rabat"), ("Thailand", "Bangkok"), ("Ireland", "Dublin"),
             ("Argentina", "Buenos Aires"), ("Nigeria", "Abuja"), ("Sweden", "Stockholm"), ("India", "New Delhi")]
COMPANIES = ["Acme Corp", "Globex", "Initech", "Northwind Traders", "Umbrella Labs", "Stark Logistics", "Bluebird Bank",
             "Helios Energy", "Pinecone Health", "Orbital Foods", "Kestrel Software", "Tidewater Insurance", "Zenith Motors",
             "Maple & Co", "Lumen Analytics", "RiverRock Retail", "Nimbus Cloud", "Vertex Pharma", "Cobalt Mining"]
JOBS = ["software engineer", "nurse", "accountant", "data scientist", "teacher", "product manager", "electrician",
        "graphic designer", "pharmacist", "sales manager", "civil engineer", "journalist", "chef", "lawyer",
        "mechanic", "marketing lead", "UX researcher", "pilot", "architect", "HR specialist", "barista"]
PRODUCTS = ["wireless earbuds", "standing desk", "espresso machine", "running shoes", "air fryer", "4K monitor",
            "mechanical keyboard", "yoga mat", "electric toothbrush", "robot vacuum", "hiking backpack", "smartwatch",
            "blender", "office chair", "phone case", "e-reader", "portable charger", "winter jacket", "bike helmet"]
TOPICS = ["remote work", "climate change", "social media and teenagers", "the history of the printing press",
          "renewable energy", "artificial intelligence in healthcare", "urban gardening", "the four-day work week",
          "space exploration", "the ethics of gene editing", "public transport", "video games as art",
          "the importance of sleep", "minimalism", "learning a second language", "the future of cities",
          "electric cars", "online privacy", "the Roman Empire", "coffee culture", "open source software"]
BOOKS = [("Pride and Prejudice", "Jane Austen"), ("1984", "George Orwell"), ("Things Fall Apart", "Chinua Achebe"),
         ("One Hundred Years of Solitude", "Gabriel Garcia Marquez"), ("The Hobbit", "J. R. R. Tolkien"),
         ("Beloved", "Toni Morrison"), ("Moby-Dick", "Herman Melville"), ("Don Quixote", "Miguel de Cervantes"),
         ("The Great Gatsby", "F. Scott Fitzgerald"), ("Crime and Punishment", "Fyodor Dostoevsky"),
         ("Frankenstein", "Mary Shelley"), ("The Little Prince", "Antoine de Saint-Exupery")]
ACRONYMS = ["HTTP", "NASA", "GDP", "DNA", "CPU", "UNESCO", "API", "SQL", "HTML", "LED", "ROI", "KPI", "VPN", "GPS",
            "OCR", "NATO", "PDF", "RAM", "USB", "FAQ", "ETA", "CEO", "IPO", "SaaS"]
TERMS = ["photosynthesis", "inflation", "a black hole", "machine learning", "a mortgage", "entropy", "a sonnet",
         "blockchain", "an API", "osmosis", "a recession", "compound interest", "a vaccine", "an algorithm",
         "democracy", "a neutron star", "a hash function", "opportunity cost", "an allele", "a haiku"]
EVENTS = [("the Berlin Wall fall", "1989"), ("World War II end", "1945"), ("the first Moon landing happen", "1969"),
          ("the Titanic sink", "1912"), ("the French Revolution start", "1789"), ("the iPhone come out", "2007"),
          ("Nelson Mandela become president", "1994"), ("the Wright brothers first fly", "1903")]
UNITS = [("ounces", "pound"), ("centimeters", "meter"), ("feet", "mile"), ("seconds", "day"), ("grams", "kilogram"),
         ("minutes", "week"), ("inches", "yard"), ("milliliters", "liter"), ("bytes", "kilobyte")]
ELEMENTS = ["gold", "iron", "sodium", "potassium", "silver", "lead", "tin", "mercury", "helium", "copper"]
ANIMALS = [("spider", 8), ("insect", 6), ("octopus", 8), ("horse", 4), ("crab", 10), ("ostrich", 2)]
PAIRS = [("affect", "effect"), ("weather", "climate"), ("a virus", "a bacterium"), ("RAM", "storage"),
         ("a crocodile", "an alligator"), ("TCP", "UDP"), ("stocks", "bonds"), ("latitude", "longitude"),
         ("empathy", "sympathy"), ("a list", "a tuple in Python")]

TOOLS = {
    "search_web": "search_web(query)", "get_weather": "get_weather(city, date)", "send_email": "send_email(to, subject, body)",
    "create_event": "create_event(title, start, end, attendees)", "book_flight": "book_flight(origin, destination, date)",
    "book_hotel": "book_hotel(city, check_in, nights)", "lookup_order": "lookup_order(order_id)",
    "refund_order": "refund_order(order_id, amount)", "query_db": "query_db(sql)", "send_sms": "send_sms(number, text)",
    "translate": "translate(text, target_language)", "create_ticket": "create_ticket(title, priority)",
    "get_stock_price": "get_stock_price(symbol)", "convert_currency": "convert_currency(amount, from, to)",
    "read_file": "read_file(path)", "post_slack": "post_slack(channel, message)",
}
GOALS = [
    ("find out tomorrow's weather in {city} and email it to {first}", ["get_weather", "send_email"]),
    ("book a flight from {city} to {city2} next Friday and a hotel for three nights", ["book_flight", "book_hotel"]),
    ("check the status of order {num} and refund it if it was damaged", ["lookup_order", "refund_order"]),
    ("schedule a meeting with {first} and {first2} on Tuesday at 10am and post it in #team", ["create_event", "post_slack"]),
    ("look up the price of AAPL, convert it to euros and text it to my phone", ["get_stock_price", "convert_currency", "send_sms"]),
    ("count last month's signups in the database and report the number in #growth", ["query_db", "post_slack"]),
    ("research the best {product} under $100 and email me a shortlist", ["search_web", "send_email"]),
    ("read the file notes/{first}.txt, translate it into Spanish and email it to {first}", ["read_file", "translate", "send_email"]),
    ("open a high-priority ticket about the outage in {city} and notify the on-call engineer by SMS", ["create_ticket", "send_sms"]),
    ("plan a trip to {city2}: check the weather, book the flight and the hotel, then put it on my calendar",
     ["get_weather", "book_flight", "book_hotel", "create_event"]),
]

POS = ["absolutely love it", "works perfectly", "best purchase this year", "exceeded my expectations", "great value for money",
       "super comfortable and well made", "arrived early and looks great", "would buy again in a heartbeat"]
NEG = ["broke after two days", "total waste of money", "stopped working within a week", "customer service never replied",
       "cheap plastic, feels flimsy", "arrived damaged and late", "battery dies in an hour", "does not match the description"]
NEU = ["it's okay, nothing special", "does the job I guess", "average quality for the price", "fine but a bit noisy",
       "not bad, not great", "it works as described, no more no less"]
TICKETS = {
    "billing": ["I was charged twice for my subscription this month", "my invoice shows the wrong VAT number",
                "why did my card get declined when the balance is fine", "I need a refund for the annual plan"],
    "technical": ["the app crashes whenever I upload a photo", "I get error 502 when I log in", "sync stopped working after the update",
                  "the export button does nothing in Firefox"],
    "shipping": ["my package has been stuck in transit for a week", "the tracking number doesn't work",
                 "I received someone else's order", "can I change the delivery address"],
    "account": ["I can't reset my password, the email never arrives", "please delete my account and data",
                "how do I add a second user to my team", "my account got locked after too many attempts"],
}
HEADLINES = {
    "politics": ["Parliament passes new housing bill after late-night vote", "Senator announces run for governor"],
    "sports": ["Underdogs win the cup final on penalties", "Star striker signs three-year deal"],
    "business": ["Retail giant reports record quarterly profit", "Startup raises $40 million in series B"],
    "tech": ["New phone chip promises two-day battery life", "Open source database hits version 5.0"],
    "science": ["Astronomers spot water vapor on distant exoplanet", "New enzyme breaks down plastic in days"],
}
INTENTS = {
    "book_flight": ["I need a flight to {city} on the 12th", "get me a ticket to {city} next week"],
    "cancel_booking": ["cancel my reservation for tonight", "I won't make it, please cancel the booking"],
    "check_status": ["where is my order {num}", "has my refund gone through yet"],
    "other": ["what are your opening hours", "do you have vegan options"],
}
FILLER = [
    "The team met on Monday to review the roadmap.", "Costs rose by {pct} percent compared to last year.",
    "The launch was moved from March to May because of supplier delays.", "Customer satisfaction improved in every region.",
    "Two senior engineers left the project in the spring.", "The board approved a budget of ${num} for the next phase.",
    "A pilot program ran in {city} for six weeks.", "Most users asked for better offline support.",
    "The new warehouse cut delivery times by a day.", "Sales in {city} were lower than expected.",
    "Marketing will focus on students this autumn.", "The contract with {company} was renewed for two years.",
    "Several bugs in the payment flow were fixed.", "The audit found no major issues.",
    "Hiring will pause until the next quarter.", "The CEO thanked staff for a difficult but productive year.",
    "Energy use in the office dropped after the switch to LED lighting.", "A security review is planned for June.",
    "The mobile app reached {num} downloads.", "Feedback from the beta testers was mostly positive.",
]
PROSE = [
    "we are writing to let you know that the office will be closed next friday for maintenance",
    "i think the proposal is good but we need more data before we decide anything",
    "the meeting went long and nobody agreed on the budget so we will meet again",
    "thank you for your patience while we looked into the problem with your account",
    "our new product helps small teams plan their week and share tasks without endless emails",
    "the weather was terrible so the event moved indoors and fewer people came than we hoped",
    "please send me the report by tomorrow because the client wants it before the weekend",
    "i'm sorry for the late reply, things have been really busy since the move",
    "the city council voted to extend the bike lanes along the river by two miles",
    "our quarterly results beat expectations thanks to strong sales in europe and asia",
    "the software update fixes several security issues and improves battery life on older phones",
    "volunteers planted over three hundred trees in the park on saturday morning",
]
CODE_SPECS = [
    ("reverse_words", "s", "returns the words of a sentence in reverse order"),
    ("is_palindrome", "s", "checks whether a string reads the same backwards, ignoring case"),
    ("count_vowels", "text", "counts the vowels in a string"),
    ("fizzbuzz", "n", "returns the FizzBuzz sequence up to n as a list of strings"),
    ("flatten", "nested", "flattens a list of lists into one list"),
    ("median", "xs", "returns the median of a list of numbers"),
    ("dedupe", "items", "removes duplicates from a list while keeping the order"),
    ("word_freq", "text", "returns a dict mapping each word to how often it appears"),
    ("celsius_to_f", "c", "converts Celsius to Fahrenheit"),
    ("chunk", "xs, size", "splits a list into chunks of the given size"),
    ("is_prime", "n", "tells whether n is a prime number"),
    ("merge_dicts", "a, b", "merges two dicts, summing values of shared keys"),
    ("parse_date", "s", "parses dates like 2024-03-15 into a datetime.date"),
    ("running_total", "xs", "returns the running totals of a list of numbers"),
    ("slugify", "title", "turns a title into a URL slug"),
    ("top_k", "xs, k", "returns the k largest numbers in descending order"),
    ("gcd", "a, b", "computes the greatest common divisor of two integers"),
    ("validate_email", "s", "returns True if the string looks like an email address"),
]
LANGS = ["Python", "JavaScript", "TypeScript", "Go", "Rust", "Java", "C#", "Ruby", "Kotlin"]
SNIPPETS = [
    "def avg(xs):\n    return sum(xs) / len(xs)\n\nprint(avg([]))",
    "for i in range(len(items)):\n    if items[i] == target:\n        items.remove(items[i])",
    "data = json.loads(open('config.json'))\nprint(data['port'])",
    "def add_item(item, bucket=[]):\n    bucket.append(item)\n    return bucket",
    "const total = prices.reduce((a, b) => a + b)\nconsole.log(total.toFixed(2))",
    "SELECT name, COUNT(*) FROM orders GROUP BY customer_id;",
    "x = input('number: ')\nprint(x + 1)",
]
ERRORS = ["ZeroDivisionError", "TypeError", "IndexError", "KeyError", "a wrong result", "an infinite loop"]
GENERIC_SYSTEMS = [
    "You are a helpful assistant.", "You are Tandem, a concise and friendly assistant.", "Answer as briefly as possible.",
    "You are an AI assistant for {company}. Be polite and accurate.", "You are a helpful, harmless and honest assistant.",
    "Keep answers short unless the user asks for detail.", "You are an assistant inside a productivity app.",
    "Respond in English. Use markdown when it helps.",
]
PREFIXES = ["hey, ", "Hi! ", "ok so ", "Quick question: ", "Hello there. ", "So, ", "Hi team - ", "Morning! ",
            "I need some help. ", "My boss asked me to do this: ", "For a project at {company}: ", "urgent: ",
            "I'm not sure how to do this. ", "Can you help? "]
SUFFIXES = [" Thanks!", " thx", " Thank you in advance.", " Cheers.", " Please and thank you!", " asap pls", " :)",
            "\n\nThanks a lot!", " Much appreciated."]
PLEASANTRIES = [("hi", "Hello! How can I help you today?"), ("hello, are you there?", "Yes, I'm here. What do you need?"),
                ("I have a task for you", "Sure, go ahead."), ("can you help me with something", "Of course! What is it?")]


@dataclass
class Sample:
    """One generated request before chat wrapping and noise."""

    task: str
    user: str  # the final user message
    tokens: int  # expected answer length in tokens, before any max_tokens cap
    system: str | None = None  # a task-specific system prompt (else the wrapper may add a generic one)
    history: list[dict] = field(default_factory=list)  # earlier turns
    response_format: dict | None = None
    tools: list[dict] | None = None
    style: str = "natural"  # "suite" for the embedded task-suite format


def approx_tokens(text: str) -> int:
    return max(1, (len(text) + 3) // 4)


class Gen:
    """All generators share one seeded RNG and the small helpers below."""

    def __init__(self, seed: int):
        self.r = random.Random(seed)

    # helpers
    def c(self, xs):
        return self.r.choice(xs)

    def i(self, a, b):
        return self.r.randint(a, b)

    def p(self, prob):
        return self.r.random() < prob

    def name(self):
        return f"{self.c(FIRST)} {self.c(LAST)}"

    def fill(self, s: str) -> str:
        return s.format(city=self.c(CITIES), city2=self.c(CITIES), first=self.c(FIRST), first2=self.c(FIRST),
                        company=self.c(COMPANIES), product=self.c(PRODUCTS), num=self.i(1000, 99999), pct=self.i(2, 40))

    def facts(self, n: int) -> str:
        return " ".join(self.fill(s) for s in self.r.sample(FILLER, n))

    def prose(self, sentences: int) -> str:
        out = []
        for _ in range(sentences):
            s = self.c(PROSE)
            out.append(s[0].upper() + s[1:] + ".")
        return " ".join(out)

    def tool_specs(self, names: list[str]) -> list[dict]:
        specs = []
        for n in names:
            args = TOOLS[n][len(n) + 1 : -1].split(", ")
            specs.append({"type": "function", "function": {"name": n, "description": f"{n.replace('_', ' ')}",
                          "parameters": {"type": "object", "properties": {a: {"type": "string"} for a in args}}}})
        return specs

    # --- extract ------------------------------------------------------------------------------------
    def extract(self) -> Sample:
        name, city, job, company = self.name(), self.c(CITIES), self.c(JOBS), self.c(COMPANIES)
        first = name.split()[0]
        age, year = self.i(19, 78), self.i(1995, 2024)
        email = f"{first.lower()}.{name.split()[1].lower().replace(chr(39), '')}@{company.split()[0].lower()}.com"
        phone = f"+1 {self.i(200, 999)}-{self.i(200, 999)}-{self.i(1000, 9999)}"
        facts = {"name": f"{name} is {age} years old.", "city": f"{first} lives in {city}.",
                 "job": f"{first} works as a {job}.", "company": f"{first} has been at {company} since {year}.",
                 "email": f"You can reach {first} at {email}.", "phone": f"{first}'s phone number is {phone}."}
        keys = ["name", "age", "city", "job", "company", "email", "phone", "start_year"]
        v = self.i(0, 11)
        fmt = None
        if v <= 3:  # facts -> JSON with named fields (the embedded task suite's format when v == 0)
            fields = ["name"] + self.r.sample(keys[1:], self.i(1, 4))
            sents = [facts["name"]] + [facts[k] for k in ["city", "job", "company", "email", "phone"] if self.p(0.7)]
            self.r.shuffle(sents)
            text = " ".join(sents)
            fl = ", ".join(fields)
            user = self.c([
                f"Extract {fl} as a JSON object.\n{text}",
                f"{text}\n\nReturn a JSON object with the keys {', '.join(json.dumps(k) for k in fields)}.",
                f"Pull the {fl} out of this text and give me json:\n{text}",
                f"Text: {text}\nFields: {fl}\nJSON:",
                f"From the passage below, identify the person's {fl}. Output a JSON object only, no commentary.\n\"\"\"{text}\"\"\"",
                f"can you turn this into structured data ({fl})?\n\n{text}",
                f"I need these fields filled in from the bio: {fl}. Use null when something isn't mentioned.\n---\n{text}",
            ]) if v else f"Extract {fl} as JSON.\n{text}"
            tokens = 4 + sum(self.i(6, 11) for _ in fields)
            style = "suite" if v == 0 else "natural"
            if self.p(0.35):
                fmt = {"type": "json_object"}
            return Sample("extract", user, tokens, response_format=fmt, style=style)
        if v == 4:
            vendor, total = self.c(COMPANIES), f"{self.i(20, 9000)}.{self.i(10, 99)}"
            inv = (f"INVOICE #{self.i(10000, 99999)}\nFrom: {vendor}, {self.c(CITIES)}\nDate: 2024-{self.i(1, 12):02d}-{self.i(1, 28):02d}\n"
                   f"Items: {self.i(1, 9)} x {self.c(PRODUCTS)}\nTotal due: ${total}\nDue date: 2024-{self.i(1, 12):02d}-{self.i(1, 28):02d}")
            user = self.c(["Parse this invoice into JSON with vendor, invoice_number, total and due_date:\n\n",
                           "Get the vendor, the invoice number, the amount and the due date from this. JSON please.\n",
                           "Read the invoice below and return {\"vendor\": ..., \"invoice_number\": ..., \"total\": ..., \"due_date\": ...}\n"]) + inv
            return Sample("extract", user, self.i(30, 55), response_format={"type": "json_object"} if self.p(0.4) else None)
        if v == 5:
            when = f"{self.c(['Monday', 'Tuesday', 'Thursday', 'Friday'])} at {self.i(8, 17)}:{self.c(['00', '30', '15'])}"
            mail = (f"Hi {self.c(FIRST)},\n\nFollowing up on our call: let's meet {when} in the {self.c(['blue', 'main', 'small'])} room "
                    f"at our {self.c(CITIES)} office. {self.prose(self.i(1, 3))}\n\nBest,\n{self.name()}")
            user = self.c(["Get the meeting date, time and location from this email as JSON:\n\n",
                           "What's the day, time and place of the meeting in the message below? Answer as a JSON object.\n",
                           "extract meeting details (day, time, location, organizer) -> json\n\n"]) + mail
            return Sample("extract", user, self.i(28, 50))
        if v == 6:
            sig = f"--\n{name}\n{job.title()} | {company}\n{phone}\n{email}\n{self.i(1, 999)} {self.c(['Main', 'Oak', 'Harbor', 'King'])} St, {city}"
            user = self.c(["Extract the contact details from this signature into JSON (name, title, company, phone, email, address).\n\n",
                           "who is this and how do I reach them? return json with name, phone, email\n", "Parse this email signature:\n"]) + sig
            return Sample("extract", user, self.i(40, 80))
        if v == 7:
            prod = self.c(PRODUCTS)
            listing = (f"{prod.title()} - now only ${self.i(15, 400)}.99! Available in {self.c(['black', 'white', 'red', 'navy'])} and "
                       f"{self.c(['grey', 'green', 'silver'])}. Free shipping to {self.c(COUNTRIES)[0]}. {self.i(1, 5)}-year warranty. "
                       f"Rated {self.i(3, 4)}.{self.i(0, 9)} stars by {self.i(20, 5000)} customers.")
            user = self.c(["From this product listing, extract name, price, colors, warranty and rating as JSON.\n",
                           "Turn the listing into a JSON record (product, price_usd, colors[], warranty_years, rating):\n",
                           "scrape the key attributes from this listing into json\n\n"]) + listing
            return Sample("extract", user, self.i(35, 75))
        if v == 8:  # the schema says what to fill; the instruction is short
            props = self.r.sample(keys, self.i(2, 5))
            schema = {"type": "json_schema", "json_schema": {"name": "record", "schema": {
                "type": "object", "properties": {k: {"type": "string"} for k in props}, "required": props}}}
            text = " ".join(facts[k] for k in ["name", "city", "job", "company", "email"] if self.p(0.8))
            user = self.c([f"Fill in the schema from this text: {text}", text, f"Use this bio: {text}",
                           f"Here's the profile.\n{text}"])
            return Sample("extract", user, 4 + 8 * len(props), response_format=schema)
        if v == 9:  # list extraction: longer JSON arrays
            people = [(self.name(), self.c(JOBS)) for _ in range(self.i(3, 8))]
            text = " ".join(f"{n} joined as {j}." if k % 2 else f"Our new {j} is {n}." for k, (n, j) in enumerate(people))
            user = self.c([f"List every person and their role in the text below as a JSON array of objects.\n\n{text}",
                           f"Give me a JSON list of {{name, role}} pairs from: {text}",
                           f"{text}\n\nExtract all names with job titles. Format: JSON array."])
            return Sample("extract", user, 6 + 14 * len(people))
        if v == 10:
            dates = [f"{self.i(1, 28)} {self.c(['January', 'March', 'June', 'September', 'November'])} {self.i(2019, 2026)}" for _ in range(self.i(2, 6))]
            text = " ".join(f"{self.c(['The kickoff was on', 'A review is planned for', 'Payment is due', 'We shipped on'])} {d}." for d in dates)
            user = self.c([f"What are all the dates in this paragraph? Return them as a JSON list in ISO format.\n{text}",
                           f"Extract every date mentioned (as YYYY-MM-DD strings in a JSON array): {text}"])
            return Sample("extract", user, 4 + 7 * len(dates))
        text = " ".join(facts[k] for k in ["name", "city", "job", "company"] if self.p(0.8)) or facts["name"]
        sys = self.c(["You are an information extraction engine. Reply with JSON only.",
                      "Extract structured data from the user's text. Output a single JSON object with the fields name, city, job, company.",
                      "You convert free text into JSON records. Never add explanations."])
        return Sample("extract", text, self.i(25, 50), system=sys, response_format={"type": "json_object"} if self.p(0.5) else None)

    # --- classify -----------------------------------------------------------------------------------
    def review(self) -> tuple[str, str]:
        label = self.c(["positive", "negative", "neutral"])
        phrase = self.c({"positive": POS, "negative": NEG, "neutral": NEU}[label])
        prod = self.c(PRODUCTS)
        text = self.c([f"I bought the {prod} last month and {phrase}.", f"{phrase.capitalize()}. The {prod} is {self.c(['my first', 'a gift', 'a replacement'])}.",
                       f"{prod.capitalize()}: {phrase}!", f"Honestly? {phrase}. {self.c(['Shipping was fast.', 'Two stars for the box.', ''])}"])
        return text.strip(), label

    def classify(self) -> Sample:
        v = self.i(0, 9)
        explain = self.p(0.15)
        tokens = self.i(1, 4) if not explain else self.i(18, 55)
        tail = self.c([" Explain briefly.", " Give a one-sentence reason.", " Justify your answer in a sentence."]) if explain else self.c(["", "", " Answer with the label only.", " One word."])
        if v <= 2:
            text, _ = self.review()
            labels = "positive, negative, neutral"
            user = self.c([
                f"Review: {text}\nLabels: {labels}\nLabel:",
                f"Classify the sentiment of this review as {labels}: {text}",
                f"Is this review positive, negative or neutral?\n\n\"{text}\"",
                f"what's the sentiment here ({labels})? {text}",
                f"Label the following customer review with one of [{labels}].\n{text}",
            ]) + tail
            return Sample("classify", user, tokens, style="suite" if v == 0 else "natural")
        if v == 3:
            dept = self.c(list(TICKETS))
            ticket = self.c(TICKETS[dept])
            user = self.c([f"Ticket: {ticket}\nCategories: billing, technical, shipping, account\nCategory:",
                           f"Which department should handle this ticket? Options: billing, technical, shipping, account.\n\n{ticket}",
                           f"Route this support request to the right team (billing/technical/shipping/account): \"{ticket}\"",
                           f"Categorize: {ticket}. Choose one of billing, technical, shipping or account."]) + tail
            return Sample("classify", user, tokens, style="suite" if self.p(0.3) else "natural")
        if v == 4:
            spam = self.p(0.5)
            msg = (self.c(["CONGRATULATIONS!! You won a free {product}, click here to claim", "Earn $5000 a week from home, no experience needed",
                           "Your account is suspended, verify your password at this link"]) if spam else
                   self.c(["Hi {first}, are we still on for lunch Thursday?", "Attached is the agenda for the {company} meeting",
                           "Your order from {company} has shipped"]))
            user = self.c(["Is the following message spam? Answer spam or ham.\n", "spam or not spam: ", "Classify this email as spam or legitimate:\n"]) + self.fill(msg) + tail
            return Sample("classify", user, tokens)
        if v == 5:
            topic = self.c(list(HEADLINES))
            user = self.c([f"Tag this headline with a topic (politics, sports, business, tech, science): \"{self.c(HEADLINES[topic])}\"",
                           f"Headline: {self.c(HEADLINES[topic])}\nWhich section of the paper does it belong in? politics / sports / business / tech / science"]) + tail
            return Sample("classify", user, tokens)
        if v == 6:
            intent = self.c(list(INTENTS))
            utt = self.fill(self.c(INTENTS[intent]))
            user = self.c([f"What's the intent here - book_flight, cancel_booking, check_status or other? \"{utt}\"",
                           f"Intent classification.\nLabels: book_flight, cancel_booking, check_status, other\nUtterance: {utt}",
                           f"Map the user's message to one intent ({', '.join(INTENTS)}): {utt}"]) + tail
            return Sample("classify", user, tokens, response_format={"type": "json_schema", "json_schema": {"name": "intent", "schema": {
                "type": "object", "properties": {"intent": {"enum": list(INTENTS)}}}}} if self.p(0.2) else None)
        if v == 7:
            ticket = self.c(self.c(list(TICKETS.values())))
            user = self.c([f"Rate the urgency of this ticket as low, medium or high: {ticket}",
                           f"How urgent is this? (low/medium/high)\n{ticket}", f"Priority for \"{ticket}\" - P1, P2 or P3?"]) + tail
            return Sample("classify", user, tokens)
        if v == 8:
            fb = self.c(["the export to PDF cuts off the last page", "please add dark mode", "love the new dashboard, great job",
                         "it would be nice to have keyboard shortcuts", "the app freezes when I rotate my phone", "your support team was amazing"])
            user = self.c([f"Sort this feedback into bug, feature_request or praise: {fb}",
                           f"Is this a bug report, a feature request, or praise? \"{fb}\""]) + tail
            return Sample("classify", user, tokens)
        sys = self.c(["You label customer reviews. Answer with exactly one word: positive, negative or neutral.",
                      "You are a sentiment classifier. Output only the label (positive/negative/neutral).",
                      "Classify each support ticket into billing, technical, shipping or account. Reply with the category name only."])
        text = self.review()[0] if "ticket" not in sys else self.c(self.c(list(TICKETS.values())))
        return Sample("classify", text, self.i(1, 3), system=sys)

    # --- summarize ----------------------------------------------------------------------------------
    def summarize(self) -> Sample:
        v = self.i(0, 8)
        if v <= 2:
            company = self.c(COMPANIES)
            text = f"{company} held its annual review. " + self.facts(self.i(3, 7))
            user = self.c([f"Summarize in one line:\n{text}", f"{text}\n\nOne-line summary:", f"Give me a one-sentence summary of this: {text}",
                           f"tl;dr? {text}", f"Write a single-line summary of the following facts.\n{text}"]) if v else f"Summarize in one line.\n{text}"
            return Sample("summarize", user, self.i(14, 38), style="suite" if v == 0 else "natural")
        if v == 3:
            notes = "\n".join(f"- {self.fill(s)}" for s in self.r.sample(FILLER, self.i(5, 10)))
            n = self.i(2, 5)
            user = self.c([f"Give me the gist of these meeting notes in {n} bullet points:\n{notes}",
                           f"Summarize the notes below into {n} key takeaways.\n\n{notes}",
                           f"Can you condense these notes for people who missed the meeting?\n{notes}"])
            return Sample("summarize", user, 12 * n + self.i(0, 25))
        if v == 4:
            text = self.prose(self.i(4, 9)) + " " + self.facts(self.i(2, 5))
            user = self.c([f"Summarize this article in two sentences:\n\n{text}", f"Boil this down to a short paragraph: {text}",
                           f"What's the main point of this text?\n{text}", f"TL;DR please:\n{text}"])
            return Sample("summarize", user, self.i(30, 110))
        if v == 5:
            thread = "\n\n".join(f"From: {self.name()}\n{self.prose(self.i(1, 3))}" for _ in range(self.i(2, 5)))
            user = self.c([f"Summarise this email thread for my manager:\n\n{thread}", f"Catch me up on this thread in a few lines.\n{thread}",
                           f"{thread}\n\n---\nWhat did everyone agree on? Summarize briefly."])
            return Sample("summarize", user, self.i(40, 120))
        if v == 6:
            text = self.facts(self.i(4, 8))
            user = self.c([f"Write a headline that sums up: {text}", f"Give this report a one-line title: {text}"])
            return Sample("summarize", user, self.i(8, 20))
        if v == 7:
            text = self.prose(self.i(8, 14)) + " " + self.facts(self.i(4, 8))
            user = self.c([f"Please write an executive summary (one paragraph) of the following report.\n\n{text}",
                           f"Summarize the following for a newsletter blurb, about 80 words:\n{text}"])
            return Sample("summarize", user, self.i(80, 170))
        sys = self.c(["You write one-sentence summaries of whatever the user sends.", "Summarize the user's text in at most two sentences.",
                      "You are a summarization assistant. Be brief and factual."])
        return Sample("summarize", self.facts(self.i(3, 7)), self.i(16, 55), system=sys)

    # --- rewrite ------------------------------------------------------------------------------------
    def rewrite(self) -> Sample:
        long = self.p(0.22)
        text = self.prose(self.i(16, 28)) if long else self.prose(self.i(1, 6))
        n = approx_tokens(text)
        kind = self.c(["formal", "casual", "grammar", "concise", "translate", "plain", "friendly", "bullets", "passive", "professional"])
        if kind == "grammar":
            text = self.typos(text, k=max(2, n // 15))
        ask = {
            "formal": ["Rewrite this paragraph to sound more formal:", "Make this more professional and formal please", "Formalize the tone of:"],
            "casual": ["Rewrite this in a relaxed, casual tone:", "make it sound less stiff, more like a text to a friend:"],
            "grammar": ["Fix the grammar and spelling:", "Proofread this and correct the mistakes, keep my wording otherwise:", "correct the typos in"],
            "concise": ["Shorten this to about half the length:", "Make this more concise:", "Trim this down, it's too wordy:"],
            "translate": [f"Translate into {self.c(['French', 'Spanish', 'German', 'Portuguese', 'Italian'])}:",
                          f"Can you put this in {self.c(['French', 'Spanish', 'German', 'Japanese'])}?"],
            "plain": ["Rephrase in plain English that a 10-year-old could follow:", "Simplify the wording of this text:"],
            "friendly": ["Make this email friendlier:", "Rewrite to sound warmer and more polite:"],
            "bullets": ["Convert this text to bullet points:", "Turn this paragraph into a bulleted list:"],
            "passive": ["Rewrite the following in the passive voice:", "Change this to passive voice:"],
            "professional": ["Paraphrase the following so it fits a LinkedIn post:", "Reword this for a client-facing email:", "Paraphrase this:"],
        }[kind]
        factor = {"concise": (0.4, 0.6), "translate": (1.1, 1.3), "bullets": (0.8, 1.1), "casual": (0.8, 1.0)}.get(kind, (0.95, 1.2))
        tokens = int(n * self.r.uniform(*factor)) + self.i(2, 8)
        a = self.c(ask)
        user = self.c([f"{a}\n\n{text}", f"{a} \"{text}\"", f"{text}\n\n^ {a[0].lower() + a[1:].rstrip(':')}"])
        sys = None
        if self.p(0.12):
            sys, user = f"You are an editor. {a.rstrip(':')} whatever the user sends; return only the rewritten text.", text
        return Sample("rewrite", user, tokens, system=sys)

    # --- plan ---------------------------------------------------------------------------------------
    def plan(self) -> Sample:
        goal_t, needed = self.c(GOALS)
        goal = self.fill(goal_t)
        extra = self.r.sample([t for t in TOOLS if t not in needed], self.i(1, 4))
        names = needed + extra
        self.r.shuffle(names)
        tokens = 6 + sum(self.i(16, 30) for _ in needed)
        v = self.i(0, 6)
        if v <= 1:
            tl = "\n".join(f"- {TOOLS[t]}" for t in names)
            user = (f"Goal: {goal}\nTools:\n{tl}\nReturn the tool calls as a JSON list." if v == 0 else
                    self.c([f"You can use these tools:\n{tl}\n\nPlan the calls needed to {goal}. Respond with a JSON array of {{\"tool\", \"args\"}} objects.",
                            f"Tools available: {', '.join(names)}.\nTask: {goal}.\nList the function calls, in order, as JSON."]))
            return Sample("plan", user, tokens, style="suite" if v == 0 else "natural")
        if v <= 3:  # OpenAI tools parameter carries the tools; the user just asks
            user = self.c([f"{goal[0].upper()}{goal[1:]}.", f"Can you {goal}?", f"please {goal}", f"I want to {goal}. Which tools would you call, in what order?"])
            return Sample("plan", user, tokens, tools=self.tool_specs(names), system=self.c([None, "You are an agent. Plan tool calls before acting; output them as JSON."]))
        if v == 4:
            user = self.c([f"Which APIs would you call, in what order, to {goal}? Available: {', '.join(TOOLS[t] for t in names)}. JSON array only.",
                           f"Break down the steps to {goal} using the available functions ({', '.join(names)}). Return a JSON plan."])
            return Sample("plan", user, tokens, response_format={"type": "json_object"} if self.p(0.5) else None)
        if v == 5:
            proj = self.c(["migrate our database from MySQL to Postgres", "launch a newsletter for {company}", "move the team to a new office in {city}",
                           "set up CI for a small Python repo", "organize a hackathon for 50 people", "roll out SSO to all employees"])
            n = self.i(3, 7)
            user = self.c([f"Outline a plan with {n} numbered steps to {self.fill(proj)}. Keep each step to one line.",
                           f"Give me a short step-by-step plan ({n} steps max) to {self.fill(proj)}."])
            return Sample("plan", user, 10 + n * self.i(12, 20))
        sys = "You are an agent with access to: " + "; ".join(TOOLS[t] for t in names) + ". Reply with the list of calls as JSON."
        return Sample("plan", f"{goal[0].upper()}{goal[1:]}", tokens, system=sys)

    # --- short_qa -----------------------------------------------------------------------------------
    def short_qa(self) -> Sample:
        v = self.i(0, 10)
        if v == 0:
            country, _ = self.c(COUNTRIES)
            q, t = self.c([f"What is the capital of {country}?", f"capital of {country}?", f"which city is the capital of {country}",
                           f"What's {country}'s capital city?"]), self.i(3, 14)
        elif v == 1:
            book, _ = self.c(BOOKS)
            q, t = self.c([f"Who wrote {book}?", f"who is the author of {book}", f"{book} - who wrote it?"]), self.i(4, 16)
        elif v == 2:
            q, t = self.c([f"What does {self.c(ACRONYMS)} stand for?", f"{self.c(ACRONYMS)} meaning?", f"what's {self.c(ACRONYMS)} short for"]), self.i(4, 20)
        elif v == 3:
            small, big = self.c(UNITS)
            q, t = self.c([f"How many {small} are in a {big}?", f"how many {small} in one {big}", f"1 {big} = how many {small}?"]), self.i(3, 14)
        elif v == 4:
            ev, _ = self.c(EVENTS)
            q, t = self.c([f"When did {ev}?", f"What year did {ev}?", f"in which year did {ev}"]), self.i(3, 18)
        elif v == 5:
            term = self.c(TERMS)
            q, t = self.c([f"Define {term} in one sentence.", f"What is {term}?", f"Explain {term} briefly.", f"what's {term}, in a nutshell"]), self.i(18, 70)
        elif v == 6:
            el = self.c(ELEMENTS)
            animal, _ = self.c(ANIMALS)
            q, t = self.c([f"What is the chemical symbol for {el}?", f"How many legs does a {animal} have?", f"Is {el} a metal?",
                           f"what is the boiling point of water in fahrenheit", "How far is the Moon from Earth?"]), self.i(3, 22)
        elif v == 7:
            a, b = self.i(2, 99), self.i(2, 99)
            q, t = self.c([f"What's {a} times {b}? Just the answer.", f"{a} + {b} = ?", f"quick: {a}*{b}", f"What is {a} divided by {b}, roughly?"]), self.i(2, 12)
        elif v == 8:
            x, y = self.c(PAIRS)
            q, t = self.c([f"What's the difference between {x} and {y}?", f"{x} vs {y} - what's the difference, briefly?"]), self.i(35, 95)
        elif v == 9:
            q, t = self.fill(self.c(["What time zone is {city} in?", "What language do they speak in {city}?", "Who founded {company}?",
                                     "Is {city} bigger than {city2}?", "What currency is used in {city}?", "How tall is Mount Everest?"])), self.i(4, 30)
        else:
            sys = self.c(["You answer trivia questions with a single short phrase.", "Answer factual questions in one sentence."])
            country, _ = self.c(COUNTRIES)
            return Sample("short_qa", self.c([f"capital of {country}", f"{self.c(BOOKS)[0]} author", f"{self.c(ACRONYMS)}?"]), self.i(2, 12), system=sys)
        return Sample("short_qa", q, t)

    # --- reason -------------------------------------------------------------------------------------
    def reason(self) -> Sample:
        v = self.i(0, 9)
        if v <= 3:  # add 8-25 small numbers with a running total per line
            n = self.i(8, 25)
            nums = [self.i(1, 99) for _ in range(n)]
            per = 20.0 + sum(len(str(x)) for x in nums) / n  # "running total: 123 + 45 = 168" with digit tokens
            tokens = int(20 + n * per + self.i(-10, 10))
            listed = ", ".join(map(str, nums))
            user = [f"Add these numbers step by step, writing the running total on each line: {listed}",
                    f"Compute the sum of the following numbers. Show the running total after each addition.\n" + "\n".join(map(str, nums)),
                    f"sum these up and show your work line by line: {listed}",
                    f"What do {listed} add up to? Go one number at a time and keep a running total.",
                    f"Numbers: {' '.join(map(str, nums))}\nAdd them step by step, one running total per line."][self.i(0, 4) if v else 0]
            return Sample("reason", user, min(600, max(150, tokens)), style="suite" if v == 0 else "natural")
        if v == 4:
            a, b, c = self.i(40, 120), self.i(2, 9), self.i(5, 40)
            user = self.c([
                f"A train leaves {self.c(CITIES)} at {self.i(1, 11)}am travelling at {a} km/h. Another leaves {self.c(CITIES)}, {a * b} km away, at the same time going {a + c} km/h towards it. When do they meet? Show your reasoning.",
                f"A shop sells pens at ${b}.{self.i(10, 99)} each. How much do {c} pens cost with a {self.i(5, 30)}% discount and {self.i(5, 20)}% tax? Think step by step.",
                f"{self.c(FIRST)} is {b} times as old as {self.c(FIRST)}. In {c} years the sum of their ages will be {a}. How old are they now? Explain each step.",
                f"If {b} workers build a wall in {c} days, how long do {b + self.i(1, 5)} workers need? Walk me through it.",
                f"What's {self.i(5, 40)}% of {self.i(100, 9999)}, and what's that as a fraction of {self.i(100, 999)}? Show the working.",
            ])
            return Sample("reason", user, self.i(120, 340))
        if v == 5:
            user = self.c([
                "If all bloops are razzies and all razzies are lazzies, are all bloops definitely lazzies? Explain step by step.",
                f"{self.c(FIRST)}, {self.c(FIRST)} and {self.c(FIRST)} finished a race. The first wasn't last, the second beat the third, and the third wasn't first. What's the order? Reason it out.",
                "On an island, knights always tell the truth and knaves always lie. A says 'B is a knave.' B says 'A and I are the same kind.' What are A and B? Show your reasoning.",
                "Five people sit in a row. Ana is left of Ben, Cleo is in the middle, Dev is at an end and Eli is next to Dev. Who sits where? Work through the cases.",
                "You have 12 coins, one is fake and lighter. With a balance scale, how do you find it in 3 weighings? Explain the logic carefully.",
                "A bat and a ball cost $1.10 together; the bat costs $1.00 more than the ball. How much is the ball? Reason carefully before answering.",
            ])
            return Sample("reason", user, self.i(180, 480))
        if v == 6:
            a, b, c = self.i(2, 12), self.i(1, 40), self.i(20, 200)
            user = self.c([f"Solve for x: {a}x + {b} = {c}. Show your work.", f"solve {a}x^2 - {b}x = {c} step by step",
                           f"Find the intersection of y = {a}x + {b} and y = {c} - x. Show every step.",
                           f"Compute the compound interest on ${c * 100} at {a}% per year for {self.i(2, 10)} years, step by step."])
            return Sample("reason", user, self.i(110, 320))
        if v == 7:
            user = self.c(["Prove that the sum of two even numbers is even.", "Prove that there are infinitely many primes.",
                           "Show that the square root of 2 is irrational.", "Prove by induction that 1 + 2 + ... + n = n(n+1)/2.",
                           "Why is the sum of the angles of a triangle 180 degrees? Give a proof."])
            return Sample("reason", user, self.i(160, 420))
        if v == 8:
            d1, d2 = self.i(2, 6), self.i(7, 12)
            user = self.c([f"What's the probability of rolling a sum of {d2} with two dice? Explain how you count.",
                           f"I draw {d1} cards from a deck without replacement. What's the chance they're all hearts? Show the calculation.",
                           f"A test is {90 + d1}% accurate and the disease affects 1 in {d2 * 100} people. If I test positive, how likely am I to have it? Work it out step by step."])
            return Sample("reason", user, self.i(150, 380))
        sys = self.c(["You are a math tutor. Always show your reasoning step by step before the final answer.",
                      "Think carefully and explain each step. Put the final answer on the last line."])
        a, b = self.i(12, 99), self.i(12, 99)
        return Sample("reason", self.c([f"{a} * {b} + {b} * {a // 2}?", f"is {a * b + 1} prime?", f"what is {a}% of {b * 37}?"]), self.i(110, 300), system=sys)

    # --- code ---------------------------------------------------------------------------------------
    def code(self) -> Sample:
        v = self.i(0, 9)
        fn, args, spec = self.c(CODE_SPECS)
        if v <= 2:
            user = (f"Write a Python function `{fn}({args})` that {spec}." if v == 0 else
                    self.c([f"write a python function that {spec}", f"Implement {fn}({args}) in Python: it {spec}.",
                            f"I need a small Python helper that {spec}. Type hints please.", f"def {fn}({args}): ...  # {spec} - fill this in"]))
            return Sample("code", user, self.i(30, 110), style="suite" if v == 0 else "natural")
        if v == 3:
            lang = self.c(LANGS)
            user = self.c([f"Write a {lang} function that {spec}.", f"How would you write a function in {lang} that {spec}?", f"{lang}: a function that {spec}, please"])
            return Sample("code", user, self.i(50, 160))
        if v == 4:
            user = self.c([f"Write a SQL query that returns the top {self.i(3, 10)} customers by revenue from the orders table.",
                           "SQL to find duplicate emails in the users table?", "Write a query joining orders and customers to get total spend per country.",
                           "Write a bash one-liner that finds all .log files over 100MB and deletes them.", "bash script to back up /var/www every night with cron",
                           "Give me a regex that matches US phone numbers like (555) 123-4567.", "git command to undo my last commit but keep the changes?"])
            return Sample("code", user, self.i(25, 120))
        if v == 5:
            snip = self.c(SNIPPETS)
            user = self.c([f"Why does this give {self.c(ERRORS)}?\n```\n{snip}\n```", f"Fix this bug:\n```python\n{snip}\n```",
                           f"this code is broken, can you fix it\n\n{snip}", f"Find the bug:\n```\n{snip}\n```\nand show the corrected code."])
            return Sample("code", user, self.i(60, 220))
        if v == 6:
            snip = self.c(SNIPPETS)
            user = self.c([f"Refactor this to be more readable:\n```\n{snip}\n```", f"Write pytest unit tests for this code:\n```\n{snip}\n```",
                           f"Add type hints and a docstring:\n```python\n{snip}\n```", f"Convert this to idiomatic modern code:\n{snip}"])
            return Sample("code", user, self.i(90, 300))
        if v == 7:
            user = self.c(["how do i reverse a list in python", "How do I read a CSV file with pandas?", "what's the python syntax for a dict comprehension",
                           "How do I make an HTTP request in JavaScript with fetch?", "how to sort a list of dicts by a key in python",
                           "How can I run two async functions concurrently in Python?", "How do I write a class with a __repr__?"])
            return Sample("code", user, self.i(40, 150))
        if v == 8:
            user = self.c([f"Implement a binary search in {self.c(LANGS)}.", "Write a class for a LRU cache with get and put in O(1).",
                           "Implement a linked list with insert, delete and search.", "Write a function to detect a cycle in a directed graph.",
                           f"Write a small Flask app with one endpoint that returns {self.c(['the time', 'a random quote', 'the server status'])} as JSON."])
            return Sample("code", user, self.i(110, 340))
        sys = self.c(["You are a senior Python engineer. Reply with code only, no explanations.", "You are a coding assistant. Answer with a single code block."])
        return Sample("code", self.c([f"{spec}", f"a function {fn}({args}) that {spec}", f"func that {spec}"]), self.i(30, 120), system=sys)

    # --- write --------------------------------------------------------------------------------------
    def write(self) -> Sample:
        v = self.i(0, 9)
        if v <= 1:  # long templated stories/reports (the embedded suite's format when v == 0)
            name, job, city, company = self.name(), self.c(JOBS), self.c(CITIES), self.c(COMPANIES)
            user = self.c([
                f"Write a story about {name}, a {job} from {city}. Include their morning, a problem at work, and how it ends. Make it at least {self.i(3, 6)} paragraphs.",
                f"Write a report about {company} with the sections Overview, Revenue, Costs, Risks and Outlook. Use the facts: {self.facts(self.i(2, 4))}",
                f"Write a quarterly report for {company} covering sales in {city}, hiring, and next steps.",
            ])
            return Sample("write", user, self.i(300, 700), style="suite" if v == 0 else "natural")
        if v == 2:
            topic, words = self.c(TOPICS), self.c([300, 400, 500, 600, 800])
            user = self.c([f"Write a {words}-word essay on {topic}.", f"Essay: {topic}. About {words} words, with an intro and a conclusion.",
                           f"I need an essay discussing {topic} for my class, roughly {words} words.", f"write me an argumentative essay about {topic}"])
            return Sample("write", user, int(words * self.r.uniform(1.2, 1.45)))
        if v == 3:
            user = self.c([f"Write a short story about a {self.c(JOBS)} who {self.c(['finds a map in an old book', 'can hear plants talk', 'wakes up in 1850', 'gets stuck in an elevator with a celebrity'])}.",
                           f"Tell me a bedtime story about a {self.c(['dragon', 'lighthouse keeper', 'robot', 'fox', 'little cloud'])}.",
                           f"Write a sci-fi story set in {self.c(CITIES)} in the year {self.i(2100, 3000)}."])
            return Sample("write", user, self.i(320, 850))
        if v == 4:
            user = self.fill(self.c(["Draft an email to my landlord about the broken heater; it's been two weeks.",
                                     "Write an email to {first} declining the job offer politely.", "Write a follow-up email after my interview at {company}.",
                                     "Compose an email to the team announcing that {first} is joining as our new {product} lead.",
                                     "Write a complaint letter to {company} about a delayed refund.", "email to my professor asking for an extension, sound sincere"]))
            return Sample("write", user, self.i(130, 320))
        if v == 5:
            user = self.fill(self.c(["Write a cover letter for a {job} position at {company}.", "Write a blog post about {topic} for beginners.",
                                     "Write a wedding toast for my sister and her husband.", "Write a product description page for our new {product}, with features and FAQ.",
                                     "Write a speech for the opening of the new library in {city}.", "write a LinkedIn article on lessons from {topic}"]).replace("{job}", self.c(JOBS)).replace("{topic}", self.c(TOPICS)))
            return Sample("write", user, self.i(280, 700))
        if v == 6:
            user = self.c([f"Write a poem about {self.c(TOPICS)}.", f"Write a sonnet about {self.c(CITIES)} in the rain.", f"a haiku sequence (five haiku) about {self.c(['autumn', 'the sea', 'coffee', 'Mondays'])}",
                           f"Write song lyrics about {self.c(['leaving home', 'summer love', 'a road trip'])}, with two verses and a chorus."])
            return Sample("write", user, self.i(90, 260))
        if v <= 8:  # role play
            char = self.c(["a medieval innkeeper", "a grumpy pirate captain", "a detective in 1920s Chicago", "a friendly tour guide in Rome",
                           "Sherlock Holmes", "a customer at a bakery who can't decide", "a job interviewer at a tech startup"])
            sys = f"You are {char}. Stay in character and answer in vivid detail."
            user = self.c(["*walks in, soaked from the rain* Got a room for the night?", "Tell me about the strangest thing that happened to you this week.",
                           "So what brings you here today?", "Describe your surroundings to me.", "I have a mystery for you. My cat vanished from a locked room."])
            if self.p(0.5):
                return Sample("write", user, self.i(120, 380), system=sys)
            return Sample("write", f"Let's role-play: you are {char} and I'm a traveler. {user}", self.i(120, 380))
        sys = self.c(["You are a creative writing assistant. Write rich, detailed prose.", "You write long-form marketing copy."])
        return Sample("write", self.c([f"Something about {self.c(TOPICS)}, long form.", f"A story set in {self.c(CITIES)}.", f"Landing page copy for a {self.c(PRODUCTS)} brand."]), self.i(300, 700), system=sys)

    # --- shared payloads: the same kinds of text under every task's instructions ------------------
    def payload(self) -> str:
        """A text to work on, from a pool shared by all task types, so that the words of the
        instruction - not the payload - tell the task apart."""
        k = self.i(0, 13)
        name, city, company, prod = self.name(), self.c(CITIES), self.c(COMPANIES), self.c(PRODUCTS)
        first = name.split()[0]
        if k == 0:
            return f"{name} is {self.i(20, 70)} years old and works as a {self.c(JOBS)} at {company} in {city}."
        if k == 1:
            return f"{prod.title()}, ${self.i(10, 900)}.{self.i(10, 99)}, {self.c(['black', 'white', 'blue'])}, {self.i(1, 3)}-year warranty, ships from {city}."
        if k == 2:
            return f"Hi {first}, {self.prose(self.i(1, 3))} Best, {self.c(FIRST)}"
        if k == 3:
            return "; ".join(self.fill(s).rstrip(".") for s in self.r.sample(FILLER, self.i(2, 5))) + "."
        if k == 4:
            return self.review()[0]
        if k == 5:
            return self.c(self.c(list(TICKETS.values()))).capitalize() + "."
        if k == 6:
            return self.c([f"Your flight {self.c(['LH', 'BA', 'AF', 'UA'])}{self.i(100, 999)} departs {self.i(6, 22)}:{self.i(10, 59)} from gate {self.c('ABCD')}{self.i(1, 40)}.",
                           f"Your code is {self.i(100000, 999999)}. It expires in {self.i(5, 15)} minutes.",
                           f"Package {self.i(10**8, 10**9)} will arrive {self.c(['today', 'tomorrow', 'on Friday'])} between {self.i(8, 12)} and {self.i(13, 18)}."])
        if k == 7:
            return f"{self.c(['FreshMart', 'Corner Cafe', 'BuildIt', 'PageTurner Books'])} {self.i(1, 28):02d}/{self.i(1, 12):02d}/2024 {self.i(1, 6)} items Total {self.i(3, 250)}.{self.i(10, 99)}"
        if k == 8:
            return f"{self.i(1, 999)} {self.c(['Baker', 'Elm', 'Harbor', 'Station'])} Street, {city} {self.i(10000, 99999)}, {self.c(COUNTRIES)[0]}"
        if k == 9:
            return (f"We propose a {self.c(['simple', 'new', 'scalable'])} method for {self.c(['faster training', 'cheaper inference', 'better retrieval'])} "
                    f"and show a {self.i(2, 9)}x speedup with {self.c(['no', 'little', 'a small'])} loss in accuracy on {self.i(3, 12)} benchmarks.")
        if k == 10:
            a, b = self.c(FIRST), self.c(FIRST)
            return " ".join(f"{x}: {y}" for x, y in zip([a, b, a, b], self.r.sample(["deploy failed", "rollback done", "root cause was a missing env var",
                            "adding a check to CI", "who is on call?", "I'll write the postmortem", "customers noticed at 9am", "fixed now"], 4)))
        if k == 11:
            return self.c(["The hero leaves his village, fights a dragon, loses his sword and returns home wiser.",
                           f"A {self.c(JOBS)} in {city} finds an old letter and tracks down its author.",
                           "Two rival bakers are forced to share a kitchen and end up opening a shop together."])
        if k == 12:
            return f"{self.c(JOBS).title()} wanted at {company}, {city} ({self.c(['remote', 'hybrid', 'on-site'])}). Salary {self.i(40, 120)}-{self.i(121, 180)}k."
        return self.prose(self.i(2, 5))

    def mixed(self, task: str) -> Sample:
        """An instruction from a wide set of phrasings around a shared payload."""
        text = self.payload()
        n = approx_tokens(text)
        if task == "extract":
            f = self.r.sample(["name", "date", "total", "city", "price", "email", "company", "title", "time", "location", "amount", "phone", "age", "salary"], self.i(1, 4))
            fl = ", ".join(f)
            ins = self.c([f"Extract the {fl} as JSON", f"Pull out the {fl} from this", f"Get me the {fl}. JSON please", f"Identify the {fl} and output a JSON object",
                          f"Return JSON with fields {fl} for this", f"Parse this into structured fields ({fl})", f"Grab the {fl} from the text below as a json object",
                          f"What are the {fl} here? Reply with JSON", f"Fill in a JSON record ({fl}) from", f"find the {fl} and give them as key/value pairs",
                          f"Capture {fl} from this message into JSON", "List every number in this text as a JSON array", "Extract all the entities (people, places, organizations) as JSON",
                          f"Convert this into a JSON object with keys {fl}"])
            tokens = 4 + 8 * len(f) if "every" not in ins and "entities" not in ins else self.i(20, 90)
        elif task == "classify":
            labels = self.c([["positive", "negative", "neutral"], ["urgent", "not urgent"], ["spam", "not spam"], ["question", "complaint", "praise"],
                             ["billing", "technical", "other"], ["personal", "work", "promotion"], ["yes", "no"], ["english", "french", "german", "spanish"]])
            ls = ", ".join(labels)
            ins = self.c([f"Classify this as one of: {ls}", f"Is this {' or '.join(labels)}?", f"Label the text ({ls})", f"Categorize the following - {ls}",
                           f"Which category fits best: {ls}?", f"Tag this message with one label from [{ls}]", f"Pick one: {ls}. Text",
                           f"Determine whether this is {' or '.join(labels)}", f"Triage this into {ls}", f"Sentiment? ({ls})", f"Route this to one of {ls}"])
            tokens = self.i(1, 4)
        elif task == "summarize":
            ins, tokens = self.c([("Summarize this in one sentence", (14, 35)), ("tl;dr", (12, 35)), ("Sum up the key points", (25, 70)), ("Give me the gist", (15, 45)),
                                  ("Recap this briefly", (20, 55)), ("Condense this into a single line", (12, 30)), ("What's this about, in a nutshell?", (15, 40)),
                                  ("Summarise in two lines", (25, 55)), ("Write a brief overview of", (30, 80)), ("Give me the main takeaways", (25, 75)),
                                  ("Summarize the following in three bullet points", (30, 60)), ("Boil this down", (12, 40))])
            tokens = self.i(*tokens)
        elif task == "rewrite":
            ins, fac = self.c([("Rewrite this more politely", (1.0, 1.3)), ("Make this sound more professional", (1.0, 1.3)), ("Rephrase", (0.9, 1.1)),
                               ("Paraphrase this", (0.9, 1.1)), ("Reword the following", (0.9, 1.1)), (f"Translate to {self.c(['Spanish', 'French', 'German', 'Italian', 'Dutch'])}", (1.1, 1.4)),
                               ("Polish this text", (0.95, 1.15)), ("Proofread and correct", (0.95, 1.05)), ("Simplify this for a child", (0.9, 1.3)),
                               ("Make it punchier", (0.6, 0.9)), ("Tone this down", (0.9, 1.1)), ("Turn this into a formal complaint", (1.1, 1.6)),
                               ("Edit this for clarity", (0.9, 1.1)), ("Make this shorter", (0.4, 0.7)), ("Rewrite in the first person", (0.95, 1.1))])
            tokens = int(n * self.r.uniform(*fac)) + self.i(2, 6)
        else:
            raise ValueError(task)
        user = self.c([f"{ins}: {text}", f"{ins}.\n\n{text}", f"{text}\n\n{ins}.", f"{ins}:\n\"{text}\"", f"{ins}\n---\n{text}"])
        return Sample(task, user, tokens)

    def extra(self, task: str) -> Sample:
        """More phrasings for the task types whose input is not a payload."""
        if task == "short_qa":
            q = self.c(["Who painted {art}?", "what is the tallest mountain in {continent}", "How many players are on a {sport} team?", "Which planet is {planet}?",
                        "What is the plural of {word}?", "What's the speed of {thing}?", "When was {tech} first released?", "Who invented {inv}?",
                        "What is the largest {big} in the world?", "how do you say {phrase} in {lang}", "What's the population of {city}, roughly?",
                        "Which ocean is the {adj}?", "How old is the universe?", "what's the main ingredient in {dish}"])
            q = q.format(art=self.c(["the Mona Lisa", "Starry Night", "Guernica", "The Scream"]), continent=self.c(["Africa", "Europe", "South America", "Asia"]),
                         sport=self.c(["soccer", "basketball", "rugby", "volleyball"]), planet=self.c(["closest to the sun", "the largest", "known as the red planet"]),
                         word=self.c(["cactus", "mouse", "octopus", "criterion"]), thing=self.c(["light", "sound"]), tech=self.c(["Python", "Linux", "the iPhone", "Windows"]),
                         inv=self.c(["the telephone", "the light bulb", "the World Wide Web", "penicillin"]), big=self.c(["desert", "country", "lake", "animal"]),
                         phrase=self.c(["thank you", "good morning", "cheers"]), lang=self.c(["Japanese", "Italian", "Swahili"]), city=self.c(CITIES),
                         adj=self.c(["largest", "deepest", "smallest"]), dish=self.c(["guacamole", "hummus", "pesto", "risotto"]))
            return Sample("short_qa", q, self.i(3, 30))
        if task == "reason":
            a, b, c = self.i(3, 40), self.i(2, 12), self.i(50, 500)
            q = self.c([f"A farmer has {a + b} sheep and all but {b} run away. How many are left? Explain your reasoning.",
                        f"If it takes {b} machines {b} minutes to make {b} widgets, how long do {c} machines take to make {c} widgets? Think it through.",
                        f"Three friends split a bill of ${c} with a {self.i(10, 20)}% tip. How much does each pay? Show the math.",
                        f"Is {c * 2 + 1} a prime number? Explain how you check.", f"Solve the system {b}x + y = {c} and x - y = {a}. Show each step.",
                        f"What is the probability of getting at least one six in {b} rolls of a die? Work it out.",
                        f"A recipe for {b} people needs {a} grams of flour. How much for {c // 10} people? Walk through it.",
                        f"If I save ${a} a week, how many weeks until I have ${c * 10}? Explain.",
                        "All labels on three boxes (apples, oranges, mixed) are wrong. You may take one fruit from one box. How do you relabel them? Reason carefully.",
                        f"Which is bigger, {b}^{a % 7 + 2} or {a}^{b % 4 + 2}? Justify without a calculator."])
            return Sample("reason", q, self.i(120, 380))
        if task == "code":
            q = self.c([f"Write a {self.c(LANGS)} function to {self.c(['debounce another function', 'check if a number is even', 'parse a CSV line', 'reverse a string', 'deep copy an object'])}.",
                        f"How do I {self.c(['merge two dictionaries', 'read a file line by line', 'remove duplicates from a list', 'format a date', 'make a GET request'])} in {self.c(LANGS)}?",
                        "Write a SQL query to get the second highest salary from an employees table.", f"Write a Go HTTP server that returns {self.c(['hello world', 'the time', 'JSON'])}.",
                        f"Create a Python class for a {self.c(['bank account with deposit and withdraw', 'stack with push and pop', 'shopping cart', 'temperature sensor'])}.",
                        "Write a regex to validate a hex color code like #a3f or #ff00aa.", f"Fix this: {self.c(['def f(x): return x +', 'for i in range(10) print(i)', 'if x = 3: pass'])}",
                        f"Write a Dockerfile for a {self.c(['Flask', 'Node', 'Go'])} app.", "Write a unit test for a function that adds two numbers.",
                        f"Implement {self.c(['quicksort', 'a trie', 'Dijkstra', 'a rate limiter'])} in {self.c(LANGS)}."])
            return Sample("code", q, self.i(40, 260))
        if task == "write":
            q = self.c([f"Write a {self.c([300, 500, 800])} word blog post about {self.c(['the benefits of morning walks', 'saving money', 'learning to cook', 'working from cafes'])}.",
                        f"Write a short story about a {self.c(['cat', 'dog', 'robot', 'ghost'])} who becomes {self.c(['mayor of a small town', 'a chef', 'famous overnight'])}.",
                        f"Draft an email to my team announcing {self.c(['the office move', 'a new hire', 'the holiday schedule', 'our quarterly results'])}.",
                        f"Write a poem about {self.c(['the ocean at night', 'first snow', 'an old friend', 'city lights'])}.",
                        f"Pretend you are {self.c(['a pirate', 'a knight', 'an astronaut', 'a wizard'])} and tell me about your greatest adventure.",
                        f"Write a cover letter for a {self.c(['junior accountant', 'barista', 'nurse', 'software intern'])} role.",
                        f"Write an essay on {self.c(['the impact of the internet on democracy', 'why history matters', 'the value of boredom'])}.",
                        f"Write a product description for a {self.c(['bamboo toothbrush', 'smart lamp', 'travel mug'])}, about 200 words.",
                        f"Write a speech for {self.c(['my best friend’s wedding', 'a graduation', 'a retirement party'])}.",
                        f"Compose a letter to {self.c(['my future self', 'my grandmother', 'the city council'])}."])
            return Sample("write", q, self.i(200, 800))
        raise ValueError(task)

    # --- noise and chat structure -------------------------------------------------------------------
    def typos(self, text: str, k: int) -> str:
        words = text.split(" ")
        for _ in range(k):
            j = self.i(0, len(words) - 1)
            w = words[j]
            if len(w) < 4:
                continue
            p = self.i(1, len(w) - 2)
            words[j] = self.c([w[:p] + w[p + 1] + w[p] + w[p + 2 :], w[:p] + w[p + 1 :], w[:p] + w[p] + w[p:]])
        return " ".join(words)

    def noise(self, text: str) -> str:
        if self.p(0.12):
            text = self.typos(text, self.i(1, 3))
        if self.p(0.15):
            text = self.fill(self.c(PREFIXES)) + text[0].lower() + text[1:]
        if self.p(0.15):
            text = text + self.c(SUFFIXES)
        if self.p(0.08):
            text = text.lower()
        elif self.p(0.01):
            text = text.upper()
        if self.p(0.05):
            text = "\n" + text.replace(". ", ".  ") + "\n"
        return text

    def request(self, task: str) -> dict:
        if task in ("extract", "classify", "summarize", "rewrite") and self.p(0.5):
            s = self.mixed(task)
        elif task in ("short_qa", "reason", "code", "write") and self.p(0.3):
            s = self.extra(task)
        else:
            s: Sample = getattr(self, task)()
        user = self.noise(s.user)
        messages: list[dict] = []
        system = s.system or (self.fill(self.c(GENERIC_SYSTEMS)) if self.p(0.3) else None)
        if system:
            messages.append({"role": "system", "content": system})
        if self.p(0.25):  # earlier turns: pleasantries or an unrelated earlier question
            if self.p(0.5):
                u, a = self.c(PLEASANTRIES)
            else:
                other = self.short_qa()
                u, a = other.user, "Sure - " + self.c(["here you go.", "done.", "that's it.", "hope that helps."])
            messages += [{"role": "user", "content": u}, {"role": "assistant", "content": a}]
        messages.append({"role": "user", "content": user})
        rec: dict = {"messages": messages}
        tokens = s.tokens
        if self.p(0.3):
            rec["max_tokens"] = self.c([64, 128, 256, 512, 1024, 2048, 4096])
            tokens = min(tokens, rec["max_tokens"])
        if s.response_format is not None:
            rec["response_format"] = s.response_format
        tools = s.tools or (self.tool_specs(self.r.sample(list(TOOLS), 2)) if self.p(0.04) else None)
        if tools:
            rec["tools"] = tools
        if self.p(0.1):
            rec["stop"] = self.c([["\n\n"], ["###"], ["</answer>"], ["User:", "Human:"]])
        rec.update(task=s.task, output_tokens=int(tokens), style=s.style)
        return rec


def generate(n: int, seed: int = 20260) -> list[dict]:
    """`n` labeled requests, tasks in equal shares, duplicates (same messages) removed."""
    from policies.schema import TASKS

    gen = Gen(seed)
    policy = labeling_policy()
    seen: set[str] = set()
    out: list[dict] = []
    k = 0
    while len(out) < n:
        task = TASKS[k % len(TASKS)]
        k += 1
        rec = gen.request(task)
        key = json.dumps(rec["messages"], sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        rec["mode"] = policy.route_for(rec["task"], rec["output_tokens"])[0]
        out.append(rec)
    return out


def labeling_policy():
    """The policy the `mode` labels follow: the schema's product defaults (short structured jobs on
    block, one canvas at most), so the labels do not move with one checkpoint's measurements."""
    from policies.schema import Policy

    return Policy()


def suite_records(n_per_family: int, split: str, seed: int = 0) -> list[dict]:
    """Requests of the embedded model's own task suite (`engines.training.tasks`, one split), labeled with
    their family as task and the reference answer's length in the shipped checkpoint's tokenizer.
    The synthetic suite-style prompts above only resemble them; these are the prompts the model
    was trained on (train split) and is benchmarked on (test split)."""
    from transformers import AutoTokenizer

    from engines.training.tasks import generate_suite

    tokenizer = AutoTokenizer.from_pretrained(SHIPPED_CHECKPOINT)
    policy = labeling_policy()
    out = []
    for item in generate_suite(n_per_family, split=split, seed=seed):
        tokens = item.count_tokens(tokenizer) + 1  # the answer and its end-of-turn token
        out.append({"messages": item.messages, "task": item.family, "output_tokens": tokens, "style": "task_suite",
                    "mode": policy.route_for(item.family, tokens)[0]})
    return out


def build(n: int = 4000, test_share: float = 0.25, seed: int = 20260, out_dir: Path = DATA_DIR,
          suite_per_family: tuple[int, int] = (60, 20)) -> tuple[Path, Path]:
    """Write the train and held-out files; returns their paths. Each gets `suite_per_family` task-suite
    requests per family from the suite's own train / test split (no prompt in both)."""
    recs = generate(n, seed)
    random.Random(seed + 1).shuffle(recs)
    n_test = int(len(recs) * test_share)
    test_recs = recs[:n_test] + suite_records(suite_per_family[1], "test", seed=seed)
    train_recs = recs[n_test:] + suite_records(suite_per_family[0], "train", seed=seed)
    random.Random(seed + 2).shuffle(train_recs)
    random.Random(seed + 3).shuffle(test_recs)
    for j, rec in enumerate(test_recs + train_recs):
        rec["id"] = f"r{j:05d}"
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    train, test = out_dir / TRAIN_PATH.name, out_dir / TEST_PATH.name
    for path, part in ((test, test_recs), (train, train_recs)):
        with open(path, "w") as fh:
            for rec in part:
                fh.write(json.dumps({"id": rec.pop("id"), **rec}, ensure_ascii=False) + "\n")
    return train, test


def load_jsonl(path: str | Path) -> list[dict]:
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="write the routing data set (train + held-out JSONL)")
    ap.add_argument("--n", type=int, default=4000, help="total requests before the split")
    ap.add_argument("--seed", type=int, default=20260)
    ap.add_argument("--out", type=Path, default=DATA_DIR)
    args = ap.parse_args(argv)
    train, test = build(args.n, seed=args.seed, out_dir=args.out)
    print(f"wrote {train} and {test}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
