"""The shipped Grafana dashboard (docs/grafana/tandem.json) reads only series the app exports: every
PromQL expression in it is taken apart, and each series it names must be in the running app's own
GET /metrics once a request of each mode (one streamed) has been answered."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

DASHBOARD = Path(__file__).parents[2] / "docs" / "grafana" / "tandem.json"
FUNCTIONS = {"sum", "max", "min", "avg", "count", "rate", "irate", "increase", "histogram_quantile", "clamp_min", "clamp_max", "abs",
             "delta", "deriv", "topk", "bottomk", "quantile", "sum_over_time", "avg_over_time", "max_over_time", "vector", "scalar"}
KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right"}


def expressions(panel_tree: list[dict]) -> list[str]:
    """Every target's expr, rows' nested panels included."""
    out = []
    for panel in panel_tree:
        out += [t["expr"] for t in panel.get("targets", []) if t.get("expr")]
        out += expressions(panel.get("panels", []))
    return out


def series_named(expr: str) -> set[str]:
    """The series an expression reads: its identifiers less functions, keywords, grouping labels,
    label matchers, strings, ranges and numbers."""
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)  # strings
    bare = re.sub(r"\{[^}]*\}", "", bare)  # label matchers
    bare = re.sub(r"\[[^\]]*\]", "", bare)  # ranges ([5m], [$__rate_interval])
    bare = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", bare)  # grouping labels
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", bare):
        word, rest = m.group(0), bare[m.end():].lstrip()
        if rest.startswith("("):
            assert word in FUNCTIONS, f"unknown PromQL function {word!r} in {expr}"
        elif word not in KEYWORDS:
            names.add(word)
    return names


def test_every_series_the_dashboard_reads_is_exported(base_url):
    exprs = expressions(json.loads(DASHBOARD.read_text())["panels"])
    assert len(exprs) >= 15
    read = set().union(*(series_named(e) for e in exprs))
    assert all(n.startswith("tandem_") for n in read), read
    assert series_named('sum by (le, mode) (rate(tandem_x_bucket{status="200"}[$__rate_interval])) / ignoring (mode) group_left '
                        "sum(rate(tandem_y_total[5m]))") == {"tandem_x_bucket", "tandem_y_total"}

    ask = {"messages": [{"role": "user", "content": "Classify: great phone."}], "max_tokens": 4}
    for model in ("tandem-block", "tandem-verified", "tandem-ar"):
        assert httpx.post(f"{base_url}/v1/chat/completions", json=ask | {"model": model}, timeout=60).status_code == 200
    with httpx.stream("POST", f"{base_url}/v1/chat/completions", json=ask | {"model": "tandem-ar", "stream": True}, timeout=60) as r:
        assert r.status_code == 200 and "[DONE]" in "".join(r.iter_text())
    time.sleep(1.2)  # the engines' load is polled every half second
    text = httpx.get(f"{base_url}/metrics", timeout=10).text
    exported = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
    missing = read - exported
    assert not missing, f"the dashboard reads series the app does not export: {sorted(missing)}"
