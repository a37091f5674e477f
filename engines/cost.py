"""What each mode costs on the serving hardware, and when a request would finish in it.

`tandem bench engines --write-profile` measures milliseconds per forward by mode and batch size
and writes `cost_profile.json` beside the checkpoint; re-running it re-measures in place. The
router's load-aware step uses it to send a request to the mode of equal quality (verified or AR,
the same output under greedy decoding; block too for tasks where it scores as AR does) that will
finish it sooner given each engine's queue.
Which mode wins depends on the hardware and the load: on a 2-core CPU a canvas step at batch 8
costs several AR steps, on a GPU the cross-over sits much higher.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from engines.types import ENGINE_OF_MODE

PROFILE_FILE = "cost_profile.json"


@dataclass
class CostProfile:
    ms_per_forward: dict[str, dict[int, float]]  # "block" (also verified's drafts) / "ar" -> batch size -> ms
    canvas: int = 256  # canvas the block figures were measured on
    block_ms_by_canvas: dict[int, dict[int, float]] = field(default_factory=dict)  # canvas -> batch -> ms per denoising step
    # canvas -> batch -> ms per greedy draft step (verified mode's drafts; no sampling draw)
    draft_ms_by_canvas: dict[int, dict[int, float]] = field(default_factory=dict)
    acceptance: float = 0.5  # verified mode: share of draft tokens accepted, measured or assumed
    acceptance_by_task: dict[str, float] = field(default_factory=dict)  # per task type, from `tandem eval model`
    # Mean denoising steps a canvas takes per task type (the model stops once its canvas is stable and
    # confident), measured at `steps` max steps on the task suite; absent tasks pay the policy's steps.
    block_steps_by_task: dict[str, float] = field(default_factory=dict)
    # Verified rounds (draft, verify, correct) per canvas's worth of answer per task type, measured the
    # same way: 1.0 when drafts are right, more per wrong token; absent tasks: from their acceptance.
    verified_rounds_per_canvas: dict[str, float] = field(default_factory=dict)
    steps: int = 12  # the max denoising steps block_steps_by_task was measured at
    # engine -> ms per prompt token of a prefill at batch 1 (`tandem bench prefix --write-profile`);
    # what a prompt costs before its first token, and what the prefix cache saves. Absent: not priced.
    prefill_ms_per_token: dict[str, float] = field(default_factory=dict)
    machine: str = ""  # where it was measured
    extra: dict = field(default_factory=dict)

    def forward_ms(self, engine: str, batch: float, canvas: int | None = None) -> float:
        """Milliseconds per model call: linear interpolation over the measured batch sizes (and, for
        block with per-canvas measurements, over canvas sizes), clamped at the low ends."""
        if engine == "block" and canvas and self.block_ms_by_canvas:
            return _by_canvas(self.block_ms_by_canvas, canvas, batch)
        return _interpolate(self.ms_per_forward[engine], batch)

    def draft_ms(self, canvas: int, batch: float) -> float:
        """Milliseconds per denoising step of a verified draft (greedy: no sampling draw), from the
        draft measurements, else block mode's (which include the draw: an overestimate)."""
        if self.draft_ms_by_canvas:
            return _by_canvas(self.draft_ms_by_canvas, canvas, batch)
        return self.forward_ms("block", batch, canvas)

    def canvas_steps(self, steps: int, task: str | None = None) -> float:
        """Denoising steps one canvas is expected to take under a budget of `steps`: the task's
        measured mean (scaled when the budget differs from the one measured at), at most `steps`."""
        measured = self.block_steps_by_task.get(task) if task else None
        if measured is None:
            return steps
        return min(steps, measured * (steps / self.steps if steps > self.steps else 1.0))

    def forwards(self, mode: str, tokens: int, steps: int, canvas: int, task: str | None = None) -> float:
        """Model calls to write `tokens` in `mode`: one per token in AR; per canvas its expected
        denoising steps and a commit; verified, per round its draft's steps, the verify pass and
        the correction, and the task's measured rounds per canvas (else rounds from its acceptance)."""
        if mode == "ar":
            return tokens
        denoise = self.canvas_steps(steps, task)
        if mode == "block":
            return math.ceil(tokens / canvas) * (denoise + 1)
        measured = self.verified_rounds_per_canvas.get(task) if task else None
        if measured is not None:
            return measured * math.ceil(tokens / canvas) * (denoise + 2)
        acceptance = self.acceptance_by_task.get(task, self.acceptance) if task else self.acceptance
        per_round = max(1.0, acceptance * canvas + 1)  # accepted prefix + the AR token
        return math.ceil(tokens / per_round) * (denoise + 2)

    def decode_ms(self, mode: str, tokens: int, steps: int, canvas: int, task: str | None, batch: float,
                  draft_share: float | None = None) -> float:
        """Milliseconds to decode `tokens` in `mode` at `batch` rows. Verified with a `draft_share`
        (the share of its tokens drafts wrote in the requests of this task observed lately): that
        share priced in rounds as `forwards` counts them, the rest by AR steps on the block engine
        (one encoder call over one token, priced as an AR step). A task whose drafts miss costs
        verified about AR's time, whatever the task suite's acceptance said."""
        engine = ENGINE_OF_MODE[mode]
        per_forward = self.forward_ms(engine, batch, canvas if engine == "block" else None)
        drafted = self.forwards(mode, tokens, steps, canvas, task) * per_forward
        if mode != "verified" or draft_share is None:
            return drafted
        share = min(1.0, max(0.0, draft_share))
        return share * drafted + (1.0 - share) * tokens * self.forward_ms("ar", batch)

    def prefill_ms(self, engine: str, prompt_tokens: int, cached_tokens: float = 0.0) -> float:
        """Milliseconds to encode a prompt of which `cached_tokens` come from the prefix cache."""
        return max(0.0, prompt_tokens - cached_tokens) * self.prefill_ms_per_token.get(engine, 0.0)

    def service_ms(self, mode: str, tokens: int, steps: int, canvas: int | None, task: str | None = None,
                   prompt_tokens: int = 0, cached_tokens: float = 0.0, draft_share: float | None = None) -> float:
        """Estimated milliseconds to prefill (what is not cached) and decode one request alone (batch 1)."""
        decode = self.decode_ms(mode, tokens, steps, canvas or self.canvas, task, 1, draft_share)
        return self.prefill_ms(ENGINE_OF_MODE[mode], prompt_tokens, cached_tokens) + decode

    def finish_ms(
        self, mode: str, tokens: int, steps: int, canvas: int, queued: int, running: int, capacity: int, task: str | None = None,
        backlog_ms: float | None = None, prompt_tokens: int = 0, cached_tokens: float = 0.0, draft_share: float | None = None,
    ) -> float:
        """Estimated time until a request of `tokens` finishes in `mode` behind the given queue.
        With `backlog_ms` (the block engine's work ahead, a `Backlog`), block and verified work is
        priced as a serial server: the work ahead, then this request alone. A CPU gains almost
        nothing from batching canvases (a step's cost grows with rows x canvas), and a request
        only joins a running batch of its own canvas and steps, so it mostly waits its turn.
        AR rows join the running batch at the next token and share its steps. The prompt's prefill
        (less what the prefix cache holds) is paid once, before the first token. `draft_share`:
        verified's live share of tokens written by drafts for this task (`decode_ms`)."""
        engine = ENGINE_OF_MODE[mode]
        if engine == "block" and backlog_ms is not None:
            return backlog_ms + self.service_ms(mode, tokens, steps, canvas, task, prompt_tokens, cached_tokens, draft_share)
        batch = min(capacity, running + queued + 1)
        service = self.decode_ms(mode, tokens, steps, canvas, task, batch, draft_share)
        waiting_rounds = max(0, running + queued + 1 - capacity) / capacity  # batches ahead of it
        return service * (1 + waiting_rounds) + self.prefill_ms(engine, prompt_tokens, cached_tokens)

    def save(self, directory: str | Path) -> Path:
        path = Path(directory) / PROFILE_FILE
        path.write_text(json.dumps(asdict(self), indent=2))
        return path

    @classmethod
    def load(cls, directory: str | Path) -> CostProfile | None:
        path = Path(directory) / PROFILE_FILE
        if not path.is_file():
            return None
        raw = json.loads(path.read_text())
        raw["ms_per_forward"] = {e: {int(b): float(ms) for b, ms in v.items()} for e, v in raw["ms_per_forward"].items()}
        raw["block_ms_by_canvas"] = {int(c): {int(b): float(ms) for b, ms in v.items()} for c, v in raw.get("block_ms_by_canvas", {}).items()}
        raw["draft_ms_by_canvas"] = {int(c): {int(b): float(ms) for b, ms in v.items()} for c, v in raw.get("draft_ms_by_canvas", {}).items()}
        raw["block_steps_by_task"] = {t: float(s) for t, s in raw.get("block_steps_by_task", {}).items()}
        raw["verified_rounds_per_canvas"] = {t: float(s) for t, s in raw.get("verified_rounds_per_canvas", {}).items()}
        raw["prefill_ms_per_token"] = {e: float(ms) for e, ms in raw.get("prefill_ms_per_token", {}).items()}
        return cls(**raw)


def _by_canvas(table: dict[int, dict[int, float]], canvas: int, batch: float) -> float:
    """Linear interpolation over canvas sizes (then batch sizes) of a canvas -> batch -> ms table;
    below the smallest canvas its cost, past the largest growing with the canvas."""
    sizes = sorted(table)
    lo = max([c for c in sizes if c <= canvas], default=sizes[0])
    hi = min([c for c in sizes if c >= canvas], default=sizes[-1])
    at_lo, at_hi = _interpolate(table[lo], batch), _interpolate(table[hi], batch)
    if hi == lo:
        return at_lo * max(1.0, canvas / hi)  # past the largest measured canvas: cost grows with it
    return at_lo + (at_hi - at_lo) * (canvas - lo) / (hi - lo)


def _interpolate(by_batch: dict[int, float], batch: float) -> float:
    """Linear interpolation over measured batch sizes; the smallest's cost below it, growing with
    the batch past the largest."""
    points = sorted((int(b), ms) for b, ms in by_batch.items())
    if batch <= points[0][0]:
        return points[0][1]
    for (b0, m0), (b1, m1) in zip(points, points[1:]):
        if batch <= b1:
            return m0 + (m1 - m0) * (batch - b0) / (b1 - b0)
    b_last, m_last = points[-1]
    return m_last * batch / b_last
