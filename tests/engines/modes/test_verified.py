"""Verified mode is lossless: under greedy decoding it returns exactly AR mode's tokens.

The counts these tests bound (accepted tokens, probes, waits) are derived from the scripted
drafters' phases and from engines.modes.verified_drafting's constants (a draft doubles after a full accept; a
probe is paid for by credit that tokens earn at ALLOWANCE each), not copied from one run."""

import pytest
import torch

import engines.modes.verified
from engines.batch.sequence_batch import SequenceBatch
from engines import GenerationRequest
from engines.modes.verified_drafting import ALLOWANCE, FIRST_CANVAS, LONG_ANSWER, MIN_DRAFT, MIN_STEPS, DraftCosts
from tests.engines.factories import PROMPTS, chat


@pytest.fixture(autouse=True)
def drafts_on_the_random_model(request):
    """Tests of drafting's bookkeeping on the random model let its rows draft (`drafts_anywhere`);
    tests on the shipped model keep the rule."""
    if "shipped" not in request.fixturenames:
        request.getfixturevalue("drafts_anywhere")


class CheapDrafts(DraftCosts):
    """Drafts priced at almost nothing: every round pays, so rows draft every round whatever they accept."""

    def step(self, canvas: int, batch: int) -> float:
        return 0.01


@pytest.mark.parametrize(("prompt", "max_new_tokens"), [(p, n) for p, n in zip(PROMPTS, [1, 7, 40, 75, 3, 33, 12, 64])])
def test_verified_equals_ar_greedy(engine, prompt, max_new_tokens):
    # A random model's drafts rarely agree with its AR choice: this exercises the correction path
    # (one token per round, so several canvases' worth). Two denoising steps keep it fast.
    ar = engine.generate(chat(prompt, mode="ar", max_new_tokens=max_new_tokens))
    verified = engine.generate(chat(prompt, mode="verified", max_new_tokens=max_new_tokens, seed=0, max_denoising_steps=2))
    assert verified.token_ids == ar.token_ids
    assert verified.finish_reason == ar.finish_reason


class LoneDrafts(DraftCosts):
    """Drafts priced as for a row alone, whatever the batch: rows draft from their first token."""

    def step(self, canvas: int, batch: int) -> float:
        return super().step(canvas, 1)


def oracle_drafter(engine, corrupt_every):
    """A drafter that proposes AR mode's own greedy continuation with some positions corrupted, so
    rounds accept long prefixes of different lengths per row (what a trained model's drafts do)."""

    def draft(batch, rows, params):
        canvas = torch.zeros(batch.size, params.canvas, dtype=torch.long)
        for b, row in enumerate(rows):
            probe = SequenceBatch(engine.model, 1, batch.mask.device)
            logits = probe.encode(torch.tensor([row.prompt_ids + row.output]), logits="last")
            for i in range(params.canvas):
                token = int(logits[0].argmax())
                corrupt = (i + 3 * b + len(row.output)) % corrupt_every == corrupt_every - 1
                canvas[b, i] = (token + 1) % engine.vocab_size if corrupt else token
                logits = probe.encode(torch.tensor([[token]]), logits="last")
        return canvas, torch.full((batch.size,), params.steps), torch.zeros(batch.size, dtype=torch.bool)

    return draft


@pytest.mark.parametrize("corrupt_every", [4, 13, 1000])
def test_accepted_prefixes_keep_output_equal_to_ar(engine, monkeypatch, corrupt_every):
    requests = [chat(p, mode="verified", max_new_tokens=40, stop_token_ids=[], canvas=16) for p in PROMPTS[:4]]
    monkeypatch.setattr(engines.modes.verified, "draft_canvas", oracle_drafter(engine, corrupt_every))
    monkeypatch.setattr(engine, "draft_costs", CheapDrafts())
    monkeypatch.setattr(engine, "lookup", False)  # the calls compared are the drafts' against AR's one per token
    with torch.inference_mode():
        results = engine.generate_batch(requests)  # rows accept different counts: ragged cache slots
    for request, result in zip(requests, results):
        ar = engine.generate(GenerationRequest(messages=request.messages, mode="ar", max_new_tokens=40, stop_token_ids=[]))
        assert result.token_ids == ar.token_ids
        assert result.stats.accepted > 0
        assert result.stats.encoder_calls < ar.stats.encoder_calls


def test_verified_requests_of_different_canvases_decode_as_one_batch_and_equal_ar(engine, monkeypatch):
    # The router sizes a request's canvas by its predicted length; verified caps only the row's
    # drafts by it, so requests of three sizes batch together (keyed apart they took turns).
    monkeypatch.setattr(engines.modes.verified, "draft_canvas", oracle_drafter(engine, corrupt_every=7))
    monkeypatch.setattr(engine, "draft_costs", CheapDrafts())
    runs = []
    run = engine.run
    monkeypatch.setattr(engine, "run", lambda rows, *a, **k: (runs.append(len(rows)), run(rows, *a, **k))[1])
    requests = [chat(p, mode="verified", max_new_tokens=30, stop_token_ids=[], canvas=c) for p, c in zip(PROMPTS[:3], (8, 16, None))]
    results = engine.generate_batch(requests)
    assert runs == [3]
    for request, result in zip(requests, results):
        ar = engine.generate(GenerationRequest(messages=request.messages, mode="ar", max_new_tokens=30, stop_token_ids=[]))
        assert result.token_ids == ar.token_ids
        assert result.stats.accepted > 0


def test_a_draft_wrong_at_one_token_is_kept_past_it_in_the_same_round(engine, monkeypatch):
    # The draft is AR's answer with positions 5 and 11 wrong: the commit pass accepts 0-4 and writes
    # AR's token 5; the pass that encodes it checks the rest and keeps 6-10 (AR's tokens). One
    # round writes all 11 tokens, one of them by AR; without the rest, AR steps would write 6-10.
    monkeypatch.setattr(engines.modes.verified, "draft_canvas", oracle_drafter(engine, corrupt_every=6))
    monkeypatch.setattr(engine, "draft_costs", CheapDrafts())
    request = chat(PROMPTS[1], mode="verified", max_new_tokens=11, stop_token_ids=[], canvas=16)
    result = engine.generate(request)
    ar = engine.generate(GenerationRequest(messages=request.messages, mode="ar", max_new_tokens=11, stop_token_ids=[]))
    assert result.token_ids == ar.token_ids
    assert len(result.stats.steps_per_canvas) == 1 and result.stats.accepted == 10 and result.stats.ar_tokens == 1
    assert result.stats.encoder_calls == 3 < ar.stats.encoder_calls  # the prefill, the commit pass, the rest's pass


def test_rejected_draft_slots_are_cropped_from_the_cache(engine, monkeypatch):
    # Rejected draft tokens must leave the KV cache, or a long answer would fill it (and a
    # sliding-window layer) with canvases of garbage: the cache holds prompt + output only.
    from engines.batch.sequence_batch import SequenceBatch
    from engines.batch.static_batch import StaticSequenceBatch

    seen = []

    def spy_on(original):
        def spy(batch, length):
            original(batch, length)
            seen.append((batch.slots, batch.cache.get_seq_length()))

        return spy

    for cls in (SequenceBatch, StaticSequenceBatch):  # the eager layout and a compiled engine's slot cache
        monkeypatch.setattr(cls, "keep_slots", spy_on(cls.__dict__["keep_slots"]))
    monkeypatch.setattr(engines.modes.verified, "draft_canvas", oracle_drafter(engine, corrupt_every=5))
    monkeypatch.setattr(engine, "draft_costs", CheapDrafts())
    result = engine.generate(chat(PROMPTS[0], mode="verified", max_new_tokens=20, canvas=8, stop_token_ids=[]))
    assert seen, "verified mode never trimmed its cache"
    prompt = len(engine.prompt_ids(chat(PROMPTS[0])))
    slots, cached = seen[-1]
    assert slots == cached <= prompt + result.stats.output_tokens


def test_agreement_counts_the_prefix_ar_would_accept(engine):
    request = chat(PROMPTS[1], mode="ar", max_new_tokens=12, stop_token_ids=[])
    answer = engine.generate(request).token_ids
    assert engine.agreement(request, answer) == len(answer)  # AR's own answer: all accepted
    corrupted = answer[:5] + [(answer[5] + 1) % engine.vocab_size] + answer[6:]
    assert engine.agreement(request, corrupted) == 5
    assert engine.agreement(request, []) == 0


def scripted_drafter(engine, good, log):
    """A drafter whose quality follows the row's output so far: `good(row)` true -> AR's own greedy
    continuation (all accepted); false -> a draft that starts unsure (abandoned at its first step).
    `log` gets (row output length, good) for every draft."""
    oracle = oracle_drafter(engine, corrupt_every=10**9)

    def draft(batch, rows, params):
        canvas, steps, _ = oracle(batch, rows, params)
        wanted = torch.tensor([good(r) for r in rows])
        log.extend((len(r.output), bool(w)) for r, w in zip(rows, wanted))
        canvas[~wanted] = (canvas[~wanted] + 1) % engine.vocab_size
        steps[~wanted] = 1
        return canvas, steps, ~wanted

    return draft


def most_probes(tokens: int, costs: DraftCosts) -> float:
    """The most drafts a row whose drafts are all dropped at their first step can make in an answer
    of `tokens`: the first is granted, and each later one spends credit (one step of at least the
    smallest draft) that only the answer's tokens earn, ALLOWANCE each at most."""
    return 1 + tokens * ALLOWANCE / costs.step(MIN_DRAFT, 1)


CANVAS = 8  # the scripted tests' request canvas: a row's first draft (a full accept doubles the next)
GOOD_UNTIL, RESUME_AT = 10, 70  # the switching row's drafts are right before GOOD_UNTIL tokens and from RESUME_AT on


def test_rows_switch_to_ar_and_back_mid_request_and_still_equal_ar(engine, monkeypatch):
    # Drafts right for the first GOOD_UNTIL tokens, unsure until RESUME_AT, right again after: the
    # row drafts, goes on by AR steps once the misses have spent its credit, and drafts again
    # later. Batched with a row whose drafts are always right and one whose drafts never are.
    log = []
    phases = lambda r: len(r.output) < GOOD_UNTIL or len(r.output) >= RESUME_AT  # noqa: E731
    prompts = {"switching": PROMPTS[1], "good": PROMPTS[4], "bad": PROMPTS[5]}
    rules = {PROMPTS[1]: phases, PROMPTS[4]: lambda r: True, PROMPTS[5]: lambda r: False}
    monkeypatch.setattr(engines.modes.verified, "draft_canvas", scripted_drafter(engine, lambda r: rules[r.request.messages[0]["content"]](r), log))
    monkeypatch.setattr(engine, "draft_costs", LoneDrafts())
    n = 120
    requests = {k: chat(p, mode="verified", max_new_tokens=n, stop_token_ids=[], canvas=CANVAS) for k, p in prompts.items()}
    together = dict(zip(requests, engine.generate_batch(list(requests.values()))))
    log.clear()
    alone = engine.generate(requests["switching"])
    for name, request in requests.items():
        ar = engine.generate(GenerationRequest(messages=request.messages, mode="ar", max_new_tokens=n, stop_token_ids=[]))
        assert together[name].token_ids == ar.token_ids, name
        stats = together[name].stats
        assert stats.accepted + stats.ar_tokens + stats.looked_up == stats.output_tokens == n
    assert alone.token_ids == together["switching"].token_ids
    # The first phase's two drafts are all accepted (CANVAS, then 2 * CANVAS tokens, each round
    # writing one more by AR): batched or alone. In the batch the others' AR steps and their loop's
    # prompt-lookup guesses write most of the rest; alone the row shows every phase.
    first_phase = CANVAS + 2 * CANVAS
    assert together["switching"].stats.accepted >= first_phase and together["good"].stats.accepted >= first_phase
    assert any(good and k < GOOD_UNTIL for k, good in log), "the row did not draft while its drafts were right"
    assert any(not good and GOOD_UNTIL <= k < RESUME_AT for k, good in log), "the row never probed while its drafts were wrong"
    assert any(good and k >= RESUME_AT for k, good in log), "drafting never resumed after the misses"
    assert alone.stats.accepted > first_phase, "the resumed drafts wrote nothing"
    # from the end of the first phase's rounds (first_phase + 2 tokens) to RESUME_AT, AR writes every token
    assert alone.stats.ar_tokens + alone.stats.looked_up >= RESUME_AT - (first_phase + 2)
    bad = together["bad"].stats  # a few one-step probes, AR for the rest
    assert bad.accepted == 0 and set(bad.steps_per_canvas) == {1} and bad.decoder_calls <= most_probes(n, LoneDrafts())


@pytest.mark.slow
def test_rows_that_do_not_draft_keep_most_of_ar_s_speed_beside_rows_that_do(engine, monkeypatch):
    # A row whose drafts are always right batched with one whose drafts never are: each draft round
    # stops the other row, so after it both take STEP_SHARE times its cost in AR steps together.
    # Measured in AR steps (the rounds' own price): the non-drafting row waits at most 1/STEP_SHARE
    # of what it spends stepping, and the drafting row still writes much of its answer by drafts.
    from engines.modes.verified import STEP_SHARE

    prompts = {PROMPTS[4]: True, PROMPTS[5]: False}
    monkeypatch.setattr(engines.modes.verified, "draft_canvas", scripted_drafter(engine, lambda r: prompts[r.request.messages[0]["content"]], []))
    monkeypatch.setattr(engine, "draft_costs", LoneDrafts())
    monkeypatch.setattr(engine, "lookup", False)  # AR steps of one token each: the schedule counts them
    waited, stepped, rounds = [0.0], [0], []
    real_round, real_step = engines.modes.verified.verify_round, engines.modes.verified.ar_step

    def is_bad(rows) -> bool:
        return any(not prompts[r.request.messages[0]["content"]] for r in rows.live)

    def round_(rows, *args, **kwargs):
        bad_waits = not is_bad(rows)  # the bad row is not in this round: it waits for it
        spent = real_round(rows, *args, **kwargs)
        waited[0] += spent if bad_waits else 0.0
        rounds.append(spent if bad_waits else 0.0)
        return spent

    def step(rows):
        stepped[0] += is_bad(rows)
        real_step(rows)

    monkeypatch.setattr(engines.modes.verified, "verify_round", round_)
    monkeypatch.setattr(engines.modes.verified, "ar_step", step)
    n = 160
    requests = [chat(p, mode="verified", max_new_tokens=n, stop_token_ids=[], canvas=CANVAS) for p in prompts]
    good, bad = engine.generate_batch(requests)
    for request, result in zip(requests, (good, bad)):
        ar = engine.generate(GenerationRequest(messages=request.messages, mode="ar", max_new_tokens=n, stop_token_ids=[]))
        assert result.token_ids == ar.token_ids
    # the bad row writes every token by AR: by its own steps, but for one per round it probed in
    assert bad.stats.ar_tokens == n and stepped[0] >= n - len(bad.stats.steps_per_canvas) and waited[0] > 0
    # slack: the last round the bad row waited for, which the good row's end may leave unpaid by steps
    assert waited[0] <= stepped[0] / STEP_SHARE + max(rounds), (waited, stepped, rounds)
    # past its first two drafts (CANVAS, then 2 * CANVAS), the good row goes on drafting beside the bad one
    assert len(good.stats.steps_per_canvas) > 2 and good.stats.accepted > 3 * CANVAS


def test_drafts_that_never_agree_cost_a_few_probes(engine):
    # The random model's drafts never agree with its AR choice: after its first draft a row writes
    # by AR steps, probing again only as the allowance builds up (no verify pass for a dropped draft).
    n = 100
    request = chat(PROMPTS[5], mode="verified", max_new_tokens=n, stop_token_ids=[], seed=0)
    verified = engine.generate(request)
    ar = engine.generate(chat(PROMPTS[5], mode="ar", max_new_tokens=n, stop_token_ids=[]))
    assert verified.token_ids == ar.token_ids
    assert verified.stats.ar_tokens + verified.stats.looked_up == n and verified.stats.accepted == 0
    # every probe dropped at its first step (its draft unsure), as many as the credit pays for
    assert set(verified.stats.steps_per_canvas) == {1} and verified.stats.decoder_calls <= most_probes(n, engine.draft_costs)
    assert verified.stats.encoder_calls == ar.stats.encoder_calls  # a dropped draft has no verify pass


@pytest.mark.parametrize("rows", [2, 4])
def test_a_batch_whose_drafts_stop_paying_goes_on_by_ar_steps(engine, rows):
    # Drafts are priced at the batch's size: when rows probe together, a plan made for one row can
    # be too dear for the batch. Those rows take AR steps that round; before, the round drafted a
    # canvas of 0 tokens and the batch failed (seen at 2 rows and 200 tokens on the random model).
    requests = [chat(PROMPTS[j % len(PROMPTS)], mode="verified", max_new_tokens=200, stop_token_ids=[], seed=0) for j in range(rows)]
    verified = engine.generate_batch(requests)
    for request, out in zip(requests, verified):
        ar = engine.generate(chat(request.messages[-1]["content"], mode="ar", max_new_tokens=200, stop_token_ids=[]))
        assert out.token_ids == ar.token_ids and out.stats.output_tokens == 200


def test_first_draft_is_granted_and_sized_for_short_answers(engine):
    from engines.modes.verified_drafting import FIRST_CANVAS, DraftControl

    params = engine.block_params(chat("hi", mode="verified", canvas=32))
    control = DraftControl.start(params, largest=256)
    costs = DraftCosts()  # no profile: assumed costs
    canvas, steps = control.plan(costs, batch=1, most_steps=params.steps, room=1000)
    assert canvas == min(32, FIRST_CANVAS) and steps >= 2 and control.credit == 0
    control.drafted(accepted=canvas, canvas=canvas, cost=costs.round(canvas, steps, 1))  # all accepted: grow
    assert control.canvas == 2 * canvas and control.credit > 0
    control.drafted(accepted=0, canvas=control.canvas, cost=costs.round(control.canvas, params.steps, 1))  # a miss: shrink, pay
    assert control.canvas == MIN_DRAFT
    while control.plan(costs, 1, params.steps, 1000) != (0, 0):  # misses spend the credit ...
        control.drafted(accepted=0, canvas=MIN_DRAFT, cost=costs.round(MIN_DRAFT, MIN_STEPS, 1))
    wait = control.steps_to_draft(costs, 1, params.steps)
    for _ in range(wait - 1):  # ... and the allowance earns it back, in the steps it says
        control.stepped()
    assert control.plan(costs, 1, params.steps, 1000) == (0, 0)
    control.stepped()
    assert control.plan(costs, 1, params.steps, 1000)[0] > 0
    room = MIN_DRAFT // 2  # near the context's end a draft shrinks to the room left
    assert control.plan(costs, 1, params.steps, room=room)[0] == room


@pytest.fixture(scope="module")
def shipped():
    from engines import DiffusionEngine
    from engines.defaults import SHIPPED_CHECKPOINT

    return DiffusionEngine.from_checkpoint(SHIPPED_CHECKPOINT)


def test_adaptive_verified_equals_ar_on_the_shipped_model(shipped):
    # Suite items, whose drafts AR accepts, and hand-written prompts, whose drafts it mostly
    # rejects: rows that keep drafting, rows that switch to AR steps, rows that finish inside a
    # draft, alone and batched together, on short and long budgets.
    import json
    from pathlib import Path

    from lab.model.tasks import generate_suite

    real = [json.loads(line)["messages"] for line in (Path(__file__).parents[2] / "data" / "realistic_prompts.jsonl").read_text().splitlines()]
    suite = [it.messages for it in generate_suite(1, split="test", seed=3, families=("summarize", "plan", "code", "extract"))]
    prompts = suite + real[::5]
    for max_tokens in (6, 80):
        requests = [GenerationRequest(messages=m, mode="verified", max_new_tokens=max_tokens) for m in prompts]
        ar = [shipped.generate(GenerationRequest(messages=m, mode="ar", max_new_tokens=max_tokens)).token_ids for m in prompts]
        together = shipped.generate_batch(requests)
        assert [r.token_ids for r in together] == ar
        alone = [shipped.generate(r) for r in requests[:4]]
        assert [r.token_ids for r in alone] == ar[:4]
        assert all(r.stats.accepted + r.stats.ar_tokens + r.stats.looked_up == r.stats.output_tokens for r in together + alone)
        if max_tokens == 80:  # alone, drafts write most of the summary and the code (batched on a CPU, AR steps do)
            assert all(2 * r.stats.accepted > r.stats.output_tokens for r in (alone[0], alone[2]))


def test_an_answer_expected_long_drafts_a_longer_first_canvas_and_still_equals_ar(shipped):
    # The suite's plans run 40-55 tokens: with the router's expected length (p90 60) the first draft
    # holds the whole plan, one round where a 32-token first draft needs two; AR's tokens either way.
    from lab.model.tasks import generate_suite

    long_p90, short_p90 = 60, 30  # the router's predictions for a plan and for a summary
    assert short_p90 <= LONG_ANSWER < long_p90
    plan = generate_suite(1, split="test", seed=0, families=("plan",))[0].messages
    ar = shipped.generate(GenerationRequest(messages=plan, mode="ar", max_new_tokens=256))
    unknown = shipped.generate(GenerationRequest(messages=plan, mode="verified", max_new_tokens=256))
    expected_long = shipped.generate(GenerationRequest(messages=plan, mode="verified", max_new_tokens=256, expected_tokens=long_p90))
    expected_short = shipped.generate(GenerationRequest(messages=plan, mode="verified", max_new_tokens=256, expected_tokens=short_p90))
    assert unknown.token_ids == expected_long.token_ids == expected_short.token_ids == ar.token_ids
    assert len(ar.token_ids) > FIRST_CANVAS  # a first draft of FIRST_CANVAS cannot hold it
    assert len(unknown.stats.steps_per_canvas) == len(expected_short.stats.steps_per_canvas) >= 2
    assert len(expected_long.stats.steps_per_canvas) == 1 and expected_long.stats.accepted >= len(ar.token_ids) - 1


def test_answers_ar_is_unsure_of_from_the_start_are_written_without_drafts(shipped):
    # Open questions the shipped model has no answer for: AR hesitates over their first tokens, so a
    # draft would rarely match, and the first draft's grant lapses (engines.modes.verified_drafting). Verified
    # writes them by AR steps alone: AR's tokens at AR's calls, not a draft's round on top.
    for question in ("What is the capital of Australia?", "Who painted the Mona Lisa?", "What colour is the sky?"):
        messages = [{"role": "user", "content": question}]
        ar = shipped.generate(GenerationRequest(messages=messages, mode="ar", max_new_tokens=256))
        verified = shipped.generate(GenerationRequest(messages=messages, mode="verified", max_new_tokens=256))
        assert verified.token_ids == ar.token_ids
        assert verified.stats.decoder_calls == 0 and verified.stats.encoder_calls == ar.stats.encoder_calls


def test_a_draft_that_does_not_start_with_ar_s_choice_skips_the_verify_pass(engine, monkeypatch):
    # A draft is accepted from its first token on, and AR's choice for that token is known before
    # the verify pass: drafts that start elsewhere (not abandoned: confident, but wrong) end the
    # round as an AR step, with no encoder pass over the draft.
    oracle = oracle_drafter(engine, corrupt_every=10**9)

    def wrong_start(batch, rows, params):
        canvas, steps, abandoned = oracle(batch, rows, params)
        canvas[:, 0] = (canvas[:, 0] + 1) % engine.vocab_size
        return canvas, steps, abandoned

    monkeypatch.setattr(engines.modes.verified, "draft_canvas", wrong_start)
    monkeypatch.setattr(engine, "draft_costs", LoneDrafts())
    request = chat(PROMPTS[4], mode="verified", max_new_tokens=60, stop_token_ids=[], canvas=8)
    verified = engine.generate(request)
    ar = engine.generate(chat(PROMPTS[4], mode="ar", max_new_tokens=60, stop_token_ids=[]))
    assert verified.token_ids == ar.token_ids
    assert verified.stats.decoder_calls > 0 and verified.stats.drafted == 0  # it drafted, and put nothing up for verification
    assert verified.stats.encoder_calls == ar.stats.encoder_calls  # prefill + one per token: no verify pass


def test_a_first_draft_is_not_granted_while_it_would_stop_a_row_that_does_not_draft(engine, monkeypatch):
    # A row AR hesitated on before drafting gets no first draft (it writes by AR steps until its
    # credit covers one). Beside it, a row whose drafts would all be accepted does not get its first
    # draft on no credit either: that round would stop the other row. It drafts once the other is
    # done (and still writes AR's tokens throughout).
    log = []
    hesitant = PROMPTS[5]
    monkeypatch.setattr(engines.modes.verified, "draft_canvas", scripted_drafter(engine, lambda r: True, log))
    monkeypatch.setattr(engine, "draft_costs", LoneDrafts())
    monkeypatch.setattr(engine, "lookup", False)  # AR steps of one token each: the schedule counts them
    real_predict = engines.modes.verified.predict

    def predict(rows, logits):
        tokens = real_predict(rows, logits)
        for row in rows:
            if row.request.messages[0]["content"] == hesitant and not row.output:
                row.draft.next_token(sure=False)  # AR unsure of its first token
        return tokens

    monkeypatch.setattr(engines.modes.verified, "predict", predict)
    short = chat(hesitant, mode="verified", max_new_tokens=12, stop_token_ids=[], canvas=8)
    long = chat(PROMPTS[4], mode="verified", max_new_tokens=60, stop_token_ids=[], canvas=8)
    other, drafter = engine.generate_batch([short, long])
    assert other.stats.decoder_calls == 0  # never drafted
    ar = engine.generate(GenerationRequest(messages=long.messages, mode="ar", max_new_tokens=60, stop_token_ids=[]))
    assert drafter.token_ids == ar.token_ids and drafter.stats.accepted > 0
    assert log and min(n for n, _ in log) >= 12, log  # its first draft came after the other row's 12 tokens
    log.clear()
    alone = engine.generate(long)
    assert alone.token_ids == ar.token_ids and log[0][0] == 0  # alone: its first draft granted at once
