"""JSON Schemas that arrive in requests (`response_format.json_schema.schema`): checked once,
bounded, and never allowed to reach outside the process.

A schema is request data, so it must not make the gateway fetch anything: the `jsonschema`
library resolves an unknown `$ref` URI by downloading it unless it is given a registry of its own.
`compile_schema` therefore

- walks the schema without recursion and refuses one nested deeper than `MAX_DEPTH` or larger
  than `MAX_BYTES` (deep schemas made the library's recursive walk raise RecursionError);
- refuses every `$ref` / `$dynamicRef` / `$recursiveRef` that is not local (`#...`), naming it;
- refuses a string `pattern` that matches nothing shorter than MAX_PATTERN_CHARS characters
  (`^a{1000000}$`): no answer could hold it, and the grammar library spends seconds building it;
- builds the validator on an empty `referencing.Registry` (no retrieval: an unknown URI is an
  error, never a download) and checks the schema against its metaschema and every local
  reference against the schema.

The gateway runs `compile_schema` and `SchemaCheck.matches` in a worker thread with a deadline
(`check_off_loop`), so schema work never blocks the event loop.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import jsonschema
import referencing
import referencing.exceptions
import referencing.jsonschema

from engines.errors import InvalidRequestError

MAX_DEPTH = 32  # nesting of objects and arrays in a schema (OpenAI's strict mode allows 10 levels of objects)
MAX_BYTES = 128 * 1024  # the schema as compact JSON
MAX_PATTERN_CHARS = 4096  # the shortest string a `pattern` matches may be at most this long
CHECK_TIMEOUT_S = 2.0  # one compile or one validation; a pattern that backtracks forever is cut off here
REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")
DATA_KEYWORDS = ("const", "enum", "default", "examples")  # their values are instances, not schemas
PARAM = "response_format.json_schema.schema"

# Schema work runs here, not in the default executor, so a stuck validation cannot starve the
# threads the rest of the gateway uses (decision logging, policy reads).
_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="tandem-schema")

T = TypeVar("T")


def _refused(message: str) -> InvalidRequestError:
    return InvalidRequestError(message, code="invalid_schema", param=PARAM)


def _walk(schema: Any) -> list[str]:
    """Every reference in `schema` (iteratively, depth-bounded). Raises InvalidRequestError on a non-local
    reference or nesting deeper than MAX_DEPTH."""
    refs, stack = [], [(schema, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _refused(f"schema is nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
            continue
        if not isinstance(node, dict):
            continue
        for key, value in node.items():
            if key in REF_KEYWORDS and isinstance(value, str):
                if not value.startswith("#"):
                    raise _refused(f"{key} {value!r} is not local: only references into the schema itself (#/$defs/...) "
                                   "are resolved; nothing is fetched")
                refs.append(value)
            elif key not in DATA_KEYWORDS:
                if key == "pattern" and isinstance(value, str):
                    _check_pattern(value)
                stack.append((value, depth + 1))
    return refs


def _check_pattern(pattern: str) -> None:
    """Refuse a pattern whose shortest match is over MAX_PATTERN_CHARS (by Python's regex parser;
    one it cannot parse is left to the grammar library, which names what it does not support)."""
    try:
        shortest = re._parser.parse(pattern).getwidth()[0]
    except Exception:
        return
    if shortest > MAX_PATTERN_CHARS:
        raise _refused(f"pattern {pattern[:40]!r}{'...' if len(pattern) > 40 else ''} matches nothing shorter than {shortest} "
                       f"characters; at most {MAX_PATTERN_CHARS}")


@dataclass(frozen=True)
class SchemaCheck:
    """A compiled response_format: whether an answer is a JSON object (and matches the schema)."""

    validator: Any | None  # a jsonschema validator, or None for json_object (any JSON object)

    def matches(self, text: str) -> bool:
        try:
            value = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            return False
        if self.validator is None:
            return isinstance(value, dict)
        try:
            return self.validator.is_valid(value)
        except (referencing.exceptions.Unresolvable, RecursionError):
            return False


def compile_schema(schema: dict | None) -> SchemaCheck:
    """Check `schema` (None: json_object) and build its validator. Raises InvalidRequestError (400) naming
    what is wrong; never fetches a URL or reads a file."""
    if schema is None:
        return SchemaCheck(None)
    if not isinstance(schema, dict):
        raise _refused("schema must be a JSON object")
    refs = _walk(schema)  # depth first: json.dumps of a very deep schema would recurse
    if len(json.dumps(schema, separators=(",", ":"))) > MAX_BYTES:
        raise _refused(f"schema is over {MAX_BYTES} bytes")
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise _refused(f"not a valid JSON Schema: {exc.message}") from None
    validator = cls(schema, registry=referencing.Registry())  # empty registry: nothing is retrieved
    root = referencing.Resource.from_contents(schema, default_specification=referencing.jsonschema.DRAFT202012)
    resolver = referencing.Registry().resolver_with_root(root)
    for ref in refs:
        try:
            resolver.lookup(ref)
        except referencing.exceptions.Unresolvable:
            raise _refused(f"$ref {ref!r} does not point into the schema") from None
    return SchemaCheck(validator)


async def check_off_loop(fn: Callable[..., T], *args) -> T:
    """Run schema work in the schema pool with a deadline; a timeout is the client's 400."""
    loop = asyncio.get_running_loop()
    try:
        return await asyncio.wait_for(loop.run_in_executor(_pool, fn, *args), timeout=CHECK_TIMEOUT_S)
    except asyncio.TimeoutError:
        raise _refused(f"schema work took over {CHECK_TIMEOUT_S:.0f} s (a pattern that backtracks?)") from None
