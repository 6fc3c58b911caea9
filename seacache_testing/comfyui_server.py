"""A real ComfyUI server for benchmarks and tests: ``main.py`` on a loopback port with a temp base directory, driven
over HTTP and its websocket the way the frontend drives it.

``ComfyServer`` starts ``main.py`` with the given flags (``--cpu`` by default) and its own ``custom_nodes`` under
the base directory; ``link_custom_node`` places a folder there (this pack, a probe). ``to_api_prompt`` converts a
UI workflow into the API prompt the frontend would queue, from the server's own ``/object_info``. ``EventLog``
records the websocket events of one client with their arrival times (which node runs when, sampler progress).
Nothing here imports ComfyUI: the server runs in its own process.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

PACK_ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def link_custom_node(base: Path, folder: Path, name: str) -> None:
    """Make ``folder`` a custom node of the server whose base directory is ``base``."""
    nodes = base / "custom_nodes"
    nodes.mkdir(parents=True, exist_ok=True)
    (nodes / name).symlink_to(folder, target_is_directory=True)


class ComfyServer:
    """ComfyUI's ``main.py`` on 127.0.0.1 with ``base`` as its base directory (custom_nodes, models, io); its log is
    ``base/server.log``. No frontend is served (an empty ``--front-end-root``), so no frontend package is needed."""

    def __init__(self, comfyui: Path, python: str, base: Path, flags=("--cpu",), env: dict | None = None):
        self.port, self.base = free_port(), base
        frontend = base / "no_frontend"
        frontend.mkdir(parents=True, exist_ok=True)
        self.log = open(base / "server.log", "w")
        self.proc = subprocess.Popen(
            [python, str(Path(comfyui) / "main.py"), *flags, "--listen", "127.0.0.1", "--port", str(self.port),
             "--base-directory", str(base), "--disable-auto-launch", "--preview-method", "none",
             "--front-end-root", str(frontend)],
            cwd=str(comfyui), stdout=self.log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})

    def call(self, path: str, data=None, timeout=60):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method="GET" if data is None else "POST",
                                     data=None if data is None else json.dumps(data).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            body = r.read()
        return json.loads(body) if body else None

    def wait_ready(self, path: str, timeout: float):
        """The answer of ``path`` once the server answers it (its custom nodes are loaded by then)."""
        end = time.time() + timeout
        while time.time() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ComfyUI exited ({self.proc.returncode}); see {self.base / 'server.log'}")
            try:
                return self.call(path)
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(1)
        raise TimeoutError(f"ComfyUI did not come up in {timeout:.0f} s; see {self.base / 'server.log'}")

    def queue(self, prompt: dict, client_id: str) -> str:
        return self.call("/prompt", {"prompt": prompt, "client_id": client_id})["prompt_id"]

    def wait_done(self, prompt_id: str, timeout: float):
        """The prompt's history entry once it ended; None when it left the queue without running (deleted)."""
        end = time.time() + timeout
        while time.time() < end:
            history = self.call(f"/history/{prompt_id}")
            if prompt_id in history:
                return history[prompt_id]
            queue = self.call("/queue")
            if not any(item[1] == prompt_id for item in queue["queue_running"] + queue["queue_pending"]):
                time.sleep(0.3)
                return self.call(f"/history/{prompt_id}").get(prompt_id)
            time.sleep(0.2)
        raise TimeoutError(f"prompt {prompt_id} did not finish in {timeout}s")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join((self.base / "server.log").read_text(errors="replace").splitlines()[-lines:])


def outcome(entry) -> str:
    """success, interrupted, error, or cancelled (no history entry) of a finished prompt."""
    if entry is None:
        return "cancelled"
    status = entry.get("status", {})
    events = [m[0] for m in status.get("messages", [])]
    if "execution_interrupted" in events:
        return "interrupted"
    return "success" if status.get("status_str") == "success" and status.get("completed") else "error"


def cached_nodes(entry) -> set[str]:
    """The node ids ComfyUI took from its cache instead of running, in a history entry."""
    return {node for event, data in entry["status"]["messages"] if event == "execution_cached" for node in data["nodes"]}


def comfyui_version(comfyui: Path) -> str:
    return (Path(comfyui) / "comfyui_version.py").read_text().split('"')[1]


def with_pack_and_probe(base: Path) -> Path:
    """``base`` laid out for a server with this pack and the probe (``server_probe``) as custom nodes and an empty
    models/diffusion_models, which it returns."""
    link_custom_node(base, PACK_ROOT, "ComfyUI-SeaCache")
    link_custom_node(base, PACK_ROOT / "seacache_testing" / "server_probe", "seacache_probe")
    models = base / "models" / "diffusion_models"
    models.mkdir(parents=True)
    return models


def retention(server: ComfyServer, trace: bool = False) -> dict:
    """What the server holds now (``server_probe``'s ``/seacache_probe/retention``; ``trace``: and what it gained)."""
    return server.call("/seacache_probe/retention" + ("?trace=1" if trace else ""), timeout=600)


def run_prompt(server: ComfyServer, prompt: dict, timeout: float = 900.0) -> dict:
    """Queue ``prompt`` and return its history entry once it ended; a prompt ComfyUI refuses raises with the
    server's node errors."""
    try:
        prompt_id = server.queue(prompt, "seacache-test")
    except urllib.error.HTTPError as error:
        raise RuntimeError(f"ComfyUI refused the prompt: {error.read().decode()[:3000]}") from None
    return server.wait_done(prompt_id, timeout)


def error_message(entry) -> str:
    """The exception message of a failed prompt's history entry."""
    for event, data in (entry or {}).get("status", {}).get("messages", []):
        if event == "execution_error":
            return f"{data.get('node_type')}: {data.get('exception_type')}: {data.get('exception_message', '').strip()}"
    return "no execution_error message"


def to_api_prompt(server: ComfyServer, workflow: dict, overrides: dict | None = None) -> dict:
    """The API prompt the frontend would queue for the UI ``workflow``, with the node schemas of the running
    server's ``/object_info`` (``workflow_runner.to_api_prompt``'s conversion; ``overrides`` as there)."""
    from . import workflow_runner

    info = server.call("/object_info", timeout=120)
    nodes = SimpleNamespace(node=lambda kind: SimpleNamespace(INPUT_TYPES=lambda: info[kind]["input"]))
    return workflow_runner.to_api_prompt(nodes, workflow, overrides)


class EventLog:
    """The websocket events the server sends to ``client_id``, as ``(perf_counter seconds, type, data)`` in arrival
    order, recorded by a background thread (aiohttp, which ComfyUI's server requires anyway)."""

    def __init__(self, server: ComfyServer, client_id: str):
        self.events: list[tuple[float, str, dict]] = []
        self.client_id = client_id
        self.url = f"http://127.0.0.1:{server.port}/ws?clientId={client_id}"
        self.loop = asyncio.new_event_loop()
        self.connected = threading.Event()
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(self._listen(),), daemon=True)
        self.thread.start()
        if not self.connected.wait(30):
            raise TimeoutError("the server's websocket did not accept a connection")

    async def _listen(self):
        import aiohttp

        async with aiohttp.ClientSession() as session, session.ws_connect(self.url) as ws:
            self.ws = ws
            self.connected.set()
            async for message in ws:
                if message.type == aiohttp.WSMsgType.TEXT:
                    event = json.loads(message.data)
                    self.events.append((time.perf_counter(), event.get("type"), event.get("data") or {}))

    def of_prompt(self, prompt_id: str, timeout: float = 30) -> list[tuple[float, str, dict]]:
        """The prompt's events, once its last one (``executing`` with node None) arrived: the history can show a
        finished prompt before its last websocket messages are read."""
        end = time.time() + timeout
        while True:
            mine = [e for e in list(self.events) if e[2].get("prompt_id") == prompt_id]
            if any(kind == "executing" and data.get("node") is None for _, kind, data in mine) or time.time() > end:
                return mine
            time.sleep(0.05)

    def close(self):
        if getattr(self, "ws", None) is not None:
            asyncio.run_coroutine_threadsafe(self.ws.close(), self.loop).result(10)
        self.thread.join(10)


def node_seconds(events: list[tuple[float, str, dict]]) -> dict[str, float]:
    """Seconds each executed node ran, from one prompt's events: from its ``executing`` event to the next one
    (ComfyUI sends ``executing`` with node None when the prompt ends)."""
    starts = [(t, data.get("node")) for t, kind, data in events if kind == "executing"]
    return {node: later - t for (t, node), (later, _) in zip(starts, starts[1:]) if node is not None}


def progress_times(events: list[tuple[float, str, dict]], node: str) -> list[float]:
    """Arrival times of ``node``'s progress events (a sampler sends one per step)."""
    return [t for t, kind, data in events if kind == "progress" and str(data.get("node")) == str(node)]
