"""What the codebase's shape is: import circles between files, classes over a size, and where a backend is named
outside its own modules (python scripts/structure.py)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bot", "engine", "plugins", "conf", "sandbox", "bench", "demo")
CLASS_LINES = 200


def modules() -> dict[str, Path]:
    """Every module of the project's packages by dotted name."""
    found = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules `name` imports, at any level (under `if TYPE_CHECKING:` too: a circle of types is one)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            # a submodule named is what the file reads (its package's __init__ runs first either way)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected sets of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    sys.setrecursionlimit(10_000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


def big_classes(known: dict[str, Path], under: str) -> list[tuple[str, int]]:
    out = []
    for name, path in known.items():
        if not name.startswith(under):
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > CLASS_LINES:
                out.append((f"{name}.{node.name}", node.end_lineno - node.lineno + 1))
    return out


def main() -> int:
    known = modules()
    graph = {name: imports(name, path, known) for name, path in known.items()}
    for group in circles(graph):
        print("import circle:", " <-> ".join(group))
    for name, lines in big_classes(known, "bot.speech"):
        print(f"class over {CLASS_LINES} lines: {name} ({lines})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
