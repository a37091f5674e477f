"""`tandem demo`: decode one chat prompt in block, verified and AR mode and print what each cost.

The default prompt is a structured job, as an agent sends it: a message and a JSON schema. Block
mode seeds its canvas with the schema's skeleton (engines.modes.seeded) and denoises only the values;
AR and verified mode decode under the schema's grammar. `--free` decodes the prompt as free text.
"""

from __future__ import annotations

import json

from engines.skeleton import json_schema_grammar, schema_instruction, template_for_schema
from tandem.bench.engines import load_engine
from engines.types import GenerationRequest

DEFAULT_PROMPT = "Extract the name and the city: Alice Smith moved to Paris last spring."
DEFAULT_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "city": {"type": "string"}}, "required": ["name", "city"]}


def main(args) -> int:
    engine, source = load_engine(args.checkpoint)
    prompt = args.prompt or DEFAULT_PROMPT
    schema = None if getattr(args, "free", False) else json.loads(args.schema) if getattr(args, "schema", None) else DEFAULT_SCHEMA
    print(f"checkpoint: {source}\nprompt: {prompt}\nschema: {json.dumps(schema) if schema else '(none: free text)'}\n")
    messages = [{"role": "user", "content": prompt}]
    structured = {}
    if schema is not None:  # as the gateway serves a json_schema request
        messages = [{"role": "system", "content": schema_instruction(schema)}] + messages
        structured = {"grammar": json_schema_grammar(schema), "skeleton": template_for_schema(schema)}
    for mode in ("block", "verified", "ar"):
        result = engine.generate(GenerationRequest(messages=messages, mode=mode, max_new_tokens=128, seed=0,
                                                   canvas=None if schema else min(64, engine.config.canvas_length), **structured))
        stats = result.stats.as_dict()
        print(f"[{mode}] {result.text!r}")
        print("   " + json.dumps({k: stats[k] for k in ("output_tokens", "forwards", "tokens_per_forward", "acceptance_rate", "latency_ms")}))
    return 0
