"""nodes/ stays layered (issue 52): a module that defines nodes (``*_nodes.py``) imports no other one, so a piece two
node modules share lives in a lower module that both import (``sampler_node``, ``ranking_panel``,
``verifier_inputs``), and the extension's load step hands a route the node classes it asks."""

import ast
import pathlib

NODES = pathlib.Path(__file__).resolve().parents[1] / "nodes"


def imported_modules(path: pathlib.Path) -> set[str]:
    """The modules of nodes/ that ``path`` imports (``from .x import ...`` and ``from . import x``)."""
    found = set()
    for statement in ast.walk(ast.parse(path.read_text())):
        if isinstance(statement, ast.ImportFrom) and statement.level == 1:
            found |= {statement.module.split(".")[0]} if statement.module else {name.name for name in statement.names}
    return found


def test_no_node_module_imports_another():
    node_modules = {path.stem for path in NODES.glob("*_nodes.py")}
    assert {"search_nodes", "distributed_nodes", "verifier_nodes", "calibrate_nodes"} <= node_modules
    crossing = {(path.stem, imported) for path in NODES.glob("*_nodes.py")
                for imported in imported_modules(path) & node_modules}
    assert crossing == set()


def test_no_route_module_imports_a_node_module():
    """A module that serves HTTP routes (``@routes.get`` / ``@routes.post``) reads what it shares with a node from a
    lower module (the schedule's reading: ``pruning_schedule``), never the node module itself."""
    node_modules = {path.stem for path in NODES.glob("*_nodes.py")}
    route_modules = [path for path in NODES.glob("*.py") if "@routes.post" in path.read_text()
                     or "@routes.get" in path.read_text()]
    assert {"schedule_route", "calibration_cost", "saved_work_routes"} <= {path.stem for path in route_modules}
    crossing = {(path.stem, imported) for path in route_modules for imported in imported_modules(path) & node_modules}
    assert crossing == set()
