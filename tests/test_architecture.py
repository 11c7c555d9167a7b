"""Architecture rules, checked on labformat's source with `ast` (nothing is imported or run).

1. No import cycle among labformat modules, counting imports inside functions too (a cycle
   hidden in a function is still a cycle); `if TYPE_CHECKING:` imports never run, so they do not count.
   Nor among its packages: a subpackage (`labformat.read`, all of it) or a top-level module
   (`labformat.table`) is one unit, the package's own `__init__` another, and the units' imports,
   function-level ones included, point one way.
2. No module uses another labformat module's private names: no `from labformat.m import _x`,
   no `m._x` on an imported labformat module, no `obj._x` where `_x` is not defined in the module
   itself (how `table._timeline` was read from outside `Table`). Allowed: Spark/py4j internals
   (`_jsc`, `_jdf`, `_jvm`), private names of non-labformat modules (`os._exit`) and the
   crash-point module `labformat.hooks`.
3. One commit protocol: only the write transaction takes the table lock or completes an instant
   (the timeline completes the rollbacks the transaction has it run).
4. Typed contracts: no option choice spelt as a string outside `model/enums.py`, no operation or
   stats source compared with a string, no report's `funnel` or `details` read by string key.
5. Errors as data: every Python task runs through `labformat.spark.tasks` (no `mapInArrow`,
   `applyInArrow` or `arrow_udf` elsewhere), which carries a task's LabformatError to the driver as
   its class and fields; and no module but `labformat.errors` decides anything by an exception's
   text (`"word" in str(exc)`, `str(exc).startswith(...)`, a regex over it).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "labformat"
SPARK_INTERNALS = {"_jsc", "_jdf", "_jvm"}
# A Spark Connect Column's expression tree has no public accessors; only the module that walks it reads them.
CONNECT_EXPRESSIONS = {"labformat.read.connect_filter": {"_expr", "_name", "_args", "_unparsed_identifier",
                                                        "_is_metadata_column", "_value", "_dataType", "_child"}}
ALLOWED_PRIVATE_MODULES = {"labformat.hooks"}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()
TREES = {name: ast.parse(path.read_text(encoding="utf-8"), str(path)) for name, path in MODULES.items()}


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(tree: ast.Module, function_level: bool):
    """Import statements that run: module level, and (if asked) inside functions; never TYPE_CHECKING ones."""
    def walk(node, in_function):
        for child in ast.iter_child_nodes(node):
            if _is_type_checking(child):
                continue
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, (ast.Import, ast.ImportFrom)) and (function_level or not nested):
                yield child
            yield from walk(child, nested)
    yield from walk(tree, False)


def _base(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> list[tuple[str, str | None]]:
    """(labformat module imported, name taken from it or None) for one import statement."""
    if isinstance(node, ast.Import):
        return [(a.name, None) for a in node.names if a.name in MODULES]
    base = _base(module, node)
    out = []
    for alias in node.names:
        if f"{base}.{alias.name}" in MODULES:
            out.append((f"{base}.{alias.name}", None))
        elif base in MODULES:
            out.append((base, alias.name))
    return out


def import_graph(function_level: bool = True) -> dict[str, set[str]]:
    graph = {}
    for name, tree in TREES.items():
        graph[name] = {t for node in _imports(tree, function_level) for t, _ in _targets(name, node) if t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_uses(module: str, tree: ast.Module) -> list[str]:
    """Uses in `module` of private names that belong to other modules, as 'line: text'."""
    defined: set[str] = set()
    labformat_aliases: set[str] = set()  # local names bound to labformat modules
    other_aliases: set[str] = set()  # local names bound to non-labformat modules
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            defined.add(node.attr)
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.partition(".")[0]
                (labformat_aliases if alias.name.partition(".")[0] == "labformat" else other_aliases).add(local)
        elif isinstance(node, ast.ImportFrom):
            base = _base(module, node)
            for alias in node.names:
                local = alias.asname or alias.name
                if base.partition(".")[0] != "labformat":
                    other_aliases.add(local)
                    continue
                if f"{base}.{alias.name}" in MODULES:
                    labformat_aliases.add(local)
                elif _is_private(alias.name) and base != module and base not in ALLOWED_PRIVATE_MODULES:
                    problems.append(f"{node.lineno}: from {base} import {alias.name}")
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _is_private(node.attr)) or node.attr in SPARK_INTERNALS \
                or node.attr in CONNECT_EXPRESSIONS.get(module, ()):
            continue
        owner = node.value.id if isinstance(node.value, ast.Name) else None
        if owner in labformat_aliases:
            problems.append(f"{node.lineno}: {ast.unparse(node)}")
        elif owner in other_aliases or owner in ("self", "cls"):
            continue
        elif node.attr not in defined:
            problems.append(f"{node.lineno}: {ast.unparse(node)}")
    return problems


def test_the_walk_sees_the_package():
    graph = import_graph()
    assert "labformat.table" in graph and "labformat.write.upsert" in graph["labformat.table"]
    assert "labformat.read.query" in graph["labformat.table"]  # a function-level import counts


def test_no_import_cycles_among_labformat_modules():
    assert cycles(import_graph(function_level=True)) == []


def test_the_cycle_finder_finds_cycles():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def unit(module: str) -> str:
    """The package-level unit a module belongs to: its subpackage, or itself when it is top-level."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or (len(parts) == 2 and MODULES[module].name == "__init__.py") \
        else module


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for module, targets in graph.items():
        out.setdefault(unit(module), set()).update(unit(t) for t in targets if unit(t) != unit(module))
    return out


def test_no_import_cycles_among_labformat_packages():
    graph = import_graph(function_level=True)
    found = cycles(package_graph(graph))
    why = {f"{a} -> {b}" for c in found for a in graph for b in graph[a] if unit(a) in c and unit(b) in c
           and unit(a) != unit(b)}
    assert found == [], sorted(why)


def test_the_package_check_sees_a_cycle_that_no_module_cycle_shows():
    assert unit("labformat.read.query") == "labformat.read" and unit("labformat.table") == "labformat.table"
    assert unit("labformat.read") == "labformat.read" and unit("labformat") == "labformat"
    modules = {"labformat.up.a": {"labformat.down.b"}, "labformat.down.b": set(),
               "labformat.down.c": {"labformat.up.d"}, "labformat.up.d": set()}  # each module alone: no cycle
    assert cycles(modules) == [] and cycles(package_graph(modules)) == [["labformat.down", "labformat.up"]]


def test_no_module_uses_another_modules_private_names():
    problems = {name: p for name, tree in TREES.items() if (p := private_uses(name, tree))}
    assert problems == {}


def test_the_private_name_check_catches_the_known_shapes():
    source = (
        "from labformat.datasets.drone import _resolve\n"
        "from labformat.write import upsert\n"
        "from labformat.hooks import crash_point\n"
        "import os\n"
        "def f(table, spark):\n"
        "    upsert._INDEXES\n"
        "    table._timeline\n"
        "    os._exit(1)\n"
        "    spark.sparkContext._jsc\n"
    )
    problems = private_uses("labformat.example", ast.parse(source))
    assert problems == ["1: from labformat.datasets.drone import _resolve", "6: upsert._INDEXES",
                        "7: table._timeline"]


def test_every_module_opens_with_a_docstring():
    missing = [name for name, tree in TREES.items() if not ast.get_docstring(tree)]
    assert missing == []


# ---- 3. one commit protocol (issue 29) ------------------------------------------------------------

# Only the transaction takes the table lock and completes an instant; the timeline completes the
# rollbacks it runs (under the transaction's lock), and the lock module is the lock.
LOCK_TAKERS = {"labformat.write.transaction", "labformat.lock"}
COMPLETERS = {"labformat.write.transaction", "labformat.timeline"}


def _lock_users() -> list[str]:
    out = []
    for module, tree in TREES.items():
        for node in _imports(tree, function_level=True):
            names = [a.name for a in node.names] if isinstance(node, ast.ImportFrom) else []
            if (isinstance(node, ast.ImportFrom) and _base(module, node) == "labformat.lock" and "TableLock" in names) \
                    or (isinstance(node, ast.Import) and any(a.name == "labformat.lock" for a in node.names)):
                if module not in LOCK_TAKERS:
                    out.append(module)
    return out


def _completers() -> list[tuple[str, int]]:
    return [(module, node.lineno) for module, tree in TREES.items() if module not in COMPLETERS
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "complete"]


def test_only_the_transaction_takes_the_lock_or_completes_an_instant():
    assert _lock_users() == []
    assert _completers() == []


# ---- 4. typed contracts: enums for names, types for reports (issue 29) ----------------------------

def _enum_values(*class_names: str) -> set[str]:
    """The values of the named enums of labformat/model/enums.py, read from its source."""
    tree = TREES["labformat.model.enums"]
    return {node.value.value for cls in tree.body if isinstance(cls, ast.ClassDef) and cls.name in class_names
            for node in cls.body if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)}


OPTION_CHOICES = _enum_values("IndexType", "TableType", "SortMode", "ParallelismMode", "CleanerPolicy",
                              "ConcurrencyMode", "QueryType", "MergeMode", "BloomFilterTypeCode", "BucketHash",
                              "IncrementalFormat", "CdcLoggingMode", "BucketEngine")
NAMES_COMPARED = _enum_values("Operation", "StatsSource")


def _named_by_strings() -> list[tuple[str, int, str]]:
    """An option choice spelt as a string anywhere outside the enums, or an operation or a stats
    source compared with a string (`report.operation == "upsert"`)."""
    out = []
    for module, tree in TREES.items():
        if module == "labformat.model.enums":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in OPTION_CHOICES:
                out.append((module, node.lineno, node.value))
            if isinstance(node, ast.Compare) and all(isinstance(op, (ast.Eq, ast.NotEq, ast.Is, ast.IsNot))
                                                     for op in node.ops):
                out += [(module, node.lineno, c.value) for c in [node.left, *node.comparators]
                        if isinstance(c, ast.Constant) and c.value in NAMES_COMPARED]
    return out


def _reports_read_by_key() -> list[tuple[str, int]]:
    """`x.funnel[...]`, `x.details[...]`, `x.funnel.get(...)`, `x.details.get(...)`: a report read by string key."""
    out = []
    for module, tree in TREES.items():
        for node in ast.walk(tree):
            target = None
            if isinstance(node, ast.Subscript):
                target = node.value
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
                target = node.func.value
            if isinstance(target, ast.Attribute) and target.attr in ("funnel", "details"):
                out.append((module, node.lineno))
    return out


def test_no_string_stands_for_an_operation_an_option_choice_or_a_stats_source():
    assert OPTION_CHOICES >= {"GLOBAL_SORT", "MERGE_ON_READ", "BLOOM"} and "upsert" in NAMES_COMPARED
    assert _named_by_strings() == []


def test_no_module_reads_a_report_by_string_key():
    assert _reports_read_by_key() == []


def test_the_contract_checks_catch_the_known_shapes():
    bad = ast.parse('if o.bulk_insert_sort_mode == "GLOBAL_SORT" or r.operation == "upsert":\n'
                    '    n = r.details["write_targets"] + r.funnel.get("matched")\n')
    TREES["tests.fake"] = bad
    try:
        assert sorted(v for m, _, v in _named_by_strings() if m == "tests.fake") == ["GLOBAL_SORT", "upsert"]
        assert [m for m, _ in _reports_read_by_key() if m == "tests.fake"] == ["tests.fake", "tests.fake"]
    finally:
        del TREES["tests.fake"]


TASK_RUNNERS = {"mapInArrow", "applyInArrow", "arrow_udf", "mapInPandas", "applyInPandas", "pandas_udf", "udf",
                "mapPartitions", "foreachPartition", "raise_error"}
TEXT_TESTS = {"startswith", "endswith", "find", "rfind", "index", "count"}


def _tasks_outside_the_carrier() -> list[tuple[str, int, str]]:
    """A Python task started anywhere but `labformat.spark.tasks`: its errors would leave it as text."""
    out = []
    for module, tree in TREES.items():
        if module == "labformat.spark.tasks":
            continue
        # A bare name counts when it is pyspark's (`from pyspark.sql.functions import arrow_udf`), not
        # the carrier's own wrapper of the same name.
        from_pyspark = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                        and (node.module or "").startswith("pyspark") for a in node.names}
        for node in ast.walk(tree):
            name = (node.attr if isinstance(node, ast.Attribute)
                    else node.id if isinstance(node, ast.Name) and node.id in from_pyspark else None)
            if name in TASK_RUNNERS:
                out.append((module, node.lineno, name))
    return out


def _errors_read_from_text() -> list[tuple[str, int]]:
    """Inside `except ... as e:`, a decision taken on e's text: `str(e)` / `repr(e)` / `e.args` (or a
    name assigned one of them) compared (`in`, `==`), tested (`.startswith(...)`, ...) or given to `re`."""
    out = []
    for module, tree in TREES.items():
        if module == "labformat.errors":
            continue
        for handler in ast.walk(tree):
            if not (isinstance(handler, ast.ExceptHandler) and handler.name):
                continue
            name = handler.name

            def is_text(node: ast.AST, texts: set[str]) -> bool:
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("str", "repr"):
                    return len(node.args) == 1 and isinstance(node.args[0], ast.Name) and node.args[0].id == name
                if isinstance(node, ast.Attribute) and node.attr == "args":
                    return isinstance(node.value, ast.Name) and node.value.id == name
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                        "lower", "upper", "strip", "splitlines", "split"):
                    return is_text(node.func.value, texts)
                if isinstance(node, ast.Subscript):
                    return is_text(node.value, texts)
                return isinstance(node, ast.Name) and node.id in texts

            texts: set[str] = set()
            for node in ast.walk(handler):
                if isinstance(node, ast.Assign) and is_text(node.value, texts):
                    texts |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            for node in ast.walk(handler):
                decided = (isinstance(node, ast.Compare) and any(is_text(n, texts) for n in [node.left, *node.comparators])
                           or isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                           and (node.func.attr in TEXT_TESTS and is_text(node.func.value, texts)
                                or isinstance(node.func.value, ast.Name) and node.func.value.id == "re"
                                and any(is_text(a, texts) for a in node.args)))
                if decided:
                    out.append((module, node.lineno))
    return sorted(set(out))


def test_every_python_task_carries_its_errors_as_data():
    assert _tasks_outside_the_carrier() == []


def test_no_module_decides_by_an_exceptions_text():
    assert _errors_read_from_text() == []


def test_the_error_checks_catch_the_known_shapes():
    bad = ast.parse(
        "from pyspark.sql.functions import raise_error\n"
        "rows = df.mapInArrow(task, ddl); refused = raise_error(message)\n"
        "try:\n    go()\nexcept Exception as exc:\n"
        "    text = str(exc)\n"
        "    a = 'LABFORMAT_INVALID_INPUT:' in text\n"
        "    b = str(exc).startswith('x')\n"
        "    c = re.search('a', str(exc))\n"
        "    d = 'MISSING_ATTRIBUTES' in str(exc).upper()\n"
        "    e = exc.args[0] == 'y'\n"
        "    problems.append(f'{exc}: ' + str(exc).splitlines()[0])\n")
    TREES["tests.fake"] = bad
    try:
        assert [(n, a) for m, n, a in _tasks_outside_the_carrier() if m == "tests.fake"] == [(2, "mapInArrow"),
                                                                                              (2, "raise_error")]
        assert [n for m, n in _errors_read_from_text() if m == "tests.fake"] == [7, 8, 9, 10, 11]
    finally:
        del TREES["tests.fake"]
