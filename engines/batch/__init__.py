"""A batch on the model: its KV cache (dynamic or static), the first encoder pass (prefill), stored
prompt prefixes, and the compiled model calls."""
