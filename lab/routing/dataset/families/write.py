"""write: long-form writing - stories, reports, essays, emails, poems, role play (90-850 tokens: AR).

`generate` picks one of ten variants: a templated story or report (variant 0 is the embedded task
suite's format), essays of N words (length ~1.2-1.45 tokens per word), short stories, emails,
cover letters and speeches, poems and lyrics (the shortest), role play (the character in the system
prompt or in the message), and a system prompt that asks for long-form prose. `extra_phrasings` adds
more writing requests.
"""

from __future__ import annotations

from ..parts import facts, fill, person_name
from ..pools import CITIES, COMPANIES, JOBS, PRODUCTS, TOPICS
from ..rng import Rng
from ..sample import Sample


def generate(rng: Rng) -> Sample:
    v = rng.integer(0, 9)
    if v <= 1:  # long templated stories/reports (the embedded suite's format when v == 0)
        name, job, city, company = person_name(rng), rng.choice(JOBS), rng.choice(CITIES), rng.choice(COMPANIES)
        user = rng.choice([
            f"Write a story about {name}, a {job} from {city}. Include their morning, a problem at work, and how it ends. "
            f"Make it at least {rng.integer(3, 6)} paragraphs.",
            f"Write a report about {company} with the sections Overview, Revenue, Costs, Risks and Outlook. "
            f"Use the facts: {facts(rng, rng.integer(2, 4))}",
            f"Write a quarterly report for {company} covering sales in {city}, hiring, and next steps.",
        ])
        return Sample("write", user, rng.integer(300, 700), style="suite" if v == 0 else "natural")
    if v == 2:  # an essay of N words
        topic, words = rng.choice(TOPICS), rng.choice([300, 400, 500, 600, 800])
        user = rng.choice([f"Write a {words}-word essay on {topic}.",
                           f"Essay: {topic}. About {words} words, with an intro and a conclusion.",
                           f"I need an essay discussing {topic} for my class, roughly {words} words.",
                           f"write me an argumentative essay about {topic}"])
        return Sample("write", user, int(words * rng.uniform(1.2, 1.45)))
    if v == 3:  # short stories
        plots = ["finds a map in an old book", "can hear plants talk", "wakes up in 1850",
                 "gets stuck in an elevator with a celebrity"]
        heroes = ["dragon", "lighthouse keeper", "robot", "fox", "little cloud"]
        user = rng.choice([f"Write a short story about a {rng.choice(JOBS)} who {rng.choice(plots)}.",
                           f"Tell me a bedtime story about a {rng.choice(heroes)}.",
                           f"Write a sci-fi story set in {rng.choice(CITIES)} in the year {rng.integer(2100, 3000)}."])
        return Sample("write", user, rng.integer(320, 850))
    if v == 4:  # emails and letters
        user = fill(rng, rng.choice(["Draft an email to my landlord about the broken heater; it's been two weeks.",
                                     "Write an email to {first} declining the job offer politely.",
                                     "Write a follow-up email after my interview at {company}.",
                                     "Compose an email to the team announcing that {first} is joining as our new "
                                     "{product} lead.",
                                     "Write a complaint letter to {company} about a delayed refund.",
                                     "email to my professor asking for an extension, sound sincere"]))
        return Sample("write", user, rng.integer(130, 320))
    if v == 5:  # cover letters, blog posts, toasts, speeches
        # {job} and {topic} are not fill() slots: replaced first, drawn before fill's slots
        template = rng.choice(["Write a cover letter for a {job} position at {company}.",
                               "Write a blog post about {topic} for beginners.",
                               "Write a wedding toast for my sister and her husband.",
                               "Write a product description page for our new {product}, with features and FAQ.",
                               "Write a speech for the opening of the new library in {city}.",
                               "write a LinkedIn article on lessons from {topic}"]).replace("{job}", rng.choice(JOBS)).replace(
                                   "{topic}", rng.choice(TOPICS))
        user = fill(rng, template)
        return Sample("write", user, rng.integer(280, 700))
    if v == 6:  # poems and lyrics
        user = rng.choice([f"Write a poem about {rng.choice(TOPICS)}.",
                           f"Write a sonnet about {rng.choice(CITIES)} in the rain.",
                           f"a haiku sequence (five haiku) about {rng.choice(['autumn', 'the sea', 'coffee', 'Mondays'])}",
                           f"Write song lyrics about {rng.choice(['leaving home', 'summer love', 'a road trip'])}, "
                           f"with two verses and a chorus."])
        return Sample("write", user, rng.integer(90, 260))
    if v <= 8:  # role play: the character in the system prompt, or set up in the message
        char = rng.choice(["a medieval innkeeper", "a grumpy pirate captain", "a detective in 1920s Chicago",
                           "a friendly tour guide in Rome", "Sherlock Holmes", "a customer at a bakery who can't decide",
                           "a job interviewer at a tech startup"])
        sys = f"You are {char}. Stay in character and answer in vivid detail."
        user = rng.choice(["*walks in, soaked from the rain* Got a room for the night?",
                           "Tell me about the strangest thing that happened to you this week.",
                           "So what brings you here today?", "Describe your surroundings to me.",
                           "I have a mystery for you. My cat vanished from a locked room."])
        if rng.chance(0.5):
            return Sample("write", user, rng.integer(120, 380), system=sys)
        return Sample("write", f"Let's role-play: you are {char} and I'm a traveler. {user}", rng.integer(120, 380))
    # the system prompt asks for long-form prose; the message is a few words
    sys = rng.choice(["You are a creative writing assistant. Write rich, detailed prose.", "You write long-form marketing copy."])
    q = rng.choice([f"Something about {rng.choice(TOPICS)}, long form.", f"A story set in {rng.choice(CITIES)}.",
                    f"Landing page copy for a {rng.choice(PRODUCTS)} brand."])
    return Sample("write", q, rng.integer(300, 700), system=sys)


def extra_phrasings(rng: Rng) -> Sample:
    """More writing requests; every phrasing's slots are drawn, one phrasing kept."""
    blog_topics = ["the benefits of morning walks", "saving money", "learning to cook", "working from cafes"]
    essays = ["the impact of the internet on democracy", "why history matters", "the value of boredom"]
    q = rng.choice([f"Write a {rng.choice([300, 500, 800])} word blog post about {rng.choice(blog_topics)}.",
                    f"Write a short story about a {rng.choice(['cat', 'dog', 'robot', 'ghost'])} who becomes "
                    f"{rng.choice(['mayor of a small town', 'a chef', 'famous overnight'])}.",
                    f"Draft an email to my team announcing "
                    f"{rng.choice(['the office move', 'a new hire', 'the holiday schedule', 'our quarterly results'])}.",
                    f"Write a poem about {rng.choice(['the ocean at night', 'first snow', 'an old friend', 'city lights'])}.",
                    f"Pretend you are {rng.choice(['a pirate', 'a knight', 'an astronaut', 'a wizard'])} "
                    f"and tell me about your greatest adventure.",
                    f"Write a cover letter for a {rng.choice(['junior accountant', 'barista', 'nurse', 'software intern'])} "
                    f"role.",
                    f"Write an essay on {rng.choice(essays)}.",
                    f"Write a product description for a {rng.choice(['bamboo toothbrush', 'smart lamp', 'travel mug'])}, "
                    f"about 200 words.",
                    f"Write a speech for {rng.choice(['my best friend’s wedding', 'a graduation', 'a retirement party'])}.",
                    f"Compose a letter to {rng.choice(['my future self', 'my grandmother', 'the city council'])}."])
    return Sample("write", q, rng.integer(200, 800))
