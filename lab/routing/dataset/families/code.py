"""code: write, fix, explain or test code (25-340 tokens).

`generate` draws one function spec (name, arguments, what it does) and picks one of ten variants:
a short Python function (variant 0 is the embedded task suite's format), the same in another
language, SQL/bash/regex one-liners, debugging a snippet, refactoring or testing a snippet (the
longest), how-to questions, classic data structures, and a system prompt that asks for code only.
`extra_phrasings` adds more small coding requests.
"""

from __future__ import annotations

from ..pools import CODE_SPECS, ERRORS, LANGS, SNIPPETS
from ..rng import Rng
from ..sample import Sample


def generate(rng: Rng) -> Sample:
    v = rng.integer(0, 9)
    fn, args, spec = rng.choice(CODE_SPECS)
    if v <= 2:  # a short Python function
        user = (f"Write a Python function `{fn}({args})` that {spec}." if v == 0 else
                rng.choice([f"write a python function that {spec}", f"Implement {fn}({args}) in Python: it {spec}.",
                            f"I need a small Python helper that {spec}. Type hints please.",
                            f"def {fn}({args}): ...  # {spec} - fill this in"]))
        return Sample("code", user, rng.integer(30, 110), style="suite" if v == 0 else "natural")
    if v == 3:  # the same in another language
        lang = rng.choice(LANGS)
        user = rng.choice([f"Write a {lang} function that {spec}.", f"How would you write a function in {lang} that {spec}?",
                           f"{lang}: a function that {spec}, please"])
        return Sample("code", user, rng.integer(50, 160))
    if v == 4:  # SQL, bash, regex, git one-liners
        user = rng.choice([f"Write a SQL query that returns the top {rng.integer(3, 10)} customers by revenue "
                           f"from the orders table.",
                           "SQL to find duplicate emails in the users table?",
                           "Write a query joining orders and customers to get total spend per country.",
                           "Write a bash one-liner that finds all .log files over 100MB and deletes them.",
                           "bash script to back up /var/www every night with cron",
                           "Give me a regex that matches US phone numbers like (555) 123-4567.",
                           "git command to undo my last commit but keep the changes?"])
        return Sample("code", user, rng.integer(25, 120))
    if v == 5:  # debug a snippet
        snip = rng.choice(SNIPPETS)
        user = rng.choice([f"Why does this give {rng.choice(ERRORS)}?\n```\n{snip}\n```",
                           f"Fix this bug:\n```python\n{snip}\n```",
                           f"this code is broken, can you fix it\n\n{snip}",
                           f"Find the bug:\n```\n{snip}\n```\nand show the corrected code."])
        return Sample("code", user, rng.integer(60, 220))
    if v == 6:  # refactor or test a snippet
        snip = rng.choice(SNIPPETS)
        user = rng.choice([f"Refactor this to be more readable:\n```\n{snip}\n```",
                           f"Write pytest unit tests for this code:\n```\n{snip}\n```",
                           f"Add type hints and a docstring:\n```python\n{snip}\n```",
                           f"Convert this to idiomatic modern code:\n{snip}"])
        return Sample("code", user, rng.integer(90, 300))
    if v == 7:  # how-to questions
        user = rng.choice(["how do i reverse a list in python", "How do I read a CSV file with pandas?",
                           "what's the python syntax for a dict comprehension",
                           "How do I make an HTTP request in JavaScript with fetch?",
                           "how to sort a list of dicts by a key in python",
                           "How can I run two async functions concurrently in Python?", "How do I write a class with a __repr__?"])
        return Sample("code", user, rng.integer(40, 150))
    if v == 8:  # classic data structures and small apps
        user = rng.choice([f"Implement a binary search in {rng.choice(LANGS)}.",
                           "Write a class for a LRU cache with get and put in O(1).",
                           "Implement a linked list with insert, delete and search.",
                           "Write a function to detect a cycle in a directed graph.",
                           f"Write a small Flask app with one endpoint that returns "
                           f"{rng.choice(['the time', 'a random quote', 'the server status'])} as JSON."])
        return Sample("code", user, rng.integer(110, 340))
    # the system prompt asks for code; the user message is only the spec
    sys = rng.choice(["You are a senior Python engineer. Reply with code only, no explanations.",
                      "You are a coding assistant. Answer with a single code block."])
    q = rng.choice([f"{spec}", f"a function {fn}({args}) that {spec}", f"func that {spec}"])
    return Sample("code", q, rng.integer(30, 120), system=sys)


def extra_phrasings(rng: Rng) -> Sample:
    """More small coding requests; every phrasing's slots are drawn, one phrasing kept."""
    functions = ["debounce another function", "check if a number is even", "parse a CSV line", "reverse a string",
                 "deep copy an object"]
    how_tos = ["merge two dictionaries", "read a file line by line", "remove duplicates from a list", "format a date",
               "make a GET request"]
    classes = ["bank account with deposit and withdraw", "stack with push and pop", "shopping cart", "temperature sensor"]
    q = rng.choice([f"Write a {rng.choice(LANGS)} function to {rng.choice(functions)}.",
                    f"How do I {rng.choice(how_tos)} in {rng.choice(LANGS)}?",
                    "Write a SQL query to get the second highest salary from an employees table.",
                    f"Write a Go HTTP server that returns {rng.choice(['hello world', 'the time', 'JSON'])}.",
                    f"Create a Python class for a {rng.choice(classes)}.",
                    "Write a regex to validate a hex color code like #a3f or #ff00aa.",
                    f"Fix this: {rng.choice(['def f(x): return x +', 'for i in range(10) print(i)', 'if x = 3: pass'])}",
                    f"Write a Dockerfile for a {rng.choice(['Flask', 'Node', 'Go'])} app.",
                    "Write a unit test for a function that adds two numbers.",
                    f"Implement {rng.choice(['quicksort', 'a trie', 'Dijkstra', 'a rate limiter'])} in {rng.choice(LANGS)}."])
    return Sample("code", q, rng.integer(40, 260))
