"""No import circles and no upward imports between the project's packages, checked from the source.

Every module of the packages that setup.py installs (its ``PACKAGE_FOLDERS``) is parsed with ast,
never imported, so the check is quick and needs neither torch nor fairseq. Every
import counts: module level, inside functions, under ``try``, relative or absolute. Importing
``a.b.c`` (``import a.b.c``, ``from a.b import c``, ``from a.b.c import x``) runs ``a`` and
``a.b``'s ``__init__`` too, so it is an edge to each of them. The importer's own parent packages
are left out where the import only passes through them (they are always being imported already
when the importer runs), not where it reads a name from their ``__init__``.

Two rules, each failure naming the modules and the lines:
- no cycle, between packages or inside one (a circle only works by the order modules happen to be
  imported in, and late imports that dodge it hide what depends on what), neither between modules
  nor between folders: two subpackages, neither inside the other, import one way only (folders
  ``tasks`` -> ``criterions`` -> ``tasks`` is a circle even when no module imports itself back);
- a package imports only packages below it in ``PACKAGE_ORDER`` (docs/design.md, "Package order").
"""
import ast
from collections import deque
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Bottom first: a package may import only the packages before it. longformer_common and
# longformer_kernels are both the bottom layer; kernels may import common, not the reverse.
# docs/design.md's "Package order" section says the same.
PACKAGE_ORDER = (
    "longformer_common",
    "longformer_kernels",
    "longformer_preprocessing",
    "fairseq_longformer",
    "longformer_experiments",
    "longformer_tools",
)


def package_folders(root: Path) -> dict:
    """setup.py's ``PACKAGE_FOLDERS`` (repository folder -> import name), read without running it."""
    tree = ast.parse((root / "setup.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id == "PACKAGE_FOLDERS" for target in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError("setup.py defines no PACKAGE_FOLDERS")


def project_modules(root: Path, folders: dict) -> dict:
    """Dotted module name -> (path, is_package) for every .py file of the existing package folders."""
    modules = {}
    for folder, import_name in folders.items():
        base = root / folder
        if not (base / "__init__.py").is_file():
            continue  # named in setup.py, added by another branch
        for path in sorted(base.rglob("*.py")):
            parts = path.relative_to(base).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            if is_package:
                parts = parts[:-1]
            modules[".".join((import_name,) + parts)] = (path, is_package)
    return modules


def _absolute_base(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` names (``from ..x import y`` in a.b.c -> a.x)."""
    if node.level == 0:
        return node.module
    package = importer if is_package else importer.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def _imported_names(importer: str, is_package: bool, tree: ast.AST, modules: dict):
    """(dotted name, line) of everything the module imports, at any depth of its code: the module
    itself, or for ``from a import x`` a.x when that is a module, else a (x is a name in a)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = _absolute_base(importer, is_package, node)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                yield (submodule if submodule in modules else base), node.lineno


def import_graph(modules: dict) -> dict:
    """importer -> {imported project module: its first line}, with the parent-package edges added."""
    graph = {}
    for importer, (path, is_package) in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        own_parents = {importer.rsplit(".", n)[0] for n in range(importer.count(".") + 1)}
        edges = graph.setdefault(importer, {})
        for name, line in _imported_names(importer, is_package, tree, modules):
            parts = name.split(".")
            known = [".".join(parts[:end]) for end in range(1, len(parts) + 1) if ".".join(parts[:end]) in modules]
            if not known:
                continue  # not a project module
            # the module named is an edge even when it is the importer's own parent (a name read
            # from a package's __init__ that may still be running); the parents passed through on
            # the way to it are not, for the importer's own parents
            targets = [target for target in known[:-1] if target not in own_parents]
            if known[-1] != importer:
                targets.append(known[-1])
            for target in targets:
                edges[target] = min(line, edges.get(target, line))  # ast.walk is not in line order
    return graph


def folder_graph(graph: dict, modules: dict) -> dict:
    """package folder -> {other folder: (importer, imported module)}: the imports between folders,
    leaving out those between a folder and a folder inside it (a package and its subpackages)."""
    def folder(module):
        return module if modules[module][1] else module.rpartition(".")[0]

    folders = {}
    for importer in sorted(graph):
        edges = folders.setdefault(folder(importer), {})
        for target in sorted(graph[importer], key=lambda name: (-name.count("."), name)):  # deepest first
            a, b = folder(importer), folder(target)
            if a != b and not a.startswith(b + ".") and not b.startswith(a + "."):
                edges.setdefault(b, (importer, target))
                folders.setdefault(b, {})
    return folders


def strongly_connected(graph: dict) -> list:
    """Tarjan's strongly connected components with more than one node, each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in graph.get(node, ()):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def shortest_cycle(graph: dict, component: list) -> list:
    """The shortest cycle through the component's first node, as [n0, n1, ..., n0]."""
    start, members = component[0], set(component)
    came_from, queue = {start: None}, deque([start])
    while queue:
        node = queue.popleft()
        for succ in sorted(graph[node]):
            if succ == start:
                path = [node]
                while came_from[path[-1]] is not None:
                    path.append(came_from[path[-1]])
                return path[::-1] + [start]
            if succ in members and succ not in came_from:
                came_from[succ] = node
                queue.append(succ)
    raise AssertionError(f"no cycle through {start}")  # cannot happen in a component


def import_problems(root: Path, order=PACKAGE_ORDER) -> list:
    """One line per import circle and per upward import in the packages under root; [] when none."""
    folders = package_folders(root)
    problems = [f"package {name} (setup.py PACKAGE_FOLDERS) has no place in the package order"
                for name in folders.values() if name not in order]
    modules = project_modules(root, folders)
    graph = import_graph(modules)

    def where(importer, target):
        path = modules[importer][0].relative_to(root)
        return f"{path}:{graph[importer][target]}"

    for component in strongly_connected(graph):
        cycle = shortest_cycle(graph, component)
        steps = ", ".join(f"{a} -> {b} ({where(a, b)})" for a, b in zip(cycle, cycle[1:]))
        problems.append(f"import circle of {len(component)} modules {component}; shortest: {steps}")
    between_folders = folder_graph(graph, modules)
    for component in strongly_connected(between_folders):
        cycle = shortest_cycle(between_folders, component)
        steps = ", ".join(f"{a} -> {b} ({' -> '.join(between_folders[a][b])}, {where(*between_folders[a][b])})"
                          for a, b in zip(cycle, cycle[1:]))
        problems.append(f"import circle of {len(component)} folders {component}; shortest: {steps}")
    rank = {name: position for position, name in enumerate(order)}
    for importer in sorted(graph):
        upward = [target for target in sorted(graph[importer])
                  if rank.get(target.split(".")[0], -1) > rank.get(importer.split(".")[0], len(order))]
        for target in upward:
            if any(other.startswith(target + ".") for other in upward):
                continue  # a parent package's __init__ on the way to the module named below
            low, high = importer.split(".")[0], target.split(".")[0]
            problems.append(f"upward import {importer} -> {target} ({where(importer, target)}): "
                            f"{low} may not import {high}")
    return problems


def test_project_has_no_import_circle_and_no_upward_import():
    problems = import_problems(REPO)
    assert not problems, "\n".join(problems)


def _write_tree(root: Path, files: dict):
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_checker_finds_circles_upward_imports_and_parent_package_edges(tmp_path):
    """The same checker on a fake two-package tree: each kind of import it must follow, once."""
    _write_tree(tmp_path, {
        "setup.py": 'PACKAGE_FOLDERS = {"low": "fake_low", "high": "fake_high", "new": "fake_new"}\n',
        # a name read from the package's own __init__, which imports the reader first
        "low/__init__.py": "from .e import f\nNAME = 1\n",
        "low/e.py": "from fake_low import NAME\n\ndef f():\n    return NAME\n",
        # a circle held open by a late, relative import
        "low/a.py": "from . import b\n",
        "low/b.py": "def late():\n    from .a import name\n    return name\n",
        # `from fake_low.sub.leaf import x` runs fake_low.sub's __init__, which imports back
        "low/sub/__init__.py": "from fake_low import c\n",
        "low/sub/leaf.py": "x = 1\n",
        "low/c.py": "from fake_low.sub.leaf import x\n",
        # importing upward, inside a function (named once, not again for fake_high's __init__)
        "low/d.py": "def f():\n    import fake_high.top\n",
        # two folders importing each other, though no module imports itself back
        "low/x/__init__.py": "",
        "low/x/m.py": "from fake_low.y import n\n",
        "low/x/m2.py": "",
        "low/y/__init__.py": "",
        "low/y/n.py": "",
        "low/y/n2.py": "from ..x import m2\n",
        "high/__init__.py": "",
        "high/top.py": "import fake_low.a\n",
        "new/__init__.py": "",
    })
    problems = import_problems(tmp_path, order=("fake_low", "fake_high"))
    assert problems == [
        "package fake_new (setup.py PACKAGE_FOLDERS) has no place in the package order",
        "import circle of 2 modules ['fake_low', 'fake_low.e']; shortest: "
        "fake_low -> fake_low.e (low/__init__.py:1), fake_low.e -> fake_low (low/e.py:1)",
        "import circle of 2 modules ['fake_low.a', 'fake_low.b']; shortest: "
        "fake_low.a -> fake_low.b (low/a.py:1), fake_low.b -> fake_low.a (low/b.py:2)",
        "import circle of 2 modules ['fake_low.c', 'fake_low.sub']; shortest: "
        "fake_low.c -> fake_low.sub (low/c.py:1), fake_low.sub -> fake_low.c (low/sub/__init__.py:1)",
        "import circle of 2 folders ['fake_high', 'fake_low']; shortest: "
        "fake_high -> fake_low (fake_high.top -> fake_low.a, high/top.py:1), "
        "fake_low -> fake_high (fake_low.d -> fake_high.top, low/d.py:2)",
        "import circle of 2 folders ['fake_low.x', 'fake_low.y']; shortest: "
        "fake_low.x -> fake_low.y (fake_low.x.m -> fake_low.y.n, low/x/m.py:1), "
        "fake_low.y -> fake_low.x (fake_low.y.n2 -> fake_low.x.m2, low/y/n2.py:1)",
        "upward import fake_low.d -> fake_high.top (low/d.py:2): fake_low may not import fake_high",
    ]


def test_checker_passes_a_tree_in_order(tmp_path):
    """A package importing its own submodules and subpackages, a subpackage importing its parent's
    modules, one folder importing another one way, and a package importing a lower one: no problem."""
    _write_tree(tmp_path, {
        "setup.py": 'PACKAGE_FOLDERS = {"low": "fake_low", "high": "fake_high"}\n',
        "low/__init__.py": "from .a import name\nfrom . import b\nfrom .x import m\n",
        "low/a.py": "name = 1\n",
        "low/b.py": "from . import a\nfrom .a import name\n",
        "low/x/__init__.py": "",
        "low/x/m.py": "from ..a import name\nfrom fake_low.y import n\n",
        "low/y/__init__.py": "",
        "low/y/n.py": "import fake_low.a\n",
        "high/__init__.py": "",
        "high/top.py": "import fake_low.b\nfrom fake_low import a\n\ndef f():\n    from fake_low.a import name\n",
    })
    assert import_problems(tmp_path, order=("fake_low", "fake_high")) == []
