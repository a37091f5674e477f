"""Open-vocabulary task families: "schema" (fill a JSON schema from a message), "toolcall" (call
one of several made-up tools) and "label" (pick one label of a set, under an enum schema).

Every value (names, companies, streets, places, codes, amounts, dates, times, emails, phones) is
built from syllables and digits, so the space is effectively unbounded and train, val and test
share almost no value: a model scores only by copying values from the prompt, not by remembering
a word list. The schema (or tool definition) fixes the keys and their order, the text fixes the
values, so each answer is a pure function of its prompt. Values stay short and ASCII.
"""

from __future__ import annotations

import json
import random

from engines.skeleton import schema_instruction
from lab.model.items import TaskItem, parse_tool_calls, tool_call_text

# --------------------------------------------------------------------------------------------
# open values

_ONSETS = ("", "") + tuple("b br c ch d dr f g gr h j k l m n p pr qu r s st t tr v w z".split())
_VOWELS = tuple("a e i o u a e i o ai ea".split())
_CODAS = ("",) * 6 + tuple("n l r s k m x nd".split())
_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ"  # no I or O: codes read unambiguously


def _word(rng: random.Random, syllables: int = 2) -> str:
    return "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables))


def _digits(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789") for _ in range(n))


def _code(rng: random.Random, prefix: str = "") -> str:
    prefix = prefix or "".join(rng.choice(_LETTERS) for _ in range(2))
    r = rng.random()
    return f"{prefix}-{_digits(rng, 5)}" if r < 0.5 else f"{prefix}-{_digits(rng, 4)}-{rng.choice(_LETTERS)}" if r < 0.8 else f"{prefix}{_digits(rng, 6)}"


_CENTS = tuple(c for c in range(1, 100) if c % 10)  # never ending in 0: json.dumps writes exactly the two decimals the text shows
def _email(rng: random.Random) -> str:
    first, last = _word(rng), _word(rng, rng.choice((1, 2)))
    local = rng.choice([f"{first[0]}.{last}", f"{first}.{last}", f"{first}{_digits(rng, 2)}", f"{first}_{last}"])
    return f"{local}@{_word(rng)}.{rng.choice(['io', 'com', 'net', 'org', 'co'])}"


_ENUMS = {
    "priority": ("low", "medium", "high", "urgent", "critical"), "status": ("open", "pending", "resolved", "closed", "on_hold"),
    "channel": ("email", "phone", "chat", "web", "store"), "payment": ("card", "cash", "transfer", "paypal", "invoice"),
    "cabin": ("economy", "premium", "business", "first"), "room": ("single", "double", "twin", "suite", "family"),
    "currency": ("USD", "EUR", "GBP", "JPY", "CHF", "SEK", "CAD"), "department": ("sales", "billing", "support", "legal", "hr"),
    "format": ("pdf", "csv", "xlsx", "json"), "frequency": ("daily", "weekly", "monthly", "yearly"),
}
_MAKERS = {
    "name": lambda r: f"{_word(r).capitalize()} {_word(r, r.choice((1, 2))).capitalize()}",
    "company": lambda r: f"{_word(r).capitalize()} {r.choice(['Labs', 'Systems', 'Group', 'Foods', 'Logistics', '& Co', 'Works', 'Partners', 'Studio', 'Ltd'])}",
    "street": lambda r: f"{r.randint(1, 299)} {_word(r).capitalize()} {r.choice(['Lane', 'Street', 'Road', 'Avenue', 'Way', 'Court', 'Place'])}",
    "city": lambda r: _word(r).capitalize() + (r.choice(["ford", "ton", "by", "holm", "mouth", "field"]) if r.random() < 0.4 else ""),
    "email": _email,
    "phone": lambda r: r.choice([f"+{r.randint(1, 49)} {_digits(r, 3)} {_digits(r, 3)} {_digits(r, 4)}", f"({_digits(r, 3)}) {_digits(r, 3)}-{_digits(r, 4)}"]),
    "flight": lambda r: f"{r.choice(_LETTERS)}{r.choice(_LETTERS)}{r.randint(100, 9999)}",
    "postal": lambda r: _digits(r, 5),
    "date": lambda r: f"{r.randint(2020, 2035)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}",
    "time": lambda r: f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d}",
    "amount": lambda r: float(f"{r.choice([r.randint(1, 99), r.randint(100, 999), r.randint(1000, 9999)])}.{r.choice(_CENTS):02d}"),
    "percent": lambda r: r.randint(1, 60),
    "bool": lambda r: r.random() < 0.5,
    "tags": lambda r: [_word(r) for _ in range(r.randint(1, 3))],
    "names": lambda r: [_MAKERS["name"](r) for _ in range(r.randint(1, 3))],
    "emails": lambda r: [_email(r) for _ in range(r.randint(1, 3))],
}


def _value(rng: random.Random, kind: str):
    """A fresh value of `kind`: a _MAKERS key, "code:PFX", "int:LO:HI" or "enum:POOL"."""
    head, _, rest = kind.partition(":")
    if head == "code":
        return _code(rng, rest)
    if head == "int":
        lo, hi = rest.split(":")
        return rng.randint(int(lo), int(hi))
    if head == "enum":
        return rng.choice(_ENUMS[rest])
    return _MAKERS[kind](rng)


def _join_and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _show(rng: random.Random, kind: str, value) -> str:
    """How the text writes `value`: amounts sometimes with thousands separators, percents with %."""
    if kind == "amount":
        return f"{value:,.2f}" if value >= 1000 and rng.random() < 0.5 else f"{value:.2f}"
    if kind == "percent":
        return rng.choice([f"{value}%", f"{value} percent"])
    if isinstance(value, list):
        return _join_and(value) if rng.random() < 0.5 else ", ".join(value)
    return str(value)


def _type(rng: random.Random, kind: str, value) -> dict:
    """The JSON Schema of a value of `kind`; enums offer 3-4 choices that include `value`."""
    head, _, rest = kind.partition(":")
    if head == "enum":
        pool = [c for c in _ENUMS[rest] if c != value]
        choices = rng.sample(pool, rng.randint(2, 3)) + [value]
        rng.shuffle(choices)
        return {"type": "string", "enum": choices}
    if kind == "amount":
        return {"type": "number"}
    if head == "int" or kind == "percent":
        return {"type": "integer"}
    if kind == "bool":
        return {"type": "boolean"}
    if isinstance(value, list):
        return {"type": "array", "items": {"type": "string"}}
    fmt = {"date": "date", "email": "email"}.get(kind)
    return {"type": "string"} | ({"format": fmt} if fmt and rng.random() < 0.5 else {})


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.capitalize() for w in rest)


def _human(name: str) -> str:
    return "".join(" " + c.lower() if c.isupper() else c for c in name).replace("_", " ")


def _item(family: str, messages: list[dict], answer: str, meta: dict, tools: list[dict] | None = None) -> TaskItem:
    key = json.dumps({"tools": tools, "messages": messages}, ensure_ascii=False)
    return TaskItem(family, messages, answer, key=key, meta=meta, tools=tools)


# --------------------------------------------------------------------------------------------
# schema: a message and a JSON schema -> the object, every value copied from the message

# spec id -> (key names, value kind, sentences stating the value, description)
_FIELDS = {
    "invoice": ("invoice_number|invoice_id|invoice_no", "code:INV", "Invoice {v} is attached.|Invoice no. {v}.|This is about invoice {v}.", "Invoice number"),
    "order": ("order_id|order_number|order_ref", "code:ORD", "Order {v} was placed today.|Order number: {v}.|Re: order {v}.", "Order id"),
    "ticket": ("ticket_id|case_number|ticket_number", "code:TCK", "Ticket {v} is still open.|Case {v} was logged.|Support ticket: {v}.", "Ticket id"),
    "reference": ("booking_reference|confirmation_code|reference", "code:", "Your booking reference is {v}.|Confirmation code: {v}.|Quote reference {v} when you call.", "Booking reference"),
    "flight": ("flight_code|flight_number|flight_no", "flight", "You are on flight {v}.|Flight: {v}.|The flight number is {v}.", "Flight number"),
    "tracking": ("tracking_number|tracking_code", "code:TRK", "Tracking number: {v}.|Track the parcel with {v}.", "Carrier tracking number"),
    "sku": ("sku|product_code|item_code", "code:SKU", "Item code {v}.|The product code is {v}.", "Product SKU"),
    "customer": ("customer_name|customer|client_name", "name", "Customer: {v}.|The customer is {v}.|{v} is the customer.", "Customer full name"),
    "contact": ("contact_name|contact_person", "name", "Contact person: {v}.|Please ask for {v} at reception.", "Who to ask for"),
    "agent": ("agent_name|assignee|handled_by", "name", "Assigned to {v}.|{v} from our team will handle it.", "Staff member in charge"),
    "passenger": ("guest_name|passenger_name|traveler", "name", "Guest: {v}.|Booked for {v}.|The booking is in the name of {v}.", "Who travels"),
    "customer_email": ("customer_email|email|email_address", "email", "Reply to {v}.|Customer email: {v}.|You can reach the customer at {v}.", "Customer email"),
    "billing_email": ("billing_email|accounts_email", "email", "Send receipts to {v}.|Billing contact: {v}.", "Where invoices go"),
    "phone": ("phone|phone_number|contact_phone", "phone", "Phone: {v}.|Call {v} with questions.|The phone number on file is {v}.", "Phone number"),
    "company": ("company|company_name|employer", "company", "Company: {v}.|The account belongs to {v}.", "Company name"),
    "vendor": ("vendor|supplier|seller", "company", "Supplier: {v}.|Billed by {v}.|Sold by {v}.", "Who issued it"),
    "street": ("street|street_address|address_line", "street", "Address: {v}.|Deliver to {v}.|The office is at {v}.", "Street and number"),
    "city": ("city|town", "city", "City: {v}.|It is in the town of {v}.", "City"),
    "origin": ("origin|departure_city|from_city", "city", "Departing from {v}.|Leaving {v}.|Origin: {v}.", "Departure city"),
    "destination": ("destination|arrival_city|to_city", "city", "Arriving in {v}.|Destination: {v}.|Going to {v}.", "Arrival city"),
    "postal": ("postal_code|zip_code|zip", "postal", "Postcode {v}.|ZIP code: {v}.", "Postal code"),
    "total": ("total|total_amount|amount_due", "amount", "Total due: {v}.|The total is {v}.|Please pay {v} in full.", "Amount to pay"),
    "subtotal": ("subtotal|net_amount", "amount", "Subtotal: {v}.|The net amount is {v}.", "Before tax"),
    "tax": ("tax|vat|tax_amount", "amount", "Tax: {v}.|VAT of {v} applies.", "Tax amount"),
    "unit_price": ("unit_price|price_per_unit|price", "amount", "Each unit costs {v}.|Unit price: {v}.", "Price of one unit"),
    "weight": ("weight_kg|weight", "amount", "The parcel weighs {v} kg.|Weight: {v} kg.", "Weight in kg"),
    "quantity": ("quantity|qty|units", "int:1:500", "Quantity: {v}.|We need {v} units.|{v} pieces were ordered.", "How many"),
    "guests": ("guests|party_size|num_guests", "int:1:12", "Party of {v}.|{v} guests in total.", "Number of guests"),
    "nights": ("nights|num_nights|stay_length", "int:1:21", "Staying {v} nights.|Nights: {v}.", "Length of stay"),
    "seats": ("seats|seat_count", "int:1:9", "{v} seats are reserved.|Seats: {v}.", "Seats booked"),
    "duration": ("duration_minutes|duration|length_min", "int:5:240", "It will take {v} minutes.|Duration: {v} min.", "Minutes"),
    "discount": ("discount_percent|discount|discount_pct", "percent", "A {v} discount applies.|Discount: {v}.", "Percent off"),
    "date": ("date|event_date|dated", "date", "Date: {v}.|Dated {v}.|This happened on {v}.", "ISO date"),
    "departure_date": ("departure_date|depart_date|outbound_date", "date", "Departure on {v}.|Flying out on {v}.", "Outbound date"),
    "return_date": ("return_date|inbound_date", "date", "Returning on {v}.|Return date: {v}.", "Inbound date"),
    "due_date": ("due_date|payment_due|due_by", "date", "Payment is due by {v}.|Due date: {v}.", "Pay by"),
    "check_in": ("check_in|check_in_date|arrival_date", "date", "Check-in is on {v}.|Check-in date: {v}.", "First night"),
    "time": ("time|start_time|meeting_time", "time", "It starts at {v}.|Start time: {v}.", "HH:MM"),
    "priority": ("priority|urgency", "enum:priority", "Priority: {v}.|Please treat this as {v} priority.", "How urgent"),
    "status": ("status|state|order_status", "enum:status", "Status: {v}.|The current status is {v}.", "Current status"),
    "channel": ("channel|source|contact_channel", "enum:channel", "Received via {v}.|Channel: {v}.", "How it came in"),
    "payment_method": ("payment_method|paid_with|payment_type", "enum:payment", "Paid by {v}.|Payment method: {v}.", "How it was paid"),
    "cabin": ("cabin_class|cabin|fare_class", "enum:cabin", "Cabin: {v}.|Booked in {v} class.", "Cabin class"),
    "room_type": ("room_type|room", "enum:room", "Room type: {v}.|A {v} room is reserved.", "Room type"),
    "currency": ("currency|currency_code", "enum:currency", "Currency: {v}.|All amounts are in {v}.", "ISO currency"),
    "department": ("department|team|queue", "enum:department", "Route this to the {v} team.|Department: {v}.", "Owning team"),
}
_ARRAYS = {  # list-valued fields any message may carry
    "tags": ("tags|labels|keywords", "tags", "Tags: {v}.|Tagged {v}.", "Free-form tags"),
    "attendees": ("attendees|participants|invitees", "names", "Attendees: {v}.|{v} will join.", "People attending"),
    "cc": ("cc|cc_emails|copy_to", "emails", "Please copy {v}.|CC: {v}.", "Copied addresses"),
}
# group id -> (key names, (subkey, spec id) choices): a nested object property
_GROUPS = {
    "customer": ("customer|client|buyer", (("name", "customer"), ("email", "customer_email"), ("phone", "phone"))),
    "address": ("shipping_address|address|delivery_address", (("street", "street"), ("city", "city"), ("postal_code", "postal"))),
    "flight": ("flight|itinerary|outbound", (("code", "flight"), ("origin", "origin"), ("destination", "destination"), ("date", "departure_date"))),
    "payment": ("payment|payment_details", (("amount", "total"), ("currency", "currency"), ("method", "payment_method"))),
}
# domain -> (openers, spec ids, group ids)
_DOMAINS = {
    "invoice": (("Invoice from the accounts team.", "Hello, here is your invoice.", "BILLING NOTICE", "Dear customer,"),
                "invoice vendor customer billing_email total subtotal tax due_date currency payment_method quantity unit_price sku discount company", ("customer", "payment")),
    "travel": (("Your trip is booked.", "Booking confirmation", "Hi! Travel details below.", "Itinerary update:"),
               "reference passenger flight origin destination departure_date return_date cabin seats time phone customer_email total currency", ("flight", "customer")),
    "hotel": (("Thank you for your reservation.", "Hotel booking", "Dear guest,", "Reservation note:"),
              "reference passenger check_in nights room_type guests city street total currency phone customer_email discount", ("address", "customer")),
    "support": (("New support message.", "Hi team,", "Ticket update", "Hello support,"),
                "ticket customer customer_email priority status channel department agent order phone date sku", ("customer",)),
    "order": (("Order confirmation", "Thanks for your order!", "Delivery notice", "Shipping update:"),
              "order customer street city postal tracking weight quantity sku status date total phone payment_method", ("address", "customer")),
    "meeting": (("Meeting invite", "Hi all,", "Calendar note:", "Quick reminder:"),
                "date time duration city street company contact customer_email phone priority", ("address",)),
}
_CLOSERS = ("", "", "Thanks!", "Best regards.", "Kind regards, the team.", "Let us know if anything is wrong.")
_FILLER = ("The office is closed on public holidays.", "This message was sent automatically.", "Please keep this for your records.",
           "We value your feedback.", "No reply is needed.", "The weather was lovely that week.")
_SCHEMA_ASKS = ("Extract the fields.", "Fill in the form from this message.", "Extract the data as JSON.", "Parse this message into the schema.",
                "Pull the details out of the text below.", "Turn this into structured data.", "Read the message and fill in every field.")


def _sentence(rng: random.Random, spec: tuple, value) -> str:
    return rng.choice(spec[2].split("|")).format(v=_show(rng, spec[1], value))


def make_schema(rng: random.Random) -> TaskItem:
    """A message (invoice, booking, support note, ...) and a schema of 2-6 fields -> the object."""
    openers, spec_ids, group_ids = _DOMAINS[rng.choice(sorted(_DOMAINS))]
    spec_ids, key_of = spec_ids.split(), (_camel if rng.random() < 0.3 else str)
    # fields (leaves) cost ~25 prompt tokens each with the shipped tokenizer, so most items have 2-4
    n = leaves = rng.choices(range(2, 7), [0.22, 0.3, 0.24, 0.14, 0.1])[0]
    plan, used = [], set()  # plan: (key, spec, subs) where subs is [(subkey, spec)] for a nested object
    if n >= 3 and rng.random() < 0.2:
        names, subs = _GROUPS[rng.choice(group_ids)]
        subs = rng.sample(subs, rng.randint(2, min(3, len(subs), n - 1)))
        used |= {sid for _, sid in subs}
        plan.append((rng.choice(names.split("|")), None, [(sub, _FIELDS[sid]) for sub, sid in subs]))
        n -= len(subs)
    if rng.random() < 0.15:
        spec = _ARRAYS[rng.choice(sorted(_ARRAYS))]
        plan.append((rng.choice(spec[0].split("|")), spec, None))
        n -= 1
    for sid in rng.sample([s for s in spec_ids if s not in used], max(0, n)):
        used.add(sid)
        plan.append((rng.choice(_FIELDS[sid][0].split("|")), _FIELDS[sid], None))
    rng.shuffle(plan)
    describe = leaves <= 4 and rng.random() < 0.15

    def prop(spec, value) -> dict:
        return _type(rng, spec[1], value) | ({"description": spec[3]} if describe else {})

    props, obj, sentences = {}, {}, []
    for key, spec, subs in plan:
        key = key_of(key)
        if subs is None:
            obj[key] = _value(rng, spec[1])
            props[key] = prop(spec, obj[key])
            sentences.append(_sentence(rng, spec, obj[key]))
            continue
        inner, sub_props = {}, {}
        for sub, sub_spec in subs:
            inner[key_of(sub)] = _value(rng, sub_spec[1])
            sub_props[key_of(sub)] = prop(sub_spec, inner[key_of(sub)])
            sentences.append(_sentence(rng, sub_spec, inner[key_of(sub)]))
        obj[key] = inner
        props[key] = {"type": "object", "properties": sub_props, "required": list(sub_props)}
    # distractors: facts of the domain the schema does not ask for, of kinds it does not ask for
    # either (else a generic key such as "email" could take either of two addresses), and filler
    kinds = {spec[1] for _, spec, subs in plan if spec} | {sub_spec[1] for _, _, subs in plan for _, sub_spec in subs or ()}
    others = [s for s in spec_ids if s not in used and _FIELDS[s][1] not in kinds]
    for sid in rng.sample(others, min(len(others), rng.choice([0, 1, 1, 2]))):
        sentences.append(_sentence(rng, _FIELDS[sid], _value(rng, _FIELDS[sid][1])))
    if rng.random() < 0.3:
        sentences.append(rng.choice(_FILLER))
    rng.shuffle(sentences)
    required = [k for k in props if rng.random() < 0.75] or [next(iter(props))]  # optional ones are still in the text
    schema = ({"title": key_of(rng.choice(["record", "extraction", "form"]))} if rng.random() < 0.1 else {}) | {
        "type": "object", "properties": props, "required": required}
    opener, closer = rng.choice(openers) if rng.random() < 0.8 else "", rng.choice(_CLOSERS)
    body = rng.choice([" ", "\n"]).join(s for s in [opener, *sentences, closer] if s)
    ask = rng.choice(_SCHEMA_ASKS)
    user = f"{body}\n\n{ask}" if rng.random() < 0.6 else f"{ask}\n\n{body}"
    messages = [{"role": "system", "content": schema_instruction(schema)}, {"role": "user", "content": user}]
    return _item("schema", messages, json.dumps(obj, ensure_ascii=False), {"schema": schema, "fields": obj})


# --------------------------------------------------------------------------------------------
# toolcall: 1-5 made-up tools and a request that names one tool's action -> its call

# verbs of one group are synonyms: two offered tools never share a group and a noun
_VERB_GROUPS = ("get fetch retrieve", "find search lookup", "create add", "update edit", "delete remove", "cancel", "book reserve", "schedule",
                "send", "check verify", "track", "archive", "restore", "assign", "approve", "reject", "export", "rename", "share", "pause",
                "resume", "refund", "renew", "register", "close", "submit", "list")
_VERBS = {v: g for g, group in enumerate(_VERB_GROUPS) for v in group.split()}
_NOUNS = tuple(
    "invoice order ticket table room flight meeting reminder contact customer account shipment payment subscription report file folder "
    "playlist device task project event booking coupon review message note user team vehicle appointment parcel product cart quote "
    "contract badge lead campaign survey warehouse".split()
) + ("gift card", "purchase order", "support case", "delivery slot", "api key")
_PARAMS = (  # (name, value kind)
    ("customer_name", "name"), ("full_name", "name"), ("contact_name", "name"), ("assignee", "name"), ("recipient", "name"), ("email", "email"),
    ("recipient_email", "email"), ("phone", "phone"), ("phone_number", "phone"), ("city", "city"), ("destination", "city"), ("origin", "city"),
    ("address", "street"), ("street_address", "street"), ("company", "company"), ("vendor", "company"), ("date", "date"), ("start_date", "date"),
    ("end_date", "date"), ("due_date", "date"), ("time", "time"), ("start_time", "time"), ("amount", "amount"), ("price", "amount"), ("budget", "amount"),
    ("quantity", "int:1:500"), ("party_size", "int:1:12"), ("nights", "int:1:21"), ("limit", "int:1:100"), ("duration_minutes", "int:5:240"),
    ("discount_percent", "percent"), ("priority", "enum:priority"), ("status", "enum:status"), ("channel", "enum:channel"), ("cabin_class", "enum:cabin"),
    ("currency", "enum:currency"), ("format", "enum:format"), ("frequency", "enum:frequency"), ("notify", "bool"), ("confirm", "bool"), ("urgent", "bool"),
    ("include_archived", "bool"), ("send_receipt", "bool"), ("order_id", "code:ORD"), ("invoice_id", "code:INV"), ("ticket_id", "code:TCK"),
    ("reference", "code:"), ("flight_code", "flight"), ("tracking_number", "code:TRK"), ("sku", "code:SKU"), ("postal_code", "postal"),
)
_REQUESTS = ("{Verb} {a} {noun} with {params}.", "Please {verb} the {noun}: {params}.", "I need to {verb} {a} {noun}. Details: {params}.",
             "Can you {verb} {a} {noun} for me? Use {params}.", "{Verb} {noun}, {params}", "Could you {verb} the {noun} ({params})?")
_PROMPT_CHARS = 660
_TOOL_SYSTEMS = ("You are a helpful assistant.", "You are an agent. Use the tools when they help.", "Call a tool when you need one.",
                 "You are an operations assistant for a small company.")


def _article(noun: str) -> str:
    return "an" if noun[0] in "aeiou" else "a"


def _tool(rng: random.Random, verb: str, noun: str, n_params: int, camel: bool, describe: bool = True) -> tuple[dict, list[tuple[str, str]]]:
    """An OpenAI function definition for verb_noun and its (parameter name, kind) list, in properties order."""
    params = [(_camel(p) if camel else p, kind) for p, kind in rng.sample(_PARAMS, n_params)]
    name = _camel(f"{verb}_{noun.replace(' ', '_')}") if camel else f"{verb}_{noun.replace(' ', '_')}"
    describe = describe and rng.random() < 0.25
    props = {p: _type(rng, kind, _value(rng, kind)) | ({"description": _human(p).capitalize()} if describe else {}) for p, kind in params}
    required = list(props) if rng.random() < 0.8 else [p for p in props if rng.random() < 0.5]
    parameters = {"type": "object", "properties": props} | ({"required": required} if required else {})
    if rng.random() < 0.3:  # pydantic's order, as LangChain sends it
        parameters = {"properties": props} | ({"required": required} if required else {}) | {"type": "object"}
    verb_text, a = verb.replace("lookup", "look up"), _article(noun)
    description = rng.choice([f"{verb_text.capitalize()} {a} {noun}.", f"Use this to {verb_text} {a} {noun}.", f"Tool to {verb_text} {a} {noun}."])
    return {"name": name, "description": description, "parameters": parameters}, params


def _mention(rng: random.Random, style: int, name: str, kind: str, value) -> str:
    """How a request states one argument: by its spoken label or its raw name; booleans as yes/no or true/false."""
    if kind == "bool":
        return [f"{_human(name)}: {'yes' if value else 'no'}", f"{name}={json.dumps(value)}", f"with {_human(name)} {'on' if value else 'off'}"][style]
    shown = _show(rng, kind, value)
    if isinstance(value, str) and style and rng.random() < 0.3:
        shown = f'"{shown}"'
    return [f"{_human(name)} {shown}", f"{name}={shown}", f"{_human(name)}: {shown}"][style]


def make_toolcall(rng: random.Random) -> TaskItem:
    """1-5 generated tools and a request naming one tool's action and every argument -> that tool's call."""
    camel = rng.random() < 0.25
    verb, noun = rng.choice(sorted(_VERBS)), rng.choice(_NOUNS)
    target, params = _tool(rng, verb, noun, rng.choices([1, 2, 3, 4], [0.3, 0.35, 0.22, 0.13])[0], camel)
    args = {p: rng.choice(target["parameters"]["properties"][p]["enum"]) if kind.startswith("enum") else _value(rng, kind) for p, kind in params}
    style = rng.randrange(3)
    shown = [_mention(rng, style, p, kind, args[p]) for p, kind in params]
    if rng.random() < 0.5:
        rng.shuffle(shown)  # the schema, not the request, orders the arguments
    verb_text = verb.replace("lookup", "look up")
    request = rng.choice(_REQUESTS).format(Verb=verb_text.capitalize(), verb=verb_text, a=_article(noun), noun=noun,
                                           params=_join_and(shown) if rng.random() < 0.5 else ", ".join(shown))
    messages = ([{"role": "system", "content": rng.choice(_TOOL_SYSTEMS)}] if rng.random() < 0.3 else []) + [{"role": "user", "content": request}]
    # The shipped tokenizer spends about a token per 2 characters of tool JSON and request, and the
    # template adds ~90: distractors join while the prompt stays under ~400 tokens. One item in 50
    # lists four or five tools regardless, so long lists are seen too.
    taken, tools = {(_VERBS[verb], noun)}, [target]
    crowded = rng.random() < 0.02
    for _ in range(rng.choice([3, 4]) if crowded else rng.choices([0, 1, 2, 3], [0.35, 0.37, 0.2, 0.08])[0]):
        v, n = rng.choice(sorted(_VERBS)), rng.choice(_NOUNS)
        other = _tool(rng, v, n, rng.choice([1, 1, 2]), rng.random() < 0.25, describe=not crowded)[0]
        if (_VERBS[v], n) not in taken and (crowded or len(json.dumps(tools + [other] + messages)) <= _PROMPT_CHARS):
            taken.add((_VERBS[v], n))
            tools.append(other)
    rng.shuffle(tools)
    calls = [{"name": target["name"], "arguments": args}]
    meta = {"schema": target["parameters"], "tool": target["name"], "calls": calls, "fields": args}
    return _item("toolcall", messages, tool_call_text(calls), meta, tools)


# --------------------------------------------------------------------------------------------
# label: a message and a label set -> {"<key>": "<label>"}; the message cues exactly one label

# domain -> (answer keys, {label: cue phrases}); no cue of a label appears in another label's text
LABEL_CUES: dict[str, tuple[tuple[str, ...], dict[str, tuple[str, ...]]]] = {
    "intent": (("intent", "label", "category"), {
        "refund": ("I want my money back", "please refund the charge", "send the refund to my card"),
        "cancel_order": ("please cancel my order", "I no longer want this order", "stop the order before it ships"),
        "track_order": ("where is my parcel", "has my order shipped yet", "I need the delivery status"),
        "change_address": ("I moved to a new address", "please update my shipping address", "send it to my new home instead"),
        "reset_password": ("I forgot my password", "the password reset link expired", "I cannot log in with my password"),
        "upgrade_plan": ("I want a bigger plan", "how do I move to the premium tier", "please upgrade my subscription"),
        "report_bug": ("the app crashes on start", "the save button does nothing", "I found an error in the export screen"),
        "book_demo": ("can we see a product demo", "I would like a walkthrough of the tool", "schedule a demo for my team"),
        "close_account": ("delete my account for good", "I want to close my account", "please remove my profile entirely")}),
    "topic": (("topic", "category", "label"), {
        "sports": ("the striker scored twice in the final", "the match went to extra time", "the team won the league"),
        "finance": ("the central bank raised interest rates", "shares fell sharply on Monday", "the quarterly earnings beat forecasts"),
        "weather": ("heavy rain is expected tomorrow", "a heatwave is coming this weekend", "snow closed the mountain roads"),
        "health": ("doctors recommend more sleep", "a new vaccine was approved", "the clinic extended its hours for flu shots"),
        "travel": ("the new train line opens in spring", "airport queues were long all week", "cheap flights to the coast sold out"),
        "technology": ("the new phone has a faster chip", "the software update fixes security holes", "the startup released an open model"),
        "music": ("the band announced a world tour", "her new album topped the charts", "the orchestra played a sold-out show"),
        "food": ("the bakery launched a sourdough loaf", "this pasta recipe takes ten minutes", "the restaurant earned a star")}),
    "priority": (("priority", "urgency", "label"), {
        "low": ("no rush at all", "whenever you have a spare moment", "this can wait until next month"),
        "medium": ("please look at this this week", "it would help to have it soon", "sometime in the next few days is fine"),
        "high": ("we need this fixed today", "this blocks the release tomorrow", "customers are starting to complain"),
        "urgent": ("the whole site is down right now", "production is broken and losing money", "drop everything and call me")}),
    "sentiment": (("sentiment", "label", "tone"), {
        "positive": ("I absolutely love it", "best purchase I made this year", "works perfectly and looks great"),
        "negative": ("it broke after two days", "a complete waste of money", "I am very disappointed"),
        "neutral": ("it does what it says", "nothing special either way", "about what I expected"),
        "mixed": ("great screen but the battery is awful", "fast delivery though the box was damaged", "good value yet the manual is useless")}),
    "department": (("department", "team", "route_to"), {
        "sales": ("we want a quote for fifty licenses", "what discount do you offer for a large order", "I am interested in buying your product"),
        "billing": ("I was charged twice this month", "the invoice amount looks wrong", "my card payment failed"),
        "legal": ("please review the contract terms", "we received a cease and desist letter", "is this clause compliant with the law"),
        "hr": ("I have a question about my vacation days", "when is the next payroll", "I would like to apply for parental leave"),
        "it": ("my laptop will not connect to the VPN", "I need access to the shared drive", "the printer on floor two is offline"),
        "shipping": ("the pallet never reached the warehouse", "the courier left the box outside", "we need express delivery for this order")}),
    "email_type": (("type", "category", "label"), {
        "meeting_request": ("are you free for a call on Thursday", "can we set up a meeting next week", "let us find a slot to talk"),
        "newsletter": ("here are this month's highlights", "unsubscribe at the bottom of this email", "our monthly digest is here"),
        "job_application": ("I am applying for the open position", "please find my CV attached", "I would love to join your team as an engineer"),
        "spam": ("you have won a free cruise", "claim your prize before midnight", "click here to double your money"),
        "out_of_office": ("I am out of the office until Monday", "I am on leave with limited access to email", "for urgent matters contact my colleague")}),
}
_LABEL_ASKS = ("Answer with the {key}.", "Which {key} fits this message?", "Classify the message.", "Pick the right {key}.", "Choose exactly one.")


def make_label(rng: random.Random) -> TaskItem:
    """A message with the cue of one label and neutral details -> {key: that label}, the set named in the prompt."""
    keys, cues = LABEL_CUES[rng.choice(sorted(LABEL_CUES))]
    key = rng.choice(keys)
    label = rng.choice(sorted(cues))
    labels = rng.sample([x for x in sorted(cues) if x != label], rng.randint(1, min(5, len(cues) - 1))) + [label]
    rng.shuffle(labels)
    cue = rng.choice(cues[label])
    details = [f"My account number is {_code(rng)}.", f"I live at {_MAKERS['street'](rng)}.", f"You can reach me on {_MAKERS['phone'](rng)}.",
               f"My email is {_email(rng)}.", f"This is about order {_code(rng, 'ORD')}.", f"Sent on {_MAKERS['date'](rng)}.", "Thanks in advance."]
    sentences = [cue[0].upper() + cue[1:] + rng.choice([".", "!", "."])] + rng.sample(details, rng.randint(0, 2))
    rng.shuffle(sentences)
    opener = rng.choice(["", f"Hi, this is {_MAKERS['name'](rng)}.", f"From: {_email(rng)}", f"Message from {_MAKERS['company'](rng)}:", "Hello,"])
    text = " ".join(s for s in [opener] + sentences if s)
    listed = rng.choice(["Labels: {}.", "Options: {}.", "Choose from: {}."]).format(", ".join(labels))
    ask = f"{listed} {rng.choice(_LABEL_ASKS).format(key=_human(key))}"
    user = f"{text}\n\n{ask}" if rng.random() < 0.6 else f"{ask}\n\n{text}"
    schema = {"type": "object", "properties": {key: {"type": "string", "enum": labels}}, "required": [key]}
    obj = {key: label}
    messages = [{"role": "system", "content": schema_instruction(schema)}, {"role": "user", "content": user}]
    return _item("label", messages, json.dumps(obj, ensure_ascii=False), {"schema": schema, "fields": obj, "labels": labels})


# --------------------------------------------------------------------------------------------
# copy: an auxiliary training family (no served task asks for it)

_COPY_KINDS = ("name", "company", "street", "city", "email", "phone", "flight", "postal", "date", "time", "amount", "code:", "code:SKU", "code:INV")
_COPY_ASKS = ("Return these values as JSON, exactly as written.", "Copy the fields below into a JSON object.",
              "Repeat each value exactly, as JSON.", "Give me this as JSON, values unchanged.")


def _copy_key(kind: str, taken: set) -> str:
    base = {"code:": "code", "code:SKU": "sku", "code:INV": "invoice_number"}.get(kind, kind)
    key, n = base, 2
    while key in taken:
        key, n = f"{base}_{n}", n + 1
    return key


def make_copy(rng: random.Random) -> TaskItem:
    """1-4 "key: value" lines of open values -> the JSON object of those keys and values, in order.
    Nothing to choose and nothing to convert: only the copying of unseen strings (names, codes,
    emails, dates, digits) that schema and toolcall values need, on prompts a few dozen tokens long
    so a training step teaches it cheaply. Opt-in for training; never served or scored as a task."""
    obj: dict = {}
    for kind in rng.choices(_COPY_KINDS, k=rng.randint(1, 4)):
        obj[_copy_key(kind, set(obj))] = _show(rng, kind, _value(rng, kind))
    lines = [f"{k}: {v}" for k, v in obj.items()]
    ask = rng.choice(_COPY_ASKS)
    user = f"{ask}\n" + "\n".join(lines) if rng.random() < 0.7 else "\n".join(lines) + f"\n\n{ask}"
    return _item("copy", [{"role": "user", "content": user}], json.dumps(obj, ensure_ascii=False), {"fields": obj})


# --------------------------------------------------------------------------------------------
# scoring: per field (leaves, nested objects flattened to "a.b"; a list is one leaf)


def flatten_fields(obj: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in obj.items():
        if isinstance(v, dict) and v:
            out |= flatten_fields(v, f"{prefix}{k}.")
        else:
            out[f"{prefix}{k}"] = v
    return out


def _answer_object(item: TaskItem, output: str) -> dict | None:
    """The output's JSON object; for "toolcall", the arguments of its one call to the right tool."""
    if item.family == "toolcall":
        calls = parse_tool_calls(output)
        if not calls or len(calls) != 1 or calls[0]["name"] != item.meta["tool"]:
            return None
        got = calls[0]["arguments"]
    else:
        try:
            got = json.loads(output)
        except (json.JSONDecodeError, TypeError):
            return None
    return got if isinstance(got, dict) else None


def field_matches(item: TaskItem, output: str) -> tuple[int, int]:
    """(fields equal to the reference, fields in the reference) for an item of an open family.
    Equal means equal JSON text, so 3 and 3.0, or 1 and true, differ."""
    want = flatten_fields(item.meta["fields"])
    got = _answer_object(item, output)
    got = flatten_fields(got) if got is not None else {}
    right = sum(k in got and json.dumps(got[k]) == json.dumps(v) for k, v in want.items())
    return right, len(want)


def score_fields(item: TaskItem, output: str) -> float:
    """Family score of the open families: the share of fields right (0 when unparseable or the wrong tool)."""
    right, total = field_matches(item, output)
    return right / total


__all__ = ["LABEL_CUES", "make_schema", "make_toolcall", "make_label", "make_copy", "field_matches", "score_fields", "flatten_fields"]
