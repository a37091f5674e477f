"""The shipped tiny DiffusionGemma loads from a clean clone and still does what its model card
says on a small test-split sample (docs/model.md, 20 items per family: AR 100% classify and
summarize, 90% plan and code; block at 12 steps 100% classify, 95% summarize, 90% code), its
verified output equals its AR output, and its drafts are mostly accepted."""

import pytest

from engines import DiffusionEngine
from engines.defaults import SHIPPED_CHECKPOINT
from lab.model.evaluate import Setting, run_setting
from lab.model.tasks import generate_suite, score


@pytest.fixture(scope="module")
def shipped():
    return DiffusionEngine.from_checkpoint(SHIPPED_CHECKPOINT)


def exact(outcomes) -> float:
    return sum(score(o.item, o.text).exact for o in outcomes) / len(outcomes)


def test_shipped_checkpoint_is_a_canvas_256_diffusion_gemma(shipped):
    assert shipped.config.canvas_length == 256
    assert shipped.model.num_parameters() < 3_000_000
    assert (SHIPPED_CHECKPOINT / "cost_profile.json").is_file()


@pytest.mark.parametrize(
    ("family", "mode", "floor"),
    [
        ("classify", "ar", 0.8), ("classify", "block", 0.8), ("summarize", "ar", 0.8), ("summarize", "block", 0.6),
        ("plan", "ar", 0.6), ("code", "ar", 0.6), ("code", "block", 0.6),
    ],
)
def test_quality_on_a_test_sample(shipped, family, mode, floor):
    items = generate_suite(5, split="test", seed=0, families=(family,))
    setting = Setting(mode, 12, "right") if mode == "block" else Setting("ar")
    assert exact(run_setting(shipped, items, setting)) >= floor


def test_verified_equals_ar_on_the_shipped_model(shipped):
    items = generate_suite(3, split="test", seed=0, families=("classify", "code"))
    ar = run_setting(shipped, items, Setting("ar"))
    verified = run_setting(shipped, items, Setting("verified", 12, "right"))
    assert [o.token_ids for o in verified] == [o.token_ids for o in ar]


def test_verified_drafts_are_mostly_accepted(shipped):
    # trained on canvases that start inside the answer, the drafts agree with the AR choice
    # (model card: acceptance 0.98 on code, 0.98 on summarize)
    items = generate_suite(3, split="test", seed=0, families=("summarize", "code"))
    outcomes = run_setting(shipped, items, Setting("verified", 12, "right"))
    assert sum(o.acceptance_rate for o in outcomes) / len(outcomes) >= 0.6
