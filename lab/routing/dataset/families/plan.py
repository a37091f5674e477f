"""plan: turn a goal and a set of tools into a list of tool calls as JSON (block mode).

`generate` draws a goal with the tools it needs, adds 1-4 distractor tools, shuffles them, and picks
one of seven variants: goal + tool list in the message (variant 0 is the embedded task suite's
format), the tools in the OpenAI `tools` parameter with a bare request, a JSON plan asked for in
prose, a numbered step-by-step plan of a project (no tools), and a system prompt listing the tools.

Expected length: about 6 tokens plus 16-30 per needed call (distractors add none).
"""

from __future__ import annotations

from ..parts import fill, tool_specs
from ..pools import GOALS, TOOLS
from ..rng import Rng
from ..sample import Sample


def generate(rng: Rng) -> Sample:
    goal_t, needed = rng.choice(GOALS)
    goal = fill(rng, goal_t)
    extra = rng.sample([t for t in TOOLS if t not in needed], rng.integer(1, 4))  # distractors
    names = needed + extra
    rng.shuffle(names)
    tokens = 6 + sum(rng.integer(16, 30) for _ in needed)
    v = rng.integer(0, 6)
    if v <= 1:  # goal + tool signatures in the message
        tl = "\n".join(f"- {TOOLS[t]}" for t in names)
        user = (f"Goal: {goal}\nTools:\n{tl}\nReturn the tool calls as a JSON list." if v == 0 else
                rng.choice([f"You can use these tools:\n{tl}\n\nPlan the calls needed to {goal}. "
                            f"Respond with a JSON array of {{\"tool\", \"args\"}} objects.",
                            f"Tools available: {', '.join(names)}.\nTask: {goal}.\n"
                            f"List the function calls, in order, as JSON."]))
        return Sample("plan", user, tokens, style="suite" if v == 0 else "natural")
    if v <= 3:  # OpenAI tools parameter carries the tools; the user just asks
        user = rng.choice([f"{goal[0].upper()}{goal[1:]}.", f"Can you {goal}?", f"please {goal}",
                           f"I want to {goal}. Which tools would you call, in what order?"])
        return Sample("plan", user, tokens, tools=tool_specs(names),
                      system=rng.choice([None, "You are an agent. Plan tool calls before acting; output them as JSON."]))
    if v == 4:  # a JSON plan asked for in prose
        user = rng.choice([f"Which APIs would you call, in what order, to {goal}? "
                           f"Available: {', '.join(TOOLS[t] for t in names)}. JSON array only.",
                           f"Break down the steps to {goal} using the available functions ({', '.join(names)}). "
                           f"Return a JSON plan."])
        return Sample("plan", user, tokens, response_format={"type": "json_object"} if rng.chance(0.5) else None)
    if v == 5:  # a numbered plan of a project, no tools: about 12-20 tokens a step
        proj = rng.choice(["migrate our database from MySQL to Postgres", "launch a newsletter for {company}",
                           "move the team to a new office in {city}", "set up CI for a small Python repo",
                           "organize a hackathon for 50 people", "roll out SSO to all employees"])
        n = rng.integer(3, 7)
        # both phrasings fill the project (two fills drawn), one is kept
        user = rng.choice([f"Outline a plan with {n} numbered steps to {fill(rng, proj)}. Keep each step to one line.",
                           f"Give me a short step-by-step plan ({n} steps max) to {fill(rng, proj)}."])
        return Sample("plan", user, 10 + n * rng.integer(12, 20))
    # the system prompt lists the tools; the user message is only the goal
    sys = "You are an agent with access to: " + "; ".join(TOOLS[t] for t in names) + ". Reply with the list of calls as JSON."
    return Sample("plan", f"{goal[0].upper()}{goal[1:]}", tokens, system=sys)
