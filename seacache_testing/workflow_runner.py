"""Check and run ComfyUI UI-format (LiteGraph, version 0.4) workflow files the way the frontend would submit them.

Without ComfyUI (plain JSON):
  ``load_workflow``, ``structure_problems`` (links, slots, types, dangling inputs), ``pack_node_ids`` (the
  pack's ``node_id="..."`` strings) and ``literal_widget_defaults`` (a node's widget inputs and defaults, read
  from its ``define_schema`` source with ``ast``, for nodes whose ``inputs=[...]`` is a literal list; defaults
  that name ``SeaCacheConfig`` fields are read from the core config, their one home).

With a ComfyUI session (``comfyui_harness.comfy_session``):
  ``to_api_prompt`` converts the UI graph into the API prompt the frontend posts to ``/prompt``: widget inputs
  (schema order; linked inputs are not widgets) take ``widgets_values`` in order, skipping the frontend-only
  values (the "control_after_generate" combo after seed-like INT/COMBO widgets, and the upload button of
  ``image_upload`` combos, appended after the required inputs); widgets a node gained after the workflow was
  saved (fewer values than widgets) take their defaults, as the frontend gives them; linked inputs become ``[from_id, from_slot]``;
  virtual nodes (Note, MarkdownNote) are left out, and so are bypassed nodes (mode 4), whose consumers read the
  bypassed node's input of the same type (``link_source``). ``validate_api_prompt`` runs ComfyUI's own
  ``execution.validate_prompt`` on it (combo options, ranges, types, required inputs). ``run_api_prompt`` executes
  an API prompt's nodes in topological order with ``ns.run_node``, each in ComfyUI's executing-node context, and
  returns every node's outputs and ui; ``run_ui_workflow`` converts a UI workflow and runs it so.
"""

from __future__ import annotations

import ast
import json
import re
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

PACK_ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS_DIR = PACK_ROOT / "example_workflows"  # the folder ComfyUI lists as the pack's templates

# Frontend-only nodes: drawn on the canvas, never sent to the server.
VIRTUAL_NODE_TYPES = frozenset({"Note", "MarkdownNote", "Reroute", "PrimitiveNode"})
# ComfyUI core node types the pack's workflows use, and the comfy_extras files that define them (nodes.py
# itself defines VAEDecode, LoadImage and PreviewImage).
CORE_NODE_FILES = {
    "CFGGuider": "nodes_custom_sampler.py",
    "KSamplerSelect": "nodes_custom_sampler.py",
    "RandomNoise": "nodes_custom_sampler.py",
    "SamplerCustomAdvanced": "nodes_custom_sampler.py",
    "CreateVideo": "nodes_video.py",
    "SaveVideo": "nodes_video.py",
    "PreviewAny": "nodes_preview_any.py",
    "VAEDecode": None,
    "LoadImage": None,
    "PreviewImage": None,
    # the any-model workflows (Wan 2.2 5B, Flux)
    "UNETLoader": None,
    "CLIPLoader": None,
    "DualCLIPLoader": None,
    "VAELoader": None,
    "CLIPTextEncode": None,
    "KSampler": None,
    "SaveImage": None,
    "ModelSamplingSD3": "nodes_model_advanced.py",
    "Wan22ImageToVideoLatent": "nodes_wan.py",
    "FluxGuidance": "nodes_flux.py",
    "BasicGuider": "nodes_custom_sampler.py",
    "BasicScheduler": "nodes_custom_sampler.py",
    "EmptySD3LatentImage": "nodes_sd3.py",
}
# LTX-2 (audio-video latents): only in a ComfyUI that has them, so loaded where the files exist.
AV_NODE_FILES = {
    "CheckpointLoaderSimple": None,
    "LTXAVTextEncoderLoader": "nodes_lt_audio.py",
    "LTXVAudioVAELoader": "nodes_lt_audio.py",
    "LTXVEmptyLatentAudio": "nodes_lt_audio.py",
    "LTXVAudioVAEDecode": "nodes_lt_audio.py",
    "EmptyLTXVLatentVideo": "nodes_lt.py",
    "LTXVConditioning": "nodes_lt.py",
    "LTXVScheduler": "nodes_lt.py",
    "LTXVConcatAVLatent": "nodes_lt.py",
    "LTXVSeparateAVLatent": "nodes_lt.py",
}
CORE_NODE_TYPES = frozenset(CORE_NODE_FILES) | frozenset(AV_NODE_FILES)
EXTRA_NODE_FILES = tuple(sorted({f for f in CORE_NODE_FILES.values() if f}))
AV_EXTRA_NODE_FILES = tuple(sorted({f for f in AV_NODE_FILES.values() if f}))
DYNAMIC_COMBO = "COMFY_DYNAMICCOMBO_V3"
WIDGET_TYPES = frozenset({"INT", "FLOAT", "STRING", "BOOLEAN", "COMBO", DYNAMIC_COMBO})
UPLOAD_FLAGS = ("image_upload", "video_upload", "animated_image_upload")
OPTIONAL_SHAPE = 7  # LiteGraph slot shape of an optional input (hollow circle)
BYPASS = 4  # a node's mode when the user bypassed it (Ctrl+B)
TOP_LEVEL_KEYS = ("last_node_id", "last_link_id", "nodes", "links", "groups", "config", "extra", "version")
NODE_KEYS = ("id", "type", "pos", "size", "flags", "order", "mode", "properties")


# ----------------------------------------------------------------------------- plain JSON


def workflow_paths() -> list[Path]:
    return sorted(WORKFLOWS_DIR.glob("*.json"))


def load_workflow(path) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def pack_node_ids(root: Path = PACK_ROOT) -> set[str]:
    """Node ids the pack defines: every ``node_id="..."`` in ``nodes/**/*.py`` (a text scan)."""
    ids = set()
    for path in sorted((root / "nodes").rglob("*.py")):
        ids.update(re.findall(r'node_id\s*=\s*"([^"]+)"', path.read_text(encoding="utf-8")))
    return ids


def nodes_by_id(workflow: dict) -> dict[int, dict]:
    return {n["id"]: n for n in workflow["nodes"]}


def structure_problems(workflow: dict, known_types=None) -> list[str]:
    """Everything wrong with the graph's bookkeeping, as messages (empty = fine)."""
    problems = [f"missing top-level key {k!r}" for k in TOP_LEVEL_KEYS if k not in workflow]
    if problems:
        return problems
    if workflow["version"] != 0.4:
        problems.append(f"version {workflow['version']!r} is not 0.4")
    ids = [n.get("id") for n in workflow["nodes"]]
    if len(set(ids)) != len(ids):
        problems.append(f"duplicate node ids in {ids}")
    nodes = nodes_by_id(workflow)
    link_ids = [link[0] for link in workflow["links"]]
    if len(set(link_ids)) != len(link_ids):
        problems.append("duplicate link ids")
    if ids and workflow["last_node_id"] < max(ids):
        problems.append(f"last_node_id {workflow['last_node_id']} < largest node id {max(ids)}")
    if link_ids and workflow["last_link_id"] < max(link_ids):
        problems.append(f"last_link_id {workflow['last_link_id']} < largest link id {max(link_ids)}")
    for node in workflow["nodes"]:
        where = f"node {node.get('id')} ({node.get('type')})"
        problems += [f"{where}: missing {k!r}" for k in NODE_KEYS if k not in node]
        if known_types is not None and node.get("type") not in known_types:
            problems.append(f"{where}: unknown node type")
        if node.get("type") not in VIRTUAL_NODE_TYPES and node.get("properties", {}).get("Node name for S&R") != node.get("type"):
            problems.append(f"{where}: properties['Node name for S&R'] should be the node type")
        for slot, inp in enumerate(node.get("inputs") or []):
            if inp.get("link") is None and inp.get("shape") != OPTIONAL_SHAPE and "widget" not in inp:
                problems.append(f"{where}: input {slot} {inp.get('name')!r} is required but not linked")
    links = {}
    for link in workflow["links"]:
        if len(link) != 6:
            problems.append(f"link {link!r} is not [id, from_node, from_slot, to_node, to_slot, type]")
            continue
        lid, src, sslot, dst, dslot, typ = link
        links[lid] = link
        if src not in nodes or dst not in nodes:
            problems.append(f"link {lid}: endpoint node {src if src not in nodes else dst} does not exist")
            continue
        outs, ins = nodes[src].get("outputs") or [], nodes[dst].get("inputs") or []
        if not 0 <= sslot < len(outs):
            problems.append(f"link {lid}: node {src} has no output slot {sslot}")
            continue
        if not 0 <= dslot < len(ins):
            problems.append(f"link {lid}: node {dst} has no input slot {dslot}")
            continue
        out, inp = outs[sslot], ins[dslot]
        if out.get("type") != typ:
            problems.append(f"link {lid}: type {typ!r} but node {src} output {sslot} is {out.get('type')!r}")
        if inp.get("type") not in (typ, "*"):
            problems.append(f"link {lid}: {typ!r} into node {dst} input {inp.get('name')!r} of type {inp.get('type')!r}")
        if inp.get("link") != lid:
            problems.append(f"link {lid}: node {dst} input {dslot} names link {inp.get('link')!r}")
        if lid not in (out.get("links") or []):
            problems.append(f"link {lid}: missing from node {src} output {sslot} links")
    for node in workflow["nodes"]:
        for slot, out in enumerate(node.get("outputs") or []):
            for lid in out.get("links") or []:
                if lid not in links or links[lid][1] != node["id"] or links[lid][2] != slot:
                    problems.append(f"node {node['id']} output {slot} lists link {lid}, which does not start there")
        for slot, inp in enumerate(node.get("inputs") or []):
            lid = inp.get("link")
            if lid is not None and (lid not in links or links[lid][3] != node["id"] or links[lid][4] != slot):
                problems.append(f"node {node['id']} input {slot} names link {lid}, which does not end there")
    return problems


def upstream(workflow: dict, node_id: int, input_name: str) -> tuple[dict, int] | None:
    """``(source node, output slot)`` feeding ``input_name`` of node ``node_id`` (None when unlinked)."""
    nodes = nodes_by_id(workflow)
    for inp in nodes[node_id].get("inputs") or []:
        if inp["name"] == input_name and inp.get("link") is not None:
            link = next(link for link in workflow["links"] if link[0] == inp["link"])
            return nodes[link[1]], link[2]
    return None


def nodes_of_type(workflow: dict, node_type: str) -> list[dict]:
    return [n for n in workflow["nodes"] if n["type"] == node_type]


def topological_order(workflow: dict, skip_types=VIRTUAL_NODE_TYPES) -> list[int]:
    """Node ids so that every node comes after the nodes feeding it (ties by id); raises on a cycle."""
    ids = sorted(n["id"] for n in workflow["nodes"] if n["type"] not in skip_types)
    deps = defaultdict(set)
    for _, src, _, dst, _, _ in workflow["links"]:
        deps[dst].add(src)
    order, state = [], {}

    def visit(nid):
        if state.get(nid) == "done":
            return
        if state.get(nid) == "visiting":
            raise ValueError(f"cycle through node {nid}")
        state[nid] = "visiting"
        for dep in sorted(deps[nid]):
            visit(dep)
        state[nid] = "done"
        order.append(nid)

    for nid in ids:
        visit(nid)
    return order


def literal_widget_defaults(node_id: str, root: Path = PACK_ROOT) -> list[tuple[str, str, Any]] | None:
    """``[(name, io type, default)]`` of the widget inputs of pack node ``node_id`` in schema order, read from
    the source of its ``define_schema`` (None when its ``inputs=`` is not a literal list)."""
    for path in sorted((root / "nodes").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        helpers = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
        for call in ast.walk(tree):
            if not (isinstance(call, ast.Call) and getattr(call.func, "attr", None) == "Schema"):
                continue
            kw = {k.arg: k.value for k in call.keywords}
            if not (isinstance(kw.get("node_id"), ast.Constant) and kw["node_id"].value == node_id):
                continue
            inputs = kw.get("inputs")
            if isinstance(inputs, ast.Call) and getattr(inputs.func, "id", None) in helpers:
                # inputs=_helper(...): a module-level function that returns a literal list
                returns = [r.value for r in ast.walk(helpers[inputs.func.id]) if isinstance(r, ast.Return)]
                inputs = returns[0] if len(returns) == 1 else None
            if not isinstance(inputs, ast.List):
                return None
            widgets = []
            for item in inputs.elts:
                io_type = getattr(getattr(item.func, "value", None), "attr", None)
                if io_type not in ("Int", "Float", "String", "Boolean", "Combo"):
                    continue
                item_kw = {k.arg: k.value for k in item.keywords}
                default = _source_default(item_kw["default"], tree) if "default" in item_kw else None
                widgets.append((ast.literal_eval(item.args[0]), io_type.upper(), default))
            return widgets
    raise KeyError(f"no define_schema with node_id={node_id!r} under {root / 'nodes'}")


def _source_default(node: ast.expr, module: ast.Module) -> Any:
    """The value of a widget's ``default=`` expression: a literal; ``DEFAULTS.<field>`` (a field of the module's
    ``DEFAULTS = SeaCacheConfig()``); or ``choice_label(<CHOICES>, DEFAULTS.<field>)``, the option of the module's
    literal ``<CHOICES>`` dict whose value is that field. ``...`` for any other expression computed at run time."""
    from seacache_core import SeaCacheConfig

    def config_field(expr):
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "DEFAULTS":
            return getattr(SeaCacheConfig(), expr.attr)
        raise ValueError(ast.dump(expr))

    try:
        if isinstance(node, ast.Attribute):
            return config_field(node)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "choice_label" and len(node.args) == 2:
            name, value = node.args[0], config_field(node.args[1])
            choices = next(ast.literal_eval(a.value) for a in module.body if isinstance(a, ast.Assign)
                           and any(getattr(t, "id", None) == getattr(name, "id", ...) for t in a.targets))
            return next(label for label, choice in choices.items() if choice == value)
        return ast.literal_eval(node)
    except (ValueError, StopIteration):
        return ...


# ----------------------------------------------------------------------------- with ComfyUI


def _input_specs(cls) -> list[tuple[str, str, Any, dict, bool]]:
    """``[(section, name, type, options, is_widget)]`` of a node class, required then optional."""
    return _section_specs(cls.INPUT_TYPES())


def _section_specs(info: dict, prefix: str = "") -> list[tuple[str, str, Any, dict, bool]]:
    """Specs of one ``{"required": ..., "optional": ...}`` block; names of nested inputs get ``prefix``. Inputs the
    frontend hides get no widget."""
    specs = []
    for section in ("required", "optional"):
        for name, spec in (info.get(section) or {}).items():
            typ = spec[0]
            opts = spec[1] if len(spec) > 1 and isinstance(spec[1], dict) else {}
            if opts.get("hidden"):
                continue
            first = typ.split(",")[0] if isinstance(typ, str) else typ  # a multi-type input shows its first type's widget
            is_widget = (isinstance(typ, (list, tuple)) or first in WIDGET_TYPES) and not opts.get("forceInput")
            specs.append((section, prefix + name, typ, opts, is_widget))
    return specs


def _dynamic_combo_children(name: str, opts: dict, value) -> list[tuple[str, str, Any, dict, bool]]:
    """The inputs a dynamic combo (newer ComfyUI) shows for its selected option, named ``<combo>.<input>`` as the
    frontend serializes them, in the order its widgets follow the combo's."""
    for option in opts.get("options", []):
        if option.get("key") == value:
            return _section_specs(option.get("inputs") or {}, prefix=name + ".")
    raise ValueError(f"dynamic combo {name!r} has no option {value!r}")


def _has_control_widget(name: str, typ, opts: dict) -> bool:
    """Whether the frontend adds a "control_after_generate" combo after this widget (serialized with it)."""
    if typ == "INT":
        flag = opts.get("control_after_generate")
        return bool(flag) if flag is not None else name in ("seed", "noise_seed")
    return (isinstance(typ, (list, tuple)) or typ == "COMBO") and bool(opts.get("control_after_generate"))


def _widget_default(name: str, typ, opts: dict, node: dict):
    """The value the frontend gives a widget that has no saved value: its default, else a combo's first option."""
    if "default" in opts:
        return opts["default"]
    options = typ if isinstance(typ, (list, tuple)) else opts.get("options")
    if options:
        return options[0]["key"] if isinstance(options[0], dict) else options[0]
    raise ValueError(f"node {node['id']} ({node['type']}): widget {name!r} has no saved value and no default")


def widget_inputs(ns, node: dict) -> dict[str, Any]:
    """The node's widget values by input name (``widgets_values`` mapped onto its widget inputs)."""
    cls = ns.node(node["type"])
    values = list(node.get("widgets_values") or [])
    linked = {i["name"] for i in node.get("inputs") or [] if i.get("link") is not None}
    out, pos, upload = {}, 0, False
    specs = _input_specs(cls)
    k = 0
    while k < len(specs):
        section, name, typ, opts, is_widget = specs[k]
        if is_widget:
            if pos >= len(values):  # a widget the node gained after the workflow was saved: the frontend
                value = _widget_default(name, typ, opts, node)  # leaves it at its default, and so does this runner
            else:
                value = values[pos]
                pos += 1 + _has_control_widget(name, typ, opts)
            if name not in linked:  # a widget converted to a linked input keeps its value but is not used
                out[name] = value
            if typ == DYNAMIC_COMBO:
                specs[k + 1:k + 1] = _dynamic_combo_children(name, opts, value)
            upload = upload or (section == "required" and any(opts.get(f) for f in UPLOAD_FLAGS))
        last_required = k + 1 == len(specs) or specs[k + 1][0] != "required"
        if upload and section == "required" and last_required:
            pos += 1  # the upload button the frontend appends to the required inputs ("image")
            upload = False
        k += 1
    if pos < len(values):
        raise ValueError(f"node {node['id']} ({node['type']}): {len(values)} widgets_values for {pos} widget slots: {values!r}")
    return out


def to_api_prompt(ns, workflow: dict, overrides: dict | None = None) -> dict[str, dict]:
    """The API prompt ``{id: {"class_type", "inputs"}}`` the frontend would queue for this workflow.

    ``overrides`` maps ``(node type or node id, input name)`` to a value replacing that widget's value.
    """
    overrides = overrides or {}
    nodes = nodes_by_id(workflow)
    links = {link[0]: link for link in workflow["links"]}
    prompt = {}
    for nid in topological_order(workflow):
        node = nodes[nid]
        if node.get("mode", 0) == BYPASS:
            continue
        if node.get("mode", 0) != 0:
            raise ValueError(f"node {nid} ({node['type']}) is muted (mode {node['mode']}): not supported here")
        inputs = widget_inputs(ns, node)
        for name in list(inputs):
            for key in ((nid, name), (node["type"], name)):
                if key in overrides:
                    inputs[name] = overrides[key]
                    break
        for inp in node.get("inputs") or []:
            source = None if inp.get("link") is None else link_source(nodes, links, inp["link"])
            if source is not None:
                inputs[inp["name"]] = source
        prompt[str(nid)] = {"class_type": node["type"], "inputs": inputs, "_meta": {"title": node.get("title", node["type"])}}
    return prompt


def link_source(nodes: dict, links: dict, link_id: int) -> list | None:
    """``[node id, output slot]`` a link delivers, followed through bypassed nodes (mode 4) as the frontend resolves
    them: output slot ``e`` of a bypassed node reads its input ``e`` when that input has the output's type, else its
    first input of that type; None when there is none (the consumer is sent without the input)."""
    _, src, slot, _, _, _ = links[link_id]
    while nodes[src].get("mode", 0) == BYPASS:
        inputs, kind = nodes[src].get("inputs") or [], nodes[src]["outputs"][slot]["type"]
        matching = [i for i, inp in enumerate(inputs) if inp["type"] == kind]
        index = slot if slot < len(inputs) and inputs[slot]["type"] == kind else (matching[0] if matching else None)
        if index is None or inputs[index].get("link") is None:
            return None
        _, src, slot, _, _, _ = links[inputs[index]["link"]]
    return [str(src), slot]


def validate_api_prompt(prompt: dict) -> list[str]:
    """ComfyUI's own validation of a prompt (``execution.validate_prompt``): messages, empty when valid."""
    import asyncio

    import execution

    valid, error, _, node_errors = asyncio.run(execution.validate_prompt("workflow-test", prompt, None))
    if valid:
        return []
    messages = [str(error)]
    for nid, info in (node_errors or {}).items():
        for err in info.get("errors", []):
            messages.append(f"node {nid} ({info.get('class_type')}): {err.get('message')}: {err.get('details')}")
    return messages


def _hidden_values(ns, nid: str, prompt: dict, workflow: dict) -> dict:
    from comfy_api.latest import io

    return {io.Hidden.unique_id: nid, io.Hidden.prompt: prompt, io.Hidden.extra_pnginfo: {"workflow": workflow}}


def _nested_dynamic_inputs(cls, prompt_inputs: dict, kwargs: dict) -> dict:
    """A V3 node's inputs grouped the way ComfyUI's executor passes dynamic ones (``format.codec`` ->
    ``{"format": {"format": ..., "codec": ...}}``) on versions that have them; unchanged elsewhere."""
    from comfy_api.latest import _io

    if not hasattr(_io, "build_nested_inputs"):
        return kwargs
    _, _, v3_data = _io.get_finalized_class_inputs(cls.INPUT_TYPES(), prompt_inputs)
    return _io.build_nested_inputs(kwargs, v3_data)


def run_ui_workflow(ns, workflow: dict, overrides: dict | None = None, validate: bool = True, stand_ins: dict | None = None) -> SimpleNamespace:
    """Convert and execute ``workflow`` node by node (see :func:`run_api_prompt`)."""
    return run_api_prompt(ns, to_api_prompt(ns, workflow, overrides), validate, stand_ins, workflow)


def override_api_prompt(prompt: dict, overrides: dict) -> dict:
    """A copy of an API prompt with ``overrides`` (``(class type or node id, input name)`` -> value) replacing the
    values of inputs it has (inputs it lacks stay absent, as in the saved prompt)."""
    prompt = json.loads(json.dumps(prompt))
    for nid, entry in prompt.items():
        for name in entry["inputs"]:
            for key in ((int(nid), name), (entry["class_type"], name)):
                if key in overrides:
                    entry["inputs"][name] = overrides[key]
                    break
    return prompt


def run_api_prompt(ns, prompt: dict, validate: bool = True, stand_ins: dict | None = None, workflow: dict | None = None) -> SimpleNamespace:
    """Execute an API prompt node by node in topological order. Returns ``SimpleNamespace(prompt, order, outputs,
    ui, inputs)``; ``outputs``/``ui``/``inputs`` are keyed by node id (int).

    ``stand_ins`` maps a node type to ``f(**inputs) -> outputs tuple`` run instead of that node (e.g. loaders
    replaced by tiny random-weight models, text encoders by random embeddings); every other node runs for real.
    ``workflow`` (the UI graph, if any) is what the nodes see as the workflow in their extra PNG info."""
    stand_ins = stand_ins or {}
    from comfy_api.internal import _ComfyNodeInternal
    from comfy_execution.utils import CurrentNodeContext

    if validate:
        problems = validate_api_prompt(prompt)
        if problems:
            raise ValueError("ComfyUI rejects the prompt:\n" + "\n".join(problems))
    order = api_prompt_order(prompt)
    outputs, uis, resolved = {}, {}, {}
    for key in order:
        entry, nid = prompt[key], int(key)
        kwargs = {name: (outputs[int(v[0])][v[1]] if isinstance(v, list) else v) for name, v in entry["inputs"].items()}
        if entry["class_type"] in stand_ins:
            outputs[nid], uis[nid], resolved[nid] = tuple(stand_ins[entry["class_type"]](**kwargs)), None, kwargs
            continue
        cls = ns.node(entry["class_type"])
        hidden = None
        if isinstance(cls, type) and issubclass(cls, _ComfyNodeInternal):
            hidden = _hidden_values(ns, key, prompt, workflow or {})
            kwargs = _nested_dynamic_inputs(cls, entry["inputs"], kwargs)
        else:  # V1: hidden inputs are keyword arguments named in INPUT_TYPES()["hidden"]
            values = {"UNIQUE_ID": key, "PROMPT": prompt, "EXTRA_PNGINFO": {"workflow": workflow or {}}}
            kwargs.update({n: values[v] for n, v in (cls.INPUT_TYPES().get("hidden") or {}).items() if v in values})
        with CurrentNodeContext("workflow-test", key):  # as ComfyUI's executor runs each node
            result = ns.run_node(entry["class_type"], hidden=hidden, **kwargs)
        outputs[nid], uis[nid], resolved[nid] = result.outputs, result.ui, kwargs
    return SimpleNamespace(prompt=prompt, order=[int(k) for k in order], outputs=outputs, ui=uis, inputs=resolved)


def api_prompt_order(prompt: dict) -> list[str]:
    """Node ids of an API prompt so that every node comes after the nodes feeding it (ties by numeric id)."""
    order, done = [], set()

    def visit(key):
        if key in done:
            return
        done.add(key)
        for value in prompt[key]["inputs"].values():
            if isinstance(value, list) and len(value) == 2 and str(value[0]) in prompt:
                visit(str(value[0]))
        order.append(key)

    for key in sorted(prompt, key=int):
        visit(key)
    return order
