"""reason: problems whose answer shows its working (110-600 tokens: AR).

`generate` picks one of ten variants: adding 8-25 numbers with a running total per line (variant 0
is the embedded task suite's format; its length is counted per line, digits cost a token each),
word problems, logic puzzles, algebra, proofs, probability, and a system prompt that asks for steps
on a terse question. `extra_phrasings` adds more word problems.
"""

from __future__ import annotations

from ..pools import CITIES, FIRST
from ..rng import Rng
from ..sample import Sample


def generate(rng: Rng) -> Sample:
    v = rng.integer(0, 9)
    if v <= 3:  # add 8-25 small numbers with a running total per line
        n = rng.integer(8, 25)
        nums = [rng.integer(1, 99) for _ in range(n)]
        per = 20.0 + sum(len(str(x)) for x in nums) / n  # "running total: 123 + 45 = 168" with digit tokens
        tokens = int(20 + n * per + rng.integer(-10, 10))
        listed = ", ".join(map(str, nums))
        phrasings = [f"Add these numbers step by step, writing the running total on each line: {listed}",
                     "Compute the sum of the following numbers. Show the running total after each addition.\n"
                     + "\n".join(map(str, nums)),
                     f"sum these up and show your work line by line: {listed}",
                     f"What do {listed} add up to? Go one number at a time and keep a running total.",
                     f"Numbers: {' '.join(map(str, nums))}\nAdd them step by step, one running total per line."]
        user = phrasings[rng.integer(0, 4) if v else 0]  # variant 0: the suite's phrasing, no draw
        return Sample("reason", user, min(600, max(150, tokens)), style="suite" if v == 0 else "natural")
    if v == 4:  # word problems (every phrasing's numbers are drawn, one phrasing kept)
        a, b, c = rng.integer(40, 120), rng.integer(2, 9), rng.integer(5, 40)
        user = rng.choice([
            f"A train leaves {rng.choice(CITIES)} at {rng.integer(1, 11)}am travelling at {a} km/h. "
            f"Another leaves {rng.choice(CITIES)}, {a * b} km away, at the same time going {a + c} km/h towards it. "
            f"When do they meet? Show your reasoning.",
            f"A shop sells pens at ${b}.{rng.integer(10, 99)} each. How much do {c} pens cost with a "
            f"{rng.integer(5, 30)}% discount and {rng.integer(5, 20)}% tax? Think step by step.",
            f"{rng.choice(FIRST)} is {b} times as old as {rng.choice(FIRST)}. In {c} years the sum of their ages will be {a}. "
            f"How old are they now? Explain each step.",
            f"If {b} workers build a wall in {c} days, how long do {b + rng.integer(1, 5)} workers need? Walk me through it.",
            f"What's {rng.integer(5, 40)}% of {rng.integer(100, 9999)}, and what's that as a fraction of "
            f"{rng.integer(100, 999)}? Show the working.",
        ])
        return Sample("reason", user, rng.integer(120, 340))
    if v == 5:  # logic puzzles
        user = rng.choice([
            "If all bloops are razzies and all razzies are lazzies, are all bloops definitely lazzies? Explain step by step.",
            f"{rng.choice(FIRST)}, {rng.choice(FIRST)} and {rng.choice(FIRST)} finished a race. The first wasn't last, "
            f"the second beat the third, and the third wasn't first. What's the order? Reason it out.",
            "On an island, knights always tell the truth and knaves always lie. A says 'B is a knave.' "
            "B says 'A and I are the same kind.' What are A and B? Show your reasoning.",
            "Five people sit in a row. Ana is left of Ben, Cleo is in the middle, Dev is at an end and Eli is next to Dev. "
            "Who sits where? Work through the cases.",
            "You have 12 coins, one is fake and lighter. With a balance scale, how do you find it in 3 weighings? "
            "Explain the logic carefully.",
            "A bat and a ball cost $1.10 together; the bat costs $1.00 more than the ball. How much is the ball? "
            "Reason carefully before answering.",
        ])
        return Sample("reason", user, rng.integer(180, 480))
    if v == 6:  # algebra
        a, b, c = rng.integer(2, 12), rng.integer(1, 40), rng.integer(20, 200)
        user = rng.choice([f"Solve for x: {a}x + {b} = {c}. Show your work.", f"solve {a}x^2 - {b}x = {c} step by step",
                           f"Find the intersection of y = {a}x + {b} and y = {c} - x. Show every step.",
                           f"Compute the compound interest on ${c * 100} at {a}% per year for {rng.integer(2, 10)} years, "
                           f"step by step."])
        return Sample("reason", user, rng.integer(110, 320))
    if v == 7:  # proofs
        user = rng.choice(["Prove that the sum of two even numbers is even.", "Prove that there are infinitely many primes.",
                           "Show that the square root of 2 is irrational.", "Prove by induction that 1 + 2 + ... + n = n(n+1)/2.",
                           "Why is the sum of the angles of a triangle 180 degrees? Give a proof."])
        return Sample("reason", user, rng.integer(160, 420))
    if v == 8:  # probability
        d1, d2 = rng.integer(2, 6), rng.integer(7, 12)
        user = rng.choice([f"What's the probability of rolling a sum of {d2} with two dice? Explain how you count.",
                           f"I draw {d1} cards from a deck without replacement. What's the chance they're all hearts? "
                           f"Show the calculation.",
                           f"A test is {90 + d1}% accurate and the disease affects 1 in {d2 * 100} people. If I test positive, "
                           f"how likely am I to have it? Work it out step by step."])
        return Sample("reason", user, rng.integer(150, 380))
    # the system prompt asks for the working; the question alone looks like short arithmetic
    sys = rng.choice(["You are a math tutor. Always show your reasoning step by step before the final answer.",
                      "Think carefully and explain each step. Put the final answer on the last line."])
    a, b = rng.integer(12, 99), rng.integer(12, 99)
    q = rng.choice([f"{a} * {b} + {b} * {a // 2}?", f"is {a * b + 1} prime?", f"what is {a}% of {b * 37}?"])
    return Sample("reason", q, rng.integer(110, 300), system=sys)


def extra_phrasings(rng: Rng) -> Sample:
    """More word problems that ask for the reasoning."""
    a, b, c = rng.integer(3, 40), rng.integer(2, 12), rng.integer(50, 500)
    q = rng.choice([f"A farmer has {a + b} sheep and all but {b} run away. How many are left? Explain your reasoning.",
                    f"If it takes {b} machines {b} minutes to make {b} widgets, how long do {c} machines take to make "
                    f"{c} widgets? Think it through.",
                    f"Three friends split a bill of ${c} with a {rng.integer(10, 20)}% tip. How much does each pay? "
                    f"Show the math.",
                    f"Is {c * 2 + 1} a prime number? Explain how you check.",
                    f"Solve the system {b}x + y = {c} and x - y = {a}. Show each step.",
                    f"What is the probability of getting at least one six in {b} rolls of a die? Work it out.",
                    f"A recipe for {b} people needs {a} grams of flour. How much for {c // 10} people? Walk through it.",
                    f"If I save ${a} a week, how many weeks until I have ${c * 10}? Explain.",
                    "All labels on three boxes (apples, oranges, mixed) are wrong. You may take one fruit from one box. "
                    "How do you relabel them? Reason carefully.",
                    f"Which is bigger, {b}^{a % 7 + 2} or {a}^{b % 4 + 2}? Justify without a calculator."])
    return Sample("reason", q, rng.integer(120, 380))
