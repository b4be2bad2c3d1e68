"""The package layout (issue 30): no import circle among netbox_chat's modules,
and no module imports a layer above its own. Every import counts, the ones
inside functions and under TYPE_CHECKING too: an upward import that only runs
late is still a dependency a reader has to know about, and it is how the old
circle through cli, completion and entry held together."""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

PACKAGE = Path(__file__).parent.parent / "netbox_chat"

LAYERS = (
    "base",  # the flat modules: errors, words, visible, config, credentials, process, typeahead, tls
    "store",
    "checkpoints",
    "models",
    "netbox",
    "claims",
    "agent",
    "mcp",
    "ui",
    "eval",
    "cli",
)
"""Low to high: a module may import its own layer and the ones before it."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def layer(module: str) -> str:
    """`netbox_chat.store.sessions` is in store; a flat module is base; the
    `python -m` entry (__main__) is the program, as cli/ is."""
    parts = module.split(".")
    if parts[1:] == ["__main__"]:
        return "cli"
    if len(parts) > 2 or (len(parts) == 2 and parts[1] in LAYERS):
        return parts[1]
    return "base"


def imports(module: str, path: Path, known: set[str]) -> set[str]:
    """The netbox_chat modules `module` imports, wherever the import statement is.
    `from netbox_chat.x import y` is y when y is a module, else x; importing a
    submodule runs its package's __init__ first, which counts too (but not
    the importer's own packages: those ran before it did)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                full = f"{base}.{alias.name}"
                targets.append(full if full in known else base)
        for target in targets:
            if not target.startswith("netbox_chat"):
                continue
            parts = target.split(".")
            for end in range(2, len(parts) + 1):  # each package on the way in
                name = ".".join(parts[:end])
                if name in known and not f"{module}.".startswith(f"{name}."):
                    found.add(name)
    return found


def graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {module: imports(module, path, known) for module, path in found.items()}


def test_every_package_is_a_known_layer() -> None:
    packages = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    assert packages <= set(LAYERS)


def test_no_module_imports_a_higher_layer() -> None:
    rank = {name: index for index, name in enumerate(LAYERS)}
    upward = [
        f"{module} ({layer(module)}) imports {target} ({layer(target)})"
        for module, targets in graph().items()
        for target in sorted(targets)
        if rank[layer(target)] > rank[layer(module)]
    ]
    assert not upward, "\n".join(upward)


def test_no_import_circle() -> None:
    edges = graph()
    circles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(edges[module]):
            if state.get(target) == 1:
                circles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module)
    assert not circles, "\n".join(" -> ".join(circle) for circle in circles)


TESTS = Path(__file__).parent
SHARED = ("tests.doubles", "tests.drive", "tests.conftest")
"""What a file under tests/ may import of tests/: the doubles, the drivers, conftest's constants."""


def test_no_test_module_imports_another_test_module() -> None:
    """A test module is a leaf: what two of them share lives in tests/doubles/
    or tests/drive/ (issue 30), so running or reading one never runs another's
    module-level setup, and moving a test never breaks a second file."""
    wrong = []
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module]
                if node.module == "tests":  # `from tests import test_x` names modules
                    targets = [f"tests.{alias.name}" for alias in node.names]
            else:
                continue
            wrong += [
                f"{path.relative_to(TESTS.parent)}:{node.lineno} imports {target}"
                for target in targets
                if target.split(".")[0] == "tests"
                and not any(f"{target}.".startswith(f"{shared}.") for shared in SHARED)
                and target != "tests"
            ]
    assert not wrong, "\n".join(wrong)


DRIVE = TESTS / "drive"
STARTS = {
    ("subprocess", "run"),
    ("subprocess", "Popen"),
    ("subprocess", "call"),
    ("subprocess", "check_call"),
    ("subprocess", "check_output"),
    ("os", "system"),
    ("os", "popen"),
    ("asyncio", "create_subprocess_exec"),
    ("asyncio", "create_subprocess_shell"),
}
"""The calls that start a program (module, function)."""
PTYS = {("pexpect", "spawn"), ("pexpect", "run"), ("pty", "spawn"), ("pty", "fork")}
"""The calls that start a program on a terminal: only tests/drive/pty.py makes them."""


def called(node: ast.Call, aliases: dict[str, tuple[str, str]]) -> tuple[str, str] | None:
    """`(module, function)` of `module.function(...)`, or of a bare name
    imported with `from module import function`."""
    if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
        return (node.func.value.id, node.func.attr)
    if isinstance(node.func, ast.Name):
        return aliases.get(node.func.id)
    return None


CLI_WORDS = re.compile(r"-m\s+netbox_chat(\s|$)|(^|[\s/])netbox-chat(\s|$)")
"""`-m netbox_chat` in a shell line, or the console script `netbox-chat` (a
word, or a path's last part)."""


def names_the_cli(node: ast.AST, assigned: dict[str, list[ast.AST]], depth: int = 0) -> bool:
    """Whether a command line starts netbox-chat: `"-m", "netbox_chat"`, a
    string in CLI_WORDS, a path whose last part is the console script, here
    or in a name assigned in the same file."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and bool(CLI_WORDS.search(node.value))
    if isinstance(node, ast.Name):
        values = assigned.get(node.id, []) if depth < 3 else []
        return any(names_the_cli(value, assigned, depth + 1) for value in values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return names_the_cli(node.right, assigned, depth)  # a path: its last part runs
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
        if ("-m", "netbox_chat") in itertools.pairwise(items):
            return True
    return any(names_the_cli(child, assigned, depth) for child in ast.iter_child_nodes(node))


def test_only_tests_drive_starts_the_cli_and_every_pty() -> None:
    """One way to run the CLI (issue 30): outside tests/drive/ no test starts
    netbox-chat itself (a subprocess whose command line names it) and none
    opens a pty; they call tests/drive's process.cli / start and
    pty.on_a_terminal, whose `program` names anything else they run there."""
    wrong = []
    for path in sorted(TESTS.rglob("*.py")):
        if DRIVE in path.parents:
            continue
        tree = ast.parse(path.read_text(), str(path))
        aliases = {
            alias.asname or alias.name: (node.module, alias.name)
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module
            for alias in node.names
        }
        assigned: dict[str, list[ast.AST]] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        assigned.setdefault(target.id, []).append(node.value)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            where = f"{path.relative_to(TESTS.parent)}:{node.lineno}"
            call = called(node, aliases)
            if call in PTYS:
                wrong.append(f"{where} opens a pty ({'.'.join(call)}): use tests.drive.pty")
            elif call in STARTS and any(
                names_the_cli(arg, assigned) for arg in [*node.args, *node.keywords]
            ):
                wrong.append(f"{where} starts the CLI ({'.'.join(call)}): use tests.drive.process")
    assert not wrong, "\n".join(wrong)
