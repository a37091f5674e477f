"""The open-vocabulary families ("schema", "toolcall", "label"): deterministic, answers that parse,
follow their schema and copy values from the prompt, splits that share almost no value, labels cued
by exactly one phrase, per-field scoring, and prompts that fit the shipped tokenizer's budget."""

from __future__ import annotations

import json
import random
import statistics
from collections import Counter

import jsonschema
import pytest
from transformers import AutoTokenizer

from engines.defaults import SHIPPED_CHECKPOINT
from lab.model.open_tasks import LABEL_CUES, field_matches, flatten_fields, score_fields
from lab.model.tasks import FAMILIES, OPEN_FAMILIES, SHORT_FAMILIES, TASK_FAMILIES, generate_suite, parse_tool_calls, score, tool_call_text
from lab.model.train import OPT_IN_FAMILIES, TrainConfig, family_weight


@pytest.fixture(scope="module")
def suites():
    return {f: generate_suite(200, "train", 0, (f,)) for f in OPEN_FAMILIES}


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(SHIPPED_CHECKPOINT, local_files_only=True)


def _user(item) -> str:
    return item.messages[-1]["content"]


def _key_paths(obj: dict, schema: dict, prefix: str = "") -> list[str]:
    """Keys of `obj`, nested flattened, in the order the schema's `properties` give (checked on the way)."""
    assert list(obj) == list(schema["properties"]), "keys follow the schema's properties order"
    out = []
    for k, v in obj.items():
        sub = schema["properties"][k]
        out += _key_paths(v, sub, f"{prefix}{k}.") if sub.get("type") == "object" else [f"{prefix}{k}"]
    return out


def _copied_strings(obj: dict, schema: dict) -> list[str]:
    """String values that must be copied from the text (enum choices are a closed set)."""
    out = []
    for k, v in obj.items():
        sub = schema["properties"][k]
        if sub.get("type") == "object":
            out += _copied_strings(v, sub)
        elif isinstance(v, list):
            out += v
        elif isinstance(v, str) and "enum" not in sub:
            out.append(v)
    return out


def test_registered_as_opt_in_short_families_at_the_end():
    assert SHORT_FAMILIES[-3:] == OPEN_FAMILIES == ("schema", "toolcall", "label")
    assert all(f in FAMILIES and not FAMILIES[f].long and f not in TASK_FAMILIES and f in OPT_IN_FAMILIES for f in OPEN_FAMILIES)
    cfg = TrainConfig()
    assert all(family_weight(cfg, f) == 0.0 for f in OPEN_FAMILIES)
    # zero weights at the end of the list draw exactly what the shorter list drew: old batches replay
    old = SHORT_FAMILIES[:-3]
    for seed in range(200):
        a, b = random.Random(seed), random.Random(seed)
        assert a.choices(SHORT_FAMILIES, [family_weight(cfg, f) for f in SHORT_FAMILIES]) == b.choices(old, [family_weight(cfg, f) for f in old])
        assert a.random() == b.random()


@pytest.mark.parametrize("family", OPEN_FAMILIES)
def test_same_seed_same_items(family):
    a, b = generate_suite(20, "val", 3, (family,)), generate_suite(20, "val", 3, (family,))
    assert [(i.messages, i.tools, i.answer, i.meta) for i in a] == [(i.messages, i.tools, i.answer, i.meta) for i in b]
    assert [i.answer for i in a] != [i.answer for i in generate_suite(20, "val", 4, (family,))]


@pytest.mark.parametrize("family", OPEN_FAMILIES)
def test_answers_parse_match_fields_and_follow_the_schema(family, suites):
    for item in suites[family]:
        schema, fields = item.meta["schema"], item.meta["fields"]
        if family == "toolcall":
            calls = parse_tool_calls(item.answer)
            assert calls == item.meta["calls"] and len(calls) == 1 and calls[0]["arguments"] == fields
            assert item.answer == tool_call_text(calls)
        else:
            assert item.messages[0]["role"] == "system" and json.dumps(schema, separators=(",", ":")) in item.messages[0]["content"]
            assert json.loads(item.answer) == fields and item.answer == json.dumps(fields, ensure_ascii=False)
        assert item.answer.isascii() and _user(item).isascii()
        jsonschema.validate(fields, schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
        assert set(schema.get("required", [])) <= set(fields), "every property is answered, optional ones too"
        paths = _key_paths(fields, schema)
        assert paths == list(flatten_fields(fields))
        for path, value in flatten_fields(fields).items():  # every value is copied from (or named in) the text
            shown = [f"{value:.2f}", f"{value:,.2f}"] if isinstance(value, float) else [str(value)] if not isinstance(value, (bool, list)) else None
            if shown is not None:
                assert any(s in _user(item) for s in shown), (path, value, _user(item))
            if isinstance(value, float):
                assert json.dumps(value) == f"{value:.2f}", "amounts keep their two decimals in JSON"


def test_schema_items_vary_in_shape(suites):
    items = suites["schema"]
    leaves = Counter(len(flatten_fields(i.meta["fields"])) for i in items)
    assert set(leaves) == {2, 3, 4, 5, 6}
    types = Counter(p.get("type") for i in items for p in i.meta["schema"]["properties"].values())
    assert {"string", "integer", "number", "object", "array"} <= set(types)
    assert sum("enum" in p for i in items for p in i.meta["schema"]["properties"].values()) > 20
    nested = sum(any(p.get("type") == "object" for p in i.meta["schema"]["properties"].values()) for i in items) / len(items)
    arrays = sum(any(p.get("type") == "array" for p in i.meta["schema"]["properties"].values()) for i in items) / len(items)
    assert 0.08 < nested < 0.3 and 0.07 < arrays < 0.25
    assert any(len(i.meta["schema"]["required"]) < len(i.meta["schema"]["properties"]) for i in items), "some properties are optional"
    assert any(any(c.isupper() for c in k) for i in items for k in i.meta["fields"]), "camelCase keys too"
    keys = {k for i in items for k in flatten_fields(i.meta["fields"])}
    assert len(keys) > 100, "field names come from a large pool"


def test_splits_share_almost_no_value():
    values = {s: [v for i in generate_suite(200, s, 0, ("schema",)) for v in _copied_strings(i.meta["fields"], i.meta["schema"])] for s in ("train", "test")}
    train = set(values["train"])
    shared = [v for v in values["test"] if v in train]
    assert len(values["test"]) > 400 and len(shared) / len(values["test"]) < 0.02, shared


def test_label_answers_are_in_the_set_and_the_text_cues_exactly_one(suites):
    for _, cues in LABEL_CUES.values():  # no cue contains another label's cue
        for a, phrases in cues.items():
            for b, others in cues.items():
                assert a == b or not any(p.lower() in q.lower() for p in phrases for q in others), (a, b)
    sizes = Counter()
    for item in suites["label"]:
        (key, label), = item.meta["fields"].items()
        labels = item.meta["labels"]
        assert label in labels and item.meta["schema"]["properties"][key]["enum"] == labels and 2 <= len(labels) <= 6
        assert ", ".join(labels) in _user(item)
        cues = next(c for keys, c in LABEL_CUES.values() if label in c and key in keys)
        text = _user(item).lower()
        cued = [x for x in labels if any(p.lower() in text for p in cues[x])]
        assert cued == [label], (cued, item.prompt)
        sizes[len(labels)] += 1
    assert set(sizes) == {2, 3, 4, 5, 6}


def test_toolcall_names_an_offered_tool_the_request_asks_for(suites):
    counts, params = Counter(), Counter()
    for item in suites["toolcall"]:
        names = [t["name"] for t in item.tools]
        assert item.meta["tool"] in names and len(set(names)) == len(names)
        target = next(t for t in item.tools if t["name"] == item.meta["tool"])
        assert target["parameters"] == item.meta["schema"]
        noun = target["description"].rstrip(".").split(" a ")[-1].split(" an ")[-1]
        assert noun in _user(item), (noun, _user(item))
        counts[len(item.tools)] += 1
        params[len(item.meta["fields"])] += 1
    assert set(counts) <= {1, 2, 3, 4, 5} and {1, 2, 3} <= set(counts)
    assert set(params) == {1, 2, 3, 4}
    kinds = {type(v) for i in suites["toolcall"] for v in i.meta["fields"].values()}
    assert kinds == {str, int, float, bool}


@pytest.mark.parametrize("family", OPEN_FAMILIES)
def test_scorers_reward_the_reference_and_count_fields(family, suites):
    for item in suites[family][:60]:
        want = flatten_fields(item.meta["fields"])
        assert score(item, item.answer).exact and score_fields(item, item.answer) == 1.0
        assert field_matches(item, item.answer) == (len(want), len(want))
        assert score_fields(item, "not json {") == 0.0 and score_fields(item, "") == 0.0
        # one leaf wrong: one field short, and not exact
        broken = json.loads(json.dumps(item.meta["fields"]))
        first = next(iter(broken))
        target = broken[first] if isinstance(broken[first], dict) else broken
        leaf = first if target is broken else next(iter(target))
        target[leaf] = "wrong value" if target[leaf] != "wrong value" else "other"
        output = tool_call_text([{"name": item.meta["tool"], "arguments": broken}]) if family == "toolcall" else json.dumps(broken)
        assert field_matches(item, output) == (len(want) - 1, len(want))
        s = score(item, output)
        assert not s.exact and s.family_score == pytest.approx((len(want) - 1) / len(want)) and s.family_score < 1.0
    if family == "toolcall":
        item = suites[family][0]
        assert score_fields(item, tool_call_text([{"name": "no_such_tool", "arguments": item.meta["fields"]}])) == 0.0
        assert score_fields(item, item.answer + item.answer) == 0.0, "one call is the answer"


def test_numbers_must_keep_their_json_type():
    item = next(i for i in generate_suite(50, "train", 0, ("schema",)) if any(isinstance(v, int) and not isinstance(v, bool) for v in i.meta["fields"].values()))
    key = next(k for k, v in item.meta["fields"].items() if isinstance(v, int) and not isinstance(v, bool))
    as_float = dict(item.meta["fields"], **{key: float(item.meta["fields"][key])})
    right, total = field_matches(item, json.dumps(as_float))
    assert right == total - 1


def test_prompts_fit_the_token_budget(suites, tok):
    """The chat-templated prompt is under 400 tokens for 95% of items (training pads a batch to its longest row)."""
    report = {}
    for family, items in suites.items():
        prompts = [len(tok.apply_chat_template(i.messages, tools=i.tools, add_generation_prompt=True, tokenize=True)["input_ids"]) for i in items]
        answers = [i.count_tokens(tok) for i in items]
        assert sum(p < 400 for p in prompts) / len(prompts) >= 0.95, (family, sorted(prompts)[-15:])
        assert max(answers) < 256, "an answer fits the largest short canvas"
        assert statistics.median(len(_user(i).split()) for i in items) < 120
        report[family] = (statistics.median(prompts), statistics.median(answers))
    print("median prompt / answer tokens:", report)


def test_copy_is_an_auxiliary_training_family_outside_every_suite(tok):
    """"copy" (key: value lines -> that JSON object) trains the copying of unseen values; it is drawn
    only when `family_weights` names it, and no suite, evaluation or router data set contains it."""
    from lab.model.tasks import AUX_FAMILIES, sample_item
    from lab.model.train import make_batch

    assert "copy" in AUX_FAMILIES and "copy" not in FAMILIES and "copy" in OPT_IN_FAMILIES
    assert "copy" not in {i.family for i in generate_suite(2, "val", 0)}
    rng = random.Random(5)
    for _ in range(200):
        item = sample_item("copy", rng)
        obj = json.loads(item.answer)
        lines = [line for line in _user(item).splitlines() if ": " in line]
        assert [f"{k}: {v}" for k, v in obj.items()] == lines, "the answer is the lines, keys and values verbatim, in order"
        assert score_fields(item, item.answer) == 1.0 and score_fields(item, "{}") == 0.0
    plain = TrainConfig(out="unused")
    weighted = TrainConfig(out="unused", family_weights=plain.family_weights | {"copy": 4.0})
    drawn = [f for step in range(6) for f in make_batch(tok, weighted, step).families]
    assert "copy" in drawn
    assert not any("copy" in make_batch(tok, plain, step).families for step in range(6))


def test_wild_messages_hold_their_values_and_never_the_realistic_sets(tok):
    """"wild" (lab/model/wild_tasks.py: e-mails, notices, chat messages with values people write and
    same-kind distractors) is opt-in, trained in tool steps, and its answers are copies of the text:
    every string value verbatim in the user turn, the object valid under the schema. None of the
    hand-written realistic requests' values (tandem/bench/data) is ever generated."""
    from tandem.bench.structured import REALISTIC
    from lab.model.tasks import AUX_FAMILIES, sample_item
    from lab.model.train import TOOL_STEP_FAMILIES, make_batch

    assert "wild" in AUX_FAMILIES and "wild" in OPT_IN_FAMILIES and "wild" in TOOL_STEP_FAMILIES and "wild" not in FAMILIES
    held_out = set()
    for line in REALISTIC.read_text().splitlines():
        row = json.loads(line)
        held_out |= {v for v in (row.get("want") or row["want_call"]["arguments"]).values() if isinstance(v, str) and len(v) > 6}
    rng, distracted = random.Random(7), 0
    for i in range(3000):  # many draws, so rare paths run (a one-letter first name once crashed the accent); 300 checked
        item = sample_item("wild", rng)
        if i >= 300:
            continue
        obj, user = json.loads(item.answer), _user(item)
        jsonschema.validate(obj, item.meta["schema"])
        assert all(v in user for v in obj.values() if isinstance(v, str)) and score_fields(item, item.answer) == 1.0
        assert not held_out & {v for v in obj.values() if isinstance(v, str)}
        distracted += any(w in user for w in ("copied on", "do not write", "handled by", "left our", "replaces", "earlier number",
                                              "late fee", "already paid", "deposit", "no longer", "fax", "Evenings", "copy went"))
    assert distracted > 60  # about half the items carry a value of an asked kind in another role
    plain = TrainConfig(out="unused", family_weights={"schema": 1.0, "extract": 1.0}, tool_batch_prob=0.5, batch_short=6, batch_tool=4)
    wild = TrainConfig(**{**plain.__dict__, "family_weights": plain.family_weights | {"wild": 2.0}})
    assert "wild" in {f for step in range(8) for f in make_batch(tok, wild, step).families}
    assert not any("wild" in make_batch(tok, plain, step).families for step in range(8))


def test_copy_first_steps_train_copy_alone_then_the_mix_as_before(tok):
    import torch

    from lab.model.train import make_batch

    plain = TrainConfig(out="unused", family_weights={"schema": 1.0, "extract": 1.0}, tool_batch_prob=0.5, batch_short=6, batch_tool=4)
    first = TrainConfig(**{**plain.__dict__, "copy_first_steps": 3})
    assert all(set(make_batch(tok, first, step).families) == {"copy"} for step in range(3))
    for step in range(3, 8):  # after the copy steps, the batches the config without them draws
        a, b = make_batch(tok, first, step), make_batch(tok, plain, step)
        assert a.families == b.families and torch.equal(a.input_ids, b.input_ids)
