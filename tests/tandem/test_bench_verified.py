"""`tandem bench verified`: its plot, and bad output paths refused before minutes of measuring."""

from __future__ import annotations

import pytest

from tandem.main import main as tandem


def test_the_plot_shows_every_prompt_per_batch_size(tmp_path):
    from tandem.bench.verified import plot

    rows = [{"name": f"p{i}", "batch": b, "ratio": 0.5 + 0.1 * i} for b in (1, 8) for i in range(4)]
    out = tmp_path / "verified.png"
    plot(rows, str(out), max_tokens=64, repeat=3)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 5000


@pytest.mark.parametrize("flag", ["--plot", "--json"])
def test_an_output_in_a_missing_directory_is_refused_at_once(tmp_path, flag):
    with pytest.raises(SystemExit) as refused:
        tandem(["bench", "verified", flag, str(tmp_path / "missing" / "out")])
    assert f"{flag} " in str(refused.value) and "no such directory" in str(refused.value)


def test_prompts_carry_the_routers_expected_length_as_served():
    # The Gateway passes each decision's p90 length as expected_tokens; the benchmark sends the same
    # (verified drafts 64 tokens first past 48): a plan is expected long, a label short.
    from lab.model.tasks import generate_suite
    from engines.modes.verified_drafting import LONG_ANSWER
    from tandem.main import build_parser

    args = build_parser().parse_args(["bench", "verified"])
    plan = generate_suite(1, split="test", seed=0, families=("plan",))[0].messages
    label = [{"role": "user", "content": "Label the sentiment (positive/negative): I love this phone."}]
    assert args.expected_length(plan, 256) > LONG_ANSWER >= args.expected_length(label, 256) >= 1
    assert build_parser().parse_args(["bench", "verified", "--no-router-lengths"]).no_router_lengths
