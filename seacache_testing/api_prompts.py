"""What the ComfyUI frontend queues after a user bypasses or deletes a node, as edits of an API prompt
(``{id: {"class_type", "inputs"}}``), with the node types read from ComfyUI's ``/object_info`` (or the same
``{"input": {"required", "optional"}, "input_order", "output"}`` built from a session's node classes by
:func:`object_info_of`).

- :func:`bypass_node`: the node in mode 4 (Ctrl+B). The frontend leaves it out of the prompt and feeds each consumer of
  its output slot ``e`` from the node's input ``e`` when that input has the output's type, else from its first input
  of that type (``ExecutableNodeDTO._getBypassSlotIndex`` in the frontend 1.49 bundle); a consumer with no such input
  is sent without it.
- :func:`delete_node`: the node deleted. With "Keep all links when deleting nodes" (``Comfy.Node.BypassAllLinksOnDelete``,
  on by default since frontend 1.3.40) the consumers are reconnected the same way; without it they lose the input.
- :func:`prune_unfed`: what the server then runs: a node missing a required input fails validation, and so does
  every node fed by it; ComfyUI runs the outputs that remain.
- :func:`without_seacache`: the graph as if it never had SeaCache: Apply and Stats bypassed, the nodes that only
  showed Stats' summary and chart gone.
"""

from __future__ import annotations

import json

WIDGET_TYPES = ("INT", "FLOAT", "STRING", "BOOLEAN", "COMBO")
SEACACHE_NODES = ("SeaCacheApply", "SeaCacheStats")


def object_info_of(ns, class_types) -> dict:
    """``/object_info``'s entries (inputs, their order, output types) for ``class_types`` from a harness session's
    node classes (``ns.node``)."""
    info = {}
    for class_type in class_types:
        cls = ns.node(class_type)
        inputs = cls.INPUT_TYPES()
        info[class_type] = {"input": inputs, "output": list(cls.RETURN_TYPES),
                            "input_order": {section: list(inputs.get(section) or {}) for section in ("required", "optional")}}
    return info


def socket_inputs(object_info: dict, class_type: str) -> list[tuple[str, str]]:
    """``(name, type)`` of a node's input sockets in slot order: the inputs that are no widget (a widget has a
    primitive type, or a list of options), required before optional, each in ``input_order``."""
    info = object_info[class_type]
    order = info.get("input_order") or {section: list(info["input"].get(section) or {}) for section in ("required", "optional")}
    sockets = []
    for section in ("required", "optional"):
        for name in order.get(section) or []:
            kind = info["input"][section][name][0]
            if isinstance(kind, str) and kind not in WIDGET_TYPES:
                sockets.append((name, kind))
    return sockets


def bypass_source(prompt: dict, node_id: str, slot: int, object_info: dict):
    """What a consumer of output ``slot`` of the bypassed ``node_id`` reads instead (the link into the node's input
    chosen by the frontend's rule); None when no input has the output's type."""
    node = prompt[node_id]
    kind = object_info[node["class_type"]]["output"][slot]
    sockets = socket_inputs(object_info, node["class_type"])
    matching = [name for name, t in sockets if t == kind]
    name = sockets[slot][0] if slot < len(sockets) and sockets[slot][1] == kind else (matching[0] if matching else None)
    return None if name is None else node["inputs"].get(name)


def _rewired(prompt: dict, node_id: str, object_info: dict, relink: bool) -> dict:
    out = json.loads(json.dumps({k: v for k, v in prompt.items() if k != node_id}))
    for entry in out.values():
        for name, value in list(entry["inputs"].items()):
            if isinstance(value, list) and len(value) == 2 and str(value[0]) == node_id:
                source = bypass_source(prompt, node_id, value[1], object_info) if relink else None
                if source is None:
                    del entry["inputs"][name]
                else:
                    entry["inputs"][name] = source
    return out


def bypass_node(prompt: dict, node_id: str, object_info: dict) -> dict:
    """The prompt the frontend queues with ``node_id`` bypassed (mode 4)."""
    return _rewired(prompt, node_id, object_info, relink=True)


def delete_node(prompt: dict, node_id: str, object_info: dict, keep_links: bool = True) -> dict:
    """The prompt the frontend queues after ``node_id`` was deleted, with or without "Keep all links when deleting
    nodes"."""
    return _rewired(prompt, node_id, object_info, relink=keep_links)


def connect(prompt: dict, node_id: str, name: str, source) -> dict:
    """A copy of ``prompt`` with input ``name`` of ``node_id`` linked to ``source`` (``[node, slot]``)."""
    out = json.loads(json.dumps(prompt))
    out[node_id]["inputs"][name] = source
    return out


def prune_unfed(prompt: dict, object_info: dict) -> dict:
    """The part of ``prompt`` the server runs: nodes missing a required input left out, and then the nodes they
    fed, until none is missing one."""
    while True:
        unfed = [k for k, e in prompt.items()
                 if any(name not in e["inputs"] for name in object_info[e["class_type"]]["input"].get("required") or {})]
        if not unfed:
            return prompt
        for node in unfed:
            prompt = delete_node(prompt, node, object_info, keep_links=False)


def without_seacache(prompt: dict, object_info: dict) -> dict:
    """The graph as if it never had SeaCache: SeaCache Apply and Stats bypassed, then what the server runs of it
    (the preview nodes of Stats' summary and chart lose their input and drop out)."""
    for node in [k for k, e in prompt.items() if e["class_type"] in SEACACHE_NODES]:
        prompt = bypass_node(prompt, node, object_info)
    return prune_unfed(prompt, object_info)
