"""`tandem demo`: decode one chat prompt in block, verified and AR mode and print what each cost."""

from __future__ import annotations

import json

from engines.tools.bench import load_engine
from engines.types import GenerationRequest

DEFAULT_PROMPT = "Extract the name and the city as JSON: Alice Smith moved to Paris last spring."


def main(args) -> int:
    engine, source = load_engine(args.checkpoint)
    prompt = args.prompt or DEFAULT_PROMPT
    print(f"checkpoint: {source}\nprompt: {prompt}\n")
    for mode in ("block", "verified", "ar"):
        result = engine.generate(
            GenerationRequest(messages=[{"role": "user", "content": prompt}], mode=mode, max_new_tokens=128, seed=0, canvas=min(64, engine.config.canvas_length))
        )
        stats = result.stats.as_dict()
        print(f"[{mode}] {result.text!r}")
        print("   " + json.dumps({k: stats[k] for k in ("output_tokens", "forwards", "tokens_per_forward", "acceptance_rate", "latency_ms")}))
    return 0
