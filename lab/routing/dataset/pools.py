"""Word pools the generators draw from: real-world subjects (people, places, companies, products,
books, ...) and the parts content is built from (facts, prose, reviews, tickets, tools, code).

Plain data, no draws. Order matters: generators pick by position through the seeded `Rng`, so
appending to a pool or reordering it changes the generated files (regenerate and commit them together).
Noise phrases live in noise.py, system prompts and earlier turns in request.py.
"""

# --- people, places, organizations ------------------------------------------------------------------

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

# --- subjects for questions, essays and stories -----------------------------------------------------

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

# --- tools for plan requests: name -> signature; GOALS name the tools each goal needs ---------------

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

# --- content parts: review phrases, support tickets, headlines, intents, facts, prose, code ----------

# Review phrases by sentiment: positive, negative, neutral.
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
