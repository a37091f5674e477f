"""`tandem bench verified`: its plot, and bad output paths refused before minutes of measuring."""

from __future__ import annotations

import pytest

from router.tools.cli import main as tandem


def test_the_plot_shows_every_prompt_per_batch_size(tmp_path):
    from engines.tools.bench_verified import plot

    rows = [{"name": f"p{i}", "batch": b, "ratio": 0.5 + 0.1 * i} for b in (1, 8) for i in range(4)]
    out = tmp_path / "verified.png"
    plot(rows, str(out), max_tokens=64, repeat=3)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 5000


@pytest.mark.parametrize("flag", ["--plot", "--json"])
def test_an_output_in_a_missing_directory_is_refused_at_once(tmp_path, flag):
    with pytest.raises(SystemExit) as refused:
        tandem(["bench", "verified", flag, str(tmp_path / "missing" / "out")])
    assert f"{flag} " in str(refused.value) and "no such directory" in str(refused.value)
