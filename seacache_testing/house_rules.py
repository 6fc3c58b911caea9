"""The pack's size budgets, measured on its source: product functions stay short, and the documentation inside the
core and the SeaCache nodes stays a small share of their lines (figures and history live in docs/).

    python -m seacache_testing.house_rules    # function lengths over the budget, and each package's documentation share
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("seacache_core", "nodes", "cosmos3")
DOCUMENTED = ("seacache_core", "nodes/seacache")
MAX_FUNCTION_LINES = 60
MAX_DOC_SHARE = 0.15


def long_functions(folders=PRODUCT, limit: int = MAX_FUNCTION_LINES, root: Path = ROOT) -> list[tuple[str, str, int]]:
    """``(file, function, lines)`` of every function under ``root``'s ``folders`` longer than ``limit`` lines (from
    its ``def`` line to its last line, docstring included)."""
    found = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > limit:
                        found.append((path.relative_to(root).as_posix(), node.name, lines))
    return found


def _doc_lines(source: str) -> set[int]:
    """Lines of docstrings (modules, classes, functions, and strings right after an assignment) and of comments."""
    doc = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            for index, statement in enumerate(node.body):
                after_assignment = index > 0 and isinstance(node.body[index - 1], (ast.Assign, ast.AnnAssign))
                if (index == 0 or after_assignment) and isinstance(statement, ast.Expr) \
                        and isinstance(statement.value, ast.Constant) and isinstance(statement.value.value, str):
                    doc.update(range(statement.lineno, statement.end_lineno + 1))
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            doc.add(token.start[0])
    return doc


def doc_share(folder: str) -> tuple[int, int]:
    """``(documentation lines, non-blank lines)`` of the Python files under ``folder``: a line counts as
    documentation when it holds a docstring or a comment (a code line with a trailing comment included)."""
    doc = total = 0
    for path in sorted((ROOT / folder).rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        nonblank = {i for i, line in enumerate(source.splitlines(), 1) if line.strip()}
        doc += len(_doc_lines(source) & nonblank)
        total += len(nonblank)
    return doc, total


def main() -> None:
    for path, name, lines in long_functions():
        print(f"{path}: {name} has {lines} lines (budget {MAX_FUNCTION_LINES})")
    for folder in DOCUMENTED:
        doc, total = doc_share(folder)
        print(f"{folder}: {doc} of {total} non-blank lines are docstrings or comments ({100 * doc / total:.1f} %, "
              f"budget {100 * MAX_DOC_SHARE:.0f} %)")


if __name__ == "__main__":
    main()
