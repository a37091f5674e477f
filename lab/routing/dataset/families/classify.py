"""classify: pick one label for a text (answers of 1-4 tokens: block mode; 18-55 with a reason).

`generate` picks one of ten variants: review sentiment (variant 0 is the embedded task suite's
format), support-ticket routing, spam, headline topic, intent (sometimes with a JSON schema of the
labels), urgency, feedback type, and a system prompt that carries the instruction. About one in
seven asks for a short reason, which makes the answer a sentence. `payload_instruction` asks for a
label of the shared payload instead (see families.over_payload).
"""

from __future__ import annotations

from ..parts import fill, review
from ..pools import HEADLINES, INTENTS, TICKETS
from ..rng import Rng
from ..sample import Sample


def generate(rng: Rng) -> Sample:
    v = rng.integer(0, 9)
    explain = rng.chance(0.15)
    tokens = rng.integer(1, 4) if not explain else rng.integer(18, 55)
    tail = (rng.choice([" Explain briefly.", " Give a one-sentence reason.", " Justify your answer in a sentence."]) if explain
            else rng.choice(["", "", " Answer with the label only.", " One word."]))
    if v <= 2:  # review sentiment
        text, _ = review(rng)
        labels = "positive, negative, neutral"
        user = rng.choice([
            f"Review: {text}\nLabels: {labels}\nLabel:",
            f"Classify the sentiment of this review as {labels}: {text}",
            f"Is this review positive, negative or neutral?\n\n\"{text}\"",
            f"what's the sentiment here ({labels})? {text}",
            f"Label the following customer review with one of [{labels}].\n{text}",
        ]) + tail
        return Sample("classify", user, tokens, style="suite" if v == 0 else "natural")
    if v == 3:  # support-ticket routing
        dept = rng.choice(list(TICKETS))
        ticket = rng.choice(TICKETS[dept])
        user = rng.choice([f"Ticket: {ticket}\nCategories: billing, technical, shipping, account\nCategory:",
                           f"Which department should handle this ticket? Options: billing, technical, shipping, account.\n\n"
                           f"{ticket}",
                           f"Route this support request to the right team (billing/technical/shipping/account): \"{ticket}\"",
                           f"Categorize: {ticket}. Choose one of billing, technical, shipping or account."]) + tail
        return Sample("classify", user, tokens, style="suite" if rng.chance(0.3) else "natural")
    if v == 4:  # spam or not
        spam = rng.chance(0.5)
        msg = (rng.choice(["CONGRATULATIONS!! You won a free {product}, click here to claim",
                           "Earn $5000 a week from home, no experience needed",
                           "Your account is suspended, verify your password at this link"]) if spam else
               rng.choice(["Hi {first}, are we still on for lunch Thursday?", "Attached is the agenda for the {company} meeting",
                           "Your order from {company} has shipped"]))
        user = rng.choice(["Is the following message spam? Answer spam or ham.\n", "spam or not spam: ",
                           "Classify this email as spam or legitimate:\n"]) + fill(rng, msg) + tail
        return Sample("classify", user, tokens)
    if v == 5:  # headline topic
        topic = rng.choice(list(HEADLINES))
        user = rng.choice([f"Tag this headline with a topic (politics, sports, business, tech, science): "
                           f"\"{rng.choice(HEADLINES[topic])}\"",
                           f"Headline: {rng.choice(HEADLINES[topic])}\n"
                           f"Which section of the paper does it belong in? politics / sports / business / tech / science"]) + tail
        return Sample("classify", user, tokens)
    if v == 6:  # intent, sometimes constrained by a JSON schema of the labels
        intent = rng.choice(list(INTENTS))
        utt = fill(rng, rng.choice(INTENTS[intent]))
        user = rng.choice([f"What's the intent here - book_flight, cancel_booking, check_status or other? \"{utt}\"",
                           f"Intent classification.\nLabels: book_flight, cancel_booking, check_status, other\nUtterance: {utt}",
                           f"Map the user's message to one intent ({', '.join(INTENTS)}): {utt}"]) + tail
        schema = {"type": "json_schema", "json_schema": {"name": "intent", "schema": {
            "type": "object", "properties": {"intent": {"enum": list(INTENTS)}}}}}
        return Sample("classify", user, tokens, response_format=schema if rng.chance(0.2) else None)
    if v == 7:  # ticket urgency
        ticket = rng.choice(rng.choice(list(TICKETS.values())))
        user = rng.choice([f"Rate the urgency of this ticket as low, medium or high: {ticket}",
                           f"How urgent is this? (low/medium/high)\n{ticket}",
                           f"Priority for \"{ticket}\" - P1, P2 or P3?"]) + tail
        return Sample("classify", user, tokens)
    if v == 8:  # feedback type
        fb = rng.choice(["the export to PDF cuts off the last page", "please add dark mode", "love the new dashboard, great job",
                         "it would be nice to have keyboard shortcuts", "the app freezes when I rotate my phone",
                         "your support team was amazing"])
        user = rng.choice([f"Sort this feedback into bug, feature_request or praise: {fb}",
                           f"Is this a bug report, a feature request, or praise? \"{fb}\""]) + tail
        return Sample("classify", user, tokens)
    # the system prompt carries the instruction; the user message is only the review or ticket
    sys = rng.choice(["You label customer reviews. Answer with exactly one word: positive, negative or neutral.",
                      "You are a sentiment classifier. Output only the label (positive/negative/neutral).",
                      "Classify each support ticket into billing, technical, shipping or account. "
                      "Reply with the category name only."])
    text = review(rng)[0] if "ticket" not in sys else rng.choice(rng.choice(list(TICKETS.values())))
    return Sample("classify", text, rng.integer(1, 3), system=sys)


def payload_instruction(rng: Rng, payload_tokens: int) -> tuple[str, int]:
    """A labeling instruction (one of eight label sets) for the shared payload, and its answer length."""
    labels = rng.choice([["positive", "negative", "neutral"], ["urgent", "not urgent"], ["spam", "not spam"],
                         ["question", "complaint", "praise"], ["billing", "technical", "other"],
                         ["personal", "work", "promotion"], ["yes", "no"], ["english", "french", "german", "spanish"]])
    ls = ", ".join(labels)
    ins = rng.choice([f"Classify this as one of: {ls}", f"Is this {' or '.join(labels)}?", f"Label the text ({ls})",
                      f"Categorize the following - {ls}", f"Which category fits best: {ls}?",
                      f"Tag this message with one label from [{ls}]", f"Pick one: {ls}. Text",
                      f"Determine whether this is {' or '.join(labels)}", f"Triage this into {ls}", f"Sentiment? ({ls})",
                      f"Route this to one of {ls}"])
    return ins, rng.integer(1, 4)
