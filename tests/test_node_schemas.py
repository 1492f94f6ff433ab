"""Every input a node offers on the canvas is one its code accepts: an optional input the schema lists but the
node's function does not take fails with a TypeError the moment an artist connects it."""

import inspect


def schema_inputs(node_class) -> set[str]:
    declared = node_class.INPUT_TYPES()
    return {name for section in ("required", "optional") for name in declared.get(section, {})}


def accepted_inputs(node_class) -> set[str] | None:
    """The keyword arguments the node's function takes; None when it takes any (**kwargs)."""
    # a V3 node's FUNCTION is ComfyUI's generic entry point, which passes every input on to its execute()
    function = node_class.execute if hasattr(node_class, "define_schema") else getattr(node_class, node_class.FUNCTION)
    parameters = inspect.signature(function).parameters.values()
    if any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters):
        return None
    return {parameter.name for parameter in parameters}


def test_every_schema_input_is_accepted_by_the_node(engine):
    registered = {node_id: cls for node_id, cls in engine.nodes.items() if node_id.startswith("CachedSearch")}
    assert len(registered) >= 16
    assert sum(accepted_inputs(node_class) is not None for node_class in registered.values()) >= 16
    refused = {}
    for node_id, node_class in registered.items():
        accepted = accepted_inputs(node_class)
        if accepted is not None and (missing := sorted(schema_inputs(node_class) - accepted)):
            refused[node_id] = missing
    assert refused == {}
