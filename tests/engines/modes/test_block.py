"""Block mode against transformers' own `generate()` on the same weights, and its per-request options."""

import pytest
import torch

from engines import GenerationRequest
from tests.engines.factories import PROMPTS, chat


def library_generate(engine, prompt_ids, seed, max_new_tokens, steps):
    """The reference: transformers' DiffusionGemma generate(), cut at the first eos."""
    torch.manual_seed(seed)
    out = engine.model.generate(
        torch.tensor([prompt_ids]), max_new_tokens=max_new_tokens, max_denoising_steps=steps
    )
    tokens = out.sequences[0, len(prompt_ids) :].tolist()
    cut = next((i for i, t in enumerate(tokens) if t in engine.eos_ids), len(tokens))
    return tokens[:cut], float(out.tokens_per_forward[0])


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("prompt", PROMPTS[:3])
def test_identical_tokens_to_library_generate_at_batch_1(engine, prompt, seed):
    # Same weights, same seed: the draws come in the same order (canvas noise, then per step a
    # multinomial over the canvas and the renoise), so the tokens are identical, over several canvases.
    ids = engine.prompt_ids(chat(prompt))
    canvas = engine.config.canvas_length
    expected, _ = library_generate(engine, ids, seed, max_new_tokens=3 * canvas, steps=8)
    result = engine.generate(GenerationRequest(prompt=ids, mode="block", seed=seed, max_new_tokens=3 * canvas, max_denoising_steps=8))
    assert result.token_ids == expected


def test_same_seed_same_output_different_seed_differs(engine):
    make = lambda seed: engine.generate(chat(PROMPTS[0], mode="block", seed=seed, max_new_tokens=32)).token_ids  # noqa: E731
    assert make(3) == make(3)
    assert make(3) != make(4)


def test_small_canvas_is_used_and_counted(engine):
    result = engine.generate(chat(PROMPTS[1], mode="block", seed=0, canvas=8, max_new_tokens=20, stop_token_ids=[]))
    assert result.finish_reason == "length"
    assert len(result.token_ids) == 20
    assert len(result.stats.steps_per_canvas) == 3  # ceil(20 / 8) canvases
    assert result.stats.encoder_calls == 3  # prefill + two commits
    assert result.stats.decoder_calls == sum(result.stats.steps_per_canvas)
    # each canvas is timed, one after another (the trace's canvas spans)
    times = result.stats.canvas_times_ns
    assert len(times) == 3 and all(began < ended for began, ended in times)
    assert all(times[i][1] <= times[i + 1][0] for i in range(2))


def test_tokens_per_forward_counts_every_call_after_prefill(engine):
    result = engine.generate(chat(PROMPTS[2], mode="block", seed=0, max_new_tokens=32, max_denoising_steps=2, stop_token_ids=[]))
    assert result.stats.decoder_calls == 2
    assert result.stats.tokens_per_forward == pytest.approx(32 / 2)


def test_stop_string_cuts_text(engine):
    free = engine.generate(chat(PROMPTS[0], mode="block", seed=7, max_new_tokens=32, stop_token_ids=[]))
    stop = free.text[5:8]
    assert stop.strip(), "need a visible stop string from the free-running text"
    result = engine.generate(chat(PROMPTS[0], mode="block", seed=7, max_new_tokens=32, stop_token_ids=[], stop=[stop]))
    assert result.finish_reason == "stop"
    assert result.text == free.text[: free.text.find(stop)]
    assert stop not in result.text


def test_stop_token_ends_the_answer(engine):
    free = engine.generate(chat(PROMPTS[0], mode="block", seed=7, max_new_tokens=32, stop_token_ids=[]))
    stop_id = free.token_ids[10]
    first = free.token_ids.index(stop_id)
    result = engine.generate(chat(PROMPTS[0], mode="block", seed=7, max_new_tokens=32, stop_token_ids=[stop_id]))
    assert result.finish_reason == "stop"
    assert result.token_ids == free.token_ids[:first]


def test_rows_that_stop_leave_the_computed_batch_and_keep_their_tokens(monkeypatch):
    """A canvas's steps compute only the rows still running at the last read of the stop flags
    (engines.modes.block._Computed), and each row writes what it writes alone. The shipped checkpoint:
    its rows stop at different steps (a random model's never become confident)."""
    from engines import DiffusionEngine
    from engines.batch.sequence_batch import SequenceBatch
    from engines.defaults import SHIPPED_CHECKPOINT

    engine = DiffusionEngine.from_checkpoint(SHIPPED_CHECKPOINT)
    reqs = [chat(p, mode="block", seed=i, canvas=64, max_new_tokens=64, max_denoising_steps=12, stop_token_ids=[])
            for i, p in enumerate(PROMPTS[:4])]
    alone = [engine.generate(r).token_ids for r in reqs]
    rows_per_call = []
    real = SequenceBatch.denoise

    def counted(self, canvas, *args, **kwargs):
        rows_per_call.append(canvas.shape[0])
        return real(self, canvas, *args, **kwargs)

    monkeypatch.setattr(SequenceBatch, "denoise", counted)
    results = engine.generate_batch(reqs)
    steps = [r.stats.steps_per_canvas[0] for r in results]
    assert len(set(steps)) > 1, f"the rows should stop at different steps: {steps}"
    assert rows_per_call == [sum(s > k for s in steps) for k in range(max(steps))]
    assert [r.token_ids for r in results] == alone
