"""`python -m lab.layout OUT.png`: the house's rooms (folders by role) and the imports between them,
read from the code (every import, wherever it stands), drawn floor by floor with matplotlib.

A room is a package's folder one level down (`router/gateway`, `tandem/bench`) or a top-level package
whose modules sit at its top (`engines`, `policies`). Boxes are sized by lines of Python; an arrow
is drawn from a room to every room it imports from, and an arrow that points up a floor is red
(`tests/test_layout.py` fails on one).
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLOORS = ("engines", "policies", "router", "lab", "tandem")  # bottom to top


def room_of(module: str) -> str:
    parts = module.split(".")
    if parts[0] in ("engines", "policies"):
        return parts[0]
    return "/".join(parts[:2]) if len(parts) > 2 else parts[0]


def modules() -> dict[str, Path]:
    out = {}
    for top in FLOORS:
        for path in (ROOT / top).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return {n for n in names if n.split(".")[0] in FLOORS}


def rooms() -> tuple[Counter, Counter]:
    """(lines of Python per room, import count per (from room, to room))."""
    lines, arrows = Counter(), Counter()
    for name, path in modules().items():
        here = room_of(name)
        lines[here] += len(path.read_text().splitlines())
        for target in imports(path):
            there = room_of(target)
            if there != here:
                arrows[(here, there)] += 1
    return lines, arrows


def draw(out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch

    lines, arrows = rooms()
    total = sum(lines.values())
    fig, ax = plt.subplots(figsize=(11, 6.5))
    where = {}
    for floor, top in enumerate(FLOORS):
        members = sorted(r for r in lines if r.split("/")[0] == top)
        for i, room in enumerate(members):
            x, y = (i + 0.5) * 10 / len(members), floor * 1.6
            w = min(1.85, 10 / len(members) - 0.15) * (0.6 + 0.4 * lines[room] / max(lines.values()))
            where[room] = (x, y)
            ax.add_patch(FancyBboxPatch((x - w / 2, y - 0.35), w, 0.7, boxstyle="round,pad=0.05",
                                        fc="#e8f0fb" if top not in ("lab", "tandem") else "#f4efe6", ec="#345"))
            ax.text(x, y + 0.08, room + "/", ha="center", va="center", fontsize=9, weight="bold")
            ax.text(x, y - 0.2, f"{lines[room]:,} lines ({lines[room] / total:.0%})", ha="center", va="center", fontsize=7)
        ax.text(-0.6, floor * 1.6, f"floor {floor}", ha="right", va="center", fontsize=9, color="#666")
    for (a, b), n in arrows.items():
        (x0, y0), (x1, y1) = where[a], where[b]
        up = FLOORS.index(b.split("/")[0]) > FLOORS.index(a.split("/")[0])
        ax.annotate("", xy=(x1, y1 + (0.4 if y1 < y0 else -0.4 if y1 > y0 else 0)), xytext=(x0, y0 - (0.4 if y1 < y0 else -0.4 if y1 > y0 else 0)),
                    arrowprops=dict(arrowstyle="->", color="red" if up else "#789", lw=0.6 + min(n, 30) / 15, alpha=0.8,
                                    connectionstyle="arc3,rad=0.08"))
    ax.set_xlim(-1.8, 10.2)
    ax.set_ylim(-0.8, len(FLOORS) * 1.6 - 0.6)
    ax.axis("off")
    ax.set_title("Tandem's rooms and their imports (request path: engines, policies, router; lab and tandem are offline)", fontsize=11)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    return out


if __name__ == "__main__":
    print(draw(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/images/layout.png")))
