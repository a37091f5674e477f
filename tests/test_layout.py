"""The layout in DESIGN.md holds: floors (engines/ at the bottom, policies/ above it, router/ above
that, then the offline lab/ and, on top, the `tandem` command and its benchmarks) are never crossed
upwards, so the request path never imports the lab or the command; module-level imports form no
cycle; the request path's modules stay short enough to read in one sitting; and the gateway's code
loads no tensor library. Imports are read wherever they stand (functions and `if TYPE_CHECKING:` included)."""

from __future__ import annotations

import ast
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("engines", "policies", "router", "lab", "tandem")
FLOOR = {"engines": 0, "policies": 1, "router": 2, "lab": 3, "tandem": 4}
REQUEST_PATH = ("engines", "policies", "router")  # lab/ and tandem/ are offline
MAX_REQUEST_PATH_LINES = 300  # issue 34: no request-path file over 300 lines


def modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports(path: Path, top_level_only: bool = False) -> set[str]:
    """Project modules `path` imports (anywhere, or only at module level)."""
    tree = ast.parse(path.read_text())
    # module level includes `if TYPE_CHECKING:` blocks: a type-only import still ties two modules
    nodes = [n for top in tree.body for n in ([top] + (list(ast.walk(top)) if isinstance(top, ast.If) else []))] if top_level_only else ast.walk(tree)
    names = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return {n for n in names if n.split(".")[0] in PACKAGES}


def test_no_import_points_up_a_floor():
    wrong = []
    for name, path in modules().items():
        here = FLOOR[name.split(".")[0]]
        wrong += [f"{name} imports {m}" for m in sorted(imports(path)) if FLOOR[m.split(".")[0]] > here]
    assert not wrong, "\n".join(wrong)


def test_module_level_imports_form_no_cycle():
    mods = modules()
    graph = {name: {m for m in imports(path, top_level_only=True) if m in mods and m != name} for name, path in mods.items()}
    done: set[str] = set()

    def visit(node: str, trail: list[str]) -> None:
        for nxt in sorted(graph[node]):
            assert nxt not in trail, "import cycle: " + " -> ".join(trail[trail.index(nxt):] + [nxt])
            if nxt not in done:
                visit(nxt, trail + [nxt])
        done.add(node)

    for name in sorted(graph):
        visit(name, [name])


def on_request_path(module: str) -> bool:
    """A request-path package's own modules (router.gateway.failover), not its face."""
    parts = module.split(".")
    return len(parts) >= 2 and parts[0] in REQUEST_PATH


def test_request_path_modules_are_short():
    long = {name: n for name, path in modules().items()
            if on_request_path(name) and (n := len(path.read_text().splitlines())) > MAX_REQUEST_PATH_LINES}
    assert not long, f"request-path modules over {MAX_REQUEST_PATH_LINES} lines: {long}"


def test_the_gateways_code_loads_no_compiler():
    """A Gateway replica imports its code in under a second (0.7 s measured on the 2-core VM): it checks
    grammars with engines.grammar_check, not llguidance.torch, whose torch compiler stack was 3 of 4 s."""
    import subprocess
    import sys

    code = ("import sys, router.app, router.gateway.ingress, router.gateway.orchestration; "
            "print(sorted(m for m in ('torch', 'transformers', 'llguidance.torch') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]", f"the gateway's modules load {done.stdout.strip()}"


HEAVY = ("torch", "transformers", "llguidance.torch")  # what a Gateway replica must never load


def lazy_targets(package_init: Path) -> dict[str, str]:
    """A package face's lazily exported names and the modules that define them (engines.lazy_exports)."""
    for node in ast.walk(ast.parse(package_init.read_text())):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "_EXPORTS" for t in node.targets):
            return ast.literal_eval(node.value)
    return {}


def test_no_gateway_route_can_reach_torch_at_any_time():
    """Every module of router/gateway and router/decision, and every project module they import at module
    level or inside a function (through lazily exported names too), imports no torch, transformers or
    llguidance.torch: a route first called late (the admin stats did, through the engine's deployment) would
    otherwise load them into a Gateway replica then. router/app.py, the composition root, binds the engine
    deployment and is not a route."""
    known = modules()
    starts = [m for m in known if m.startswith(("router.gateway", "router.decision"))]
    parent: dict[str, str] = {}
    seen: set[str] = set()
    stack = list(starts)
    heavy = []
    while stack:
        name = stack.pop()
        if name in seen or name not in known:
            continue
        seen.add(name)
        tree = ast.parse(known[name].read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
                init = known.get(node.module)
                if init is not None and init.name == "__init__.py":
                    targets = lazy_targets(init)
                    found += [targets[a.name] for a in node.names if a.name in targets]
            else:
                continue
            heavy += [(name, m) for m in found if m in HEAVY or m.split(".")[0] in ("torch", "transformers")]
            for m in found:
                if m in known and m not in seen:
                    parent.setdefault(m, name)
                    stack.append(m)

    def path_to(name: str) -> str:
        chain = [name]
        while chain[-1] in parent:
            chain.append(parent[chain[-1]])
        return " <- ".join(chain)

    assert not heavy, "\n".join(f"{m} in {path_to(name)}" for name, m in sorted(set(heavy)))
