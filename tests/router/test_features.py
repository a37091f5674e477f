"""The router's request features (router.decision.features): one vector in NUMERIC_FEATURES order for
training and serving, text cut to a head and a tail, and the prompt's approximate size."""

from __future__ import annotations

import math

from router.decision.features import NUMERIC_FEATURES, PromptSize, approx_tokens, content_text, extract_features, features_of, prompt_size


def numeric(f) -> dict[str, float]:
    return dict(zip(NUMERIC_FEATURES, f.numeric))


def test_the_vector_reads_the_requests_shape():
    messages = [{"role": "system", "content": "You label reviews."},
                {"role": "user", "content": "first"},
                {"role": "user", "content": [{"type": "text", "text": "def f(x):\n    return 12 + 3.5"}]}]
    f = extract_features(messages, max_tokens=64, response_format={"type": "json_schema", "json_schema": {}},
                         tools=[{"type": "function"}] * 3, stop="\n")
    n = numeric(f)
    assert len(f.numeric) == len(NUMERIC_FEATURES)
    assert (n["has_max_tokens"], n["json_mode"], n["json_schema"], n["has_tools"], n["has_system"], n["has_code"]) == (1, 1, 1, 1, 1, 1)
    assert n["log_max_tokens"] == math.log1p(64) and n["log_n_tools"] == math.log1p(3) and n["log_user_turns"] == math.log1p(2)
    assert n["n_stop"] == 1.0 and n["log_n_numbers"] == math.log1p(2) and n["log_n_lines"] == math.log1p(2)
    assert f.user.startswith("def f(x)") and "You label reviews." in f.context and "first" in f.context


def test_a_bare_prompt_sets_no_flags_and_stop_sequences_count_at_most_four():
    n = numeric(extract_features([{"role": "user", "content": "Hi"}], stop=["a", "b", "c", "d", "e", "f"]))
    assert n["has_max_tokens"] == n["json_mode"] == n["has_tools"] == n["has_system"] == n["has_code"] == 0.0
    assert n["n_stop"] == 4.0


def test_long_text_is_cut_to_its_head_and_tail():
    text = "Summarize this. " + "x" * 5000 + " END"
    f = extract_features([{"role": "user", "content": text}])
    assert f.user.startswith("Summarize this.") and f.user.endswith(" END") and len(f.user) == 800 + 300 + len(" ... ")
    assert len(f.chars) == 250 + 80 + len(" ... ") and f.prompt_tokens == approx_tokens(text)


def test_a_records_features_are_the_live_requests():
    record = {"messages": [{"role": "user", "content": "Extract the city: Ada lives in Paris."}], "max_tokens": 16, "stop": ["\n"]}
    assert features_of(record) == extract_features(record["messages"], 16, None, None, ["\n"])


def test_the_prompt_size_counts_tools_in_the_head_and_content_parts_as_text():
    tools = [{"type": "function", "function": {"name": "f"}}]
    messages = [{"role": "system", "content": "s" * 40}, {"role": "user", "content": [{"type": "text", "text": "u" * 8}, {"type": "image_url"}]}]
    size = prompt_size(messages, tools)
    tool_tokens = approx_tokens('[{"type": "function", "function": {"name": "f"}}]')
    assert size == PromptSize(tokens=10 + 2 + tool_tokens, head_tokens=10 + tool_tokens)
    assert prompt_size(messages[1:]).head_tokens == 0  # one message: nothing before it to reuse
    assert content_text(None) == "" and content_text([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]) == "a\nb"
