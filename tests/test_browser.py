"""The Cosmos3 example workflows in a real browser: ComfyUI's own server (``main.py --cpu``) on a free loopback port with
this pack as a custom node and tiny Cosmos3 checkpoints (one per family member's layout), its frontend in headless Chromium driven by
``tests/browser_run.mjs`` (playwright-core). The canvas must load with every node type known, the pack's web
extension must not log errors, the queued prompt must succeed with a video (an image for text-to-image; with an audio
stream for the sound workflow), and SeaCache Stats must draw its chart.

``COMFYUI_FRONTEND_ROOT`` (optional) serves another frontend build, e.g. a newer ``comfyui_frontend_package/static``
(``--front-end-root``), to check the workflows in a frontend newer than the one ComfyUI pins.

Needs ``COMFYUI_PATH`` (the server runs with this interpreter), a Chromium binary (``chromium`` on PATH or
``$CHROMIUM_PATH``) and Node.js with ``playwright-core`` resolvable from tests/ (``npm install --no-save
--no-package-lock --prefix tests playwright-core``); skips, saying which is missing, otherwise.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from seacache_testing.comfyui_harness import import_pack_module

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
DRIVER = TESTS / "browser_run.mjs"
WORKFLOWS = ["cosmos3_t2v_seacache.json", "cosmos3_i2v_seacache.json"]
# The family workflows: (tiny checkpoint preset, model folder it is kept in) of their member.
FAMILY = {
    "cosmos3_edge_t2v_12gb.json": ("tiny-edge", "cosmos3"),  # where the ComfyUI-Cosmos3 pack keeps checkpoints
    "cosmos3_t2i_seacache.json": ("tiny-t2i", "diffusion_models"),
    "cosmos3_super_i2v_seacache.json": ("tiny-i2v", "diffusion_models"),
    "cosmos3_i2v_4step_seacache.json": ("tiny-i2v-4step", "diffusion_models"),
    "cosmos3_t2v_sound_seacache.json": ("tiny-sound", "diffusion_models"),
}
IMAGE_WORKFLOWS = {"cosmos3_t2i_seacache.json"}
FOUR_STEP_WORKFLOWS = {"cosmos3_i2v_4step_seacache.json"}
SOUND_WORKFLOWS = {"cosmos3_t2v_sound_seacache.json"}
PACK_DIR_NAME = "seacache_cosmos3"
TINY_NAME = "tiny-cosmos3"
TEST_IMAGE = "seacache_browser_test.png"
STEPS, SIZE, FRAMES = 6, 64, 9
SERVER_START_S = 300
PROMPT_TIMEOUT_MS = 300_000
SIZE_WIDGETS = {"width": SIZE, "height": SIZE, "length": FRAMES}
OVERRIDES = {
    "SeaCacheCosmos3Loader": {"checkpoint": TINY_NAME, "weight_dtype": "default"},
    "SeaCacheCosmos3EmptyLatentVideo": SIZE_WIDGETS,
    "SeaCacheCosmos3EmptyAVLatent": SIZE_WIDGETS,  # fps stays 24, as on the prompt nodes
    "SeaCacheCosmos3ImageToVideo": SIZE_WIDGETS,
    "SeaCacheCosmos3Scheduler": {"steps": STEPS},
    # Above the default 0.25 so that a 6-step run of random weights reuses steps: the chart then has all three
    # decisions (forced, reused, computed) to draw; min_steps 0: 6 steps are below the default floor.
    "SeaCacheApply": {"threshold": 0.8, "min_steps": 0},
    "LoadImage": {"image": TEST_IMAGE},
    "SaveVideo": {"filename_prefix": "video/seacache_browser_test"},
    "SaveImage": {"filename_prefix": "seacache_browser_test"},
}
BAR_COLORS = {"computed", "reused", "forced"}


def family_checkpoint(workflow: str) -> str:
    return f"{FAMILY[workflow][0]}-browser"


def overrides_for(workflow: str) -> dict:
    """The tiny-run widget values for one workflow: its member's tiny checkpoint, one frame for text-to-image."""
    overrides = json.loads(json.dumps(OVERRIDES))
    if workflow in FAMILY:
        overrides["SeaCacheCosmos3Loader"]["checkpoint"] = family_checkpoint(workflow)
    if workflow in IMAGE_WORKFLOWS:
        overrides["SeaCacheCosmos3EmptyLatentVideo"] = {**SIZE_WIDGETS, "length": 1}
    return overrides


def _skip_without_av_latents(workflow: str) -> None:
    """Cosmos3 sound refuses by design on a ComfyUI without audio-video latents (no comfy/nested_tensor.py): skip
    the sound workflow there, before it is queued."""
    if workflow in SOUND_WORKFLOWS and not (Path(os.environ["COMFYUI_PATH"]) / "comfy" / "nested_tensor.py").is_file():
        pytest.skip("this ComfyUI has no comfy/nested_tensor.py (audio-video latents): Cosmos3 sound refuses to run there")


def _assert_audio_stream(path: Path) -> None:
    """The saved video holds one video stream and the decoded sound: a 48 kHz stereo stream about as long as the clip."""
    import av

    with av.open(str(path)) as container:
        streams = [stream.type for stream in container.streams]
        assert sorted(streams) == ["audio", "video"], f"{path.name} has streams {streams}, expected one video and one audio"
        audio = container.streams.audio[0]
        assert audio.rate == 48000 and audio.channels == 2
        assert sum(frame.samples for frame in container.decode(audio=0)) >= 0.9 * FRAMES / 24 * 48000


def _chromium() -> str | None:
    path = os.environ.get("CHROMIUM_PATH", "").strip()
    if path:
        return path if os.access(path, os.X_OK) else None
    return next((found for name in ("chromium", "chromium-browser", "google-chrome") if (found := shutil.which(name))), None)


def _requirements():
    """(comfyui_path, chromium, node) or a skip naming what is missing."""
    comfy_path = os.environ.get("COMFYUI_PATH", "").strip()
    if not comfy_path:
        pytest.skip("COMFYUI_PATH is not set: the browser test starts that ComfyUI's server")
    if not (Path(comfy_path) / "main.py").is_file():
        pytest.skip(f"COMFYUI_PATH={comfy_path} has no main.py")
    chromium = _chromium()
    if chromium is None:
        pytest.skip("no Chromium binary (apt-get install chromium, or set CHROMIUM_PATH)")
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH: the browser driver needs Node.js >= 18")
    probe = subprocess.run([node, "--input-type=module", "-e", "await import('playwright-core')"], cwd=TESTS,
                           capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip("playwright-core is not installed for tests/ "
                    "(npm install --no-save --no-package-lock --prefix tests playwright-core)")
    return Path(comfy_path), chromium, node


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get_json(url: str, timeout: float = 10):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


def _write_test_image(path: Path) -> None:
    import numpy as np
    from PIL import Image

    pixels = np.zeros((72, 120, 3), np.uint8)  # not square: the I2V node center-crops it
    pixels[..., 0] = np.linspace(0, 255, 120, dtype=np.uint8)[None]
    pixels[..., 1] = np.linspace(0, 255, 72, dtype=np.uint8)[:, None]
    pixels[20:50, 40:80, 2] = 255
    Image.fromarray(pixels).save(path)


class Server:
    """A ComfyUI server process whose base directory (custom_nodes, models, input, output, temp, user) is a temp dir."""

    def __init__(self, comfy_path: Path, base: Path):
        from seacache_testing.make_tiny_checkpoint import make_tiny_checkpoint

        self.base = base
        for folder in ("custom_nodes", "models/diffusion_models", "input", "output", "temp", "user/default"):
            (base / folder).mkdir(parents=True, exist_ok=True)
        (base / "custom_nodes" / PACK_DIR_NAME).symlink_to(ROOT, target_is_directory=True)
        make_tiny_checkpoint(str(base / "models" / "diffusion_models" / TINY_NAME))
        for workflow, (preset, folder) in FAMILY.items():
            make_tiny_checkpoint(str(base / "models" / folder / family_checkpoint(workflow)), preset)
        _write_test_image(base / "input" / TEST_IMAGE)
        if (comfy_path / "input" / "example.png").is_file():  # the shipped I2V workflow names ComfyUI's example image
            shutil.copy(comfy_path / "input" / "example.png", base / "input" / "example.png")
        # A fresh user would first get the template browser; a returning one would not.
        (base / "user" / "default" / "comfy.settings.json").write_text(json.dumps({"Comfy.TutorialCompleted": True}))
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = base / "server.log"
        self._log = open(self.log_path, "wb")
        cmd = [sys.executable, str(comfy_path / "main.py"), "--cpu", "--listen", "127.0.0.1", "--port", str(self.port),
               "--base-directory", str(base), "--database-url", "sqlite:///:memory:", "--disable-auto-launch",
               "--disable-api-nodes"]
        frontend_root = os.environ.get("COMFYUI_FRONTEND_ROOT", "").strip()
        if frontend_root:
            cmd += ["--front-end-root", frontend_root]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        self.proc = subprocess.Popen(cmd, cwd=base, stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def wait_ready(self) -> dict:
        """Object info once the server answers; fails with the log if it dies or never answers."""
        deadline = time.monotonic() + SERVER_START_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"ComfyUI exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                return _get_json(f"{self.url}/object_info", timeout=30)
            except OSError:
                time.sleep(1)
        pytest.fail(f"ComfyUI did not answer within {SERVER_START_S} s:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=20)
        self._log.close()


@pytest.fixture(scope="module")
def server(request, tmp_path_factory):
    """One ComfyUI server per module (all workflows share it), killed with its process group at the end."""
    comfy_path, chromium, node = _requirements()
    srv = Server(comfy_path, tmp_path_factory.mktemp("comfyui_browser"))
    request.addfinalizer(srv.stop)
    object_info = srv.wait_ready()
    srv.chromium, srv.node = chromium, node
    srv.object_info = object_info
    srv.frontend_package = os.environ.get("COMFYUI_FRONTEND_ROOT", "").strip() or \
        f"comfyui-frontend-package {importlib.metadata.version('comfyui-frontend-package')}"
    return srv


def test_server_sees_pack_and_checkpoint(server):
    """The server loaded the pack from the temp custom_nodes, lists the tiny checkpoint and serves the web extension."""
    info = server.object_info
    for node_type in OVERRIDES:
        assert node_type in info, f"{node_type} not registered:\n{server.log_tail()}"
    checkpoints = info["SeaCacheCosmos3Loader"]["input"]["required"]["checkpoint"]
    choices = checkpoints[1]["options"] if checkpoints[0] == "COMBO" else checkpoints[0]
    assert TINY_NAME in choices and {family_checkpoint(w) for w in FAMILY} <= set(choices)  # models/cosmos3 too
    assert f"/extensions/{PACK_DIR_NAME}/seacache.js" in _get_json(f"{server.url}/extensions")


def _run_driver(server, workflow: Path, screenshot: Path, load_only: bool = False) -> dict:
    """Run tests/browser_run.mjs on one workflow; its JSON result (also kept next to the screenshot)."""
    config = {"url": server.url, "chromium": server.chromium, "workflow": str(workflow), "overrides": overrides_for(workflow.name),
              "statsType": "SeaCacheStats", "screenshot": str(screenshot), "timeoutMs": PROMPT_TIMEOUT_MS,
              "loadOnly": load_only, "colors": import_pack_module("nodes.seacache.chart").frontend_report(None)["colors"]}
    config_path = screenshot.with_suffix(".driver.json")
    config_path.write_text(json.dumps(config))
    proc = subprocess.run([server.node, str(DRIVER), str(config_path)], cwd=TESTS, capture_output=True, text=True,
                          timeout=PROMPT_TIMEOUT_MS / 1000 * 2 + 120)
    assert proc.returncode == 0, f"driver failed:\n{proc.stderr[-4000:]}\nserver:\n{server.log_tail()}"
    line = proc.stdout.strip().splitlines()[-1]
    screenshot.with_suffix(".result.json").write_text(line)
    return json.loads(line)


def _extension_errors(result: dict) -> list[str]:
    """Errors to blame on the pack or the workflow: every page error and console error that comes from or mentions
    the pack's web extension, and every uncaught page error once the app is up (loading, editing, running).
    Uncaught errors of the frontend's own startup, before the workflow is touched, are not the pack's."""
    errors = [e["text"] for e in result["pageErrors"] if e["phase"] != "startup" or "seacache" in e["text"].lower()]
    for entry in result["console"]:
        if entry["type"] == "error" and ("seacache" in entry["text"].lower() or "seacache" in entry["url"].lower()):
            errors.append(f"{entry['text']} ({entry['url']})")
    return errors


@pytest.mark.parametrize("workflow", WORKFLOWS + list(FAMILY))
def test_workflow_in_browser(server, workflow, tmp_path):
    """Load, edit, queue and finish one shipped workflow in the browser as a user would (see the module docstring)."""
    _skip_without_av_latents(workflow)
    screenshot = tmp_path / f"{Path(workflow).stem}.png"
    result = _run_driver(server, ROOT / "example_workflows" / workflow, screenshot)
    print(f"\nComfyUI at {os.environ['COMFYUI_PATH']}, frontend {result['frontendVersion']} "
          f"(from {server.frontend_package}); screenshot: {screenshot}")
    for error in result["pageErrors"]:
        print(f"page error during {error['phase']}: {error['text'].splitlines()[0]}")
    shipped = json.loads((ROOT / "example_workflows" / workflow).read_text())
    # Every node loaded with a registered type: no missing-nodes placeholders, no missing-nodes dialog.
    loaded = result["load"]["nodes"]
    assert sorted(n["type"] for n in loaded) == sorted(n["type"] for n in shipped["nodes"])
    assert [n for n in loaded if not n["registered"] or n["hasErrors"]] == []
    notices = result["load"]["notices"] + result["finalNotices"]
    assert not [d for d in notices if "missing" in d.lower()], notices
    assert result["load"]["extensions"] == ["SeaCache.UI"]
    widgets = {n["type"]: n["widgets"] for n in loaded}
    assert widgets["SeaCacheApply"][-1] == "progress" and widgets["SeaCacheStats"] == ["timeline"]  # the extension's bands
    assert result["overrides"]["problems"] == []
    assert _extension_errors(result) == []
    # Before the run the chart band exists, is drawn, and has no bars.
    before = result["chartBefore"]
    assert before["drawn"] and before["report"] is None
    assert sum(before["counts"][k] for k in BAR_COLORS) == 0, before
    # The prompt succeeded and saved a video (an image for text-to-image).
    entry = result["history"]
    assert entry is not None, f"prompt did not finish:\n{server.log_tail()}"
    assert entry["status"]["status_str"] == "success", json.dumps(entry["status"])[-3000:]
    ids = {n["type"]: str(n["id"]) for n in shipped["nodes"]}
    suffixes = (".png",) if workflow in IMAGE_WORKFLOWS else (".mp4", ".webm", ".mov")
    saved_items = [item for node_id, output in entry["outputs"].items() if node_id != ids["PreviewImage"]
                   for key in ("images", "videos", "gifs") for item in output.get(key, [])
                   if str(item.get("filename", "")).endswith(suffixes) and item.get("type") == "output"]
    assert saved_items, entry["outputs"]
    saved = server.base / "output" / saved_items[0]["subfolder"] / saved_items[0]["filename"]
    assert saved.is_file() and saved.stat().st_size > 0
    if workflow in SOUND_WORKFLOWS:
        _assert_audio_stream(saved)
    # SeaCache Stats: the server's report reached the node, and its bars are on the canvas in the report's colors.
    steps = 4 if workflow in FOUR_STEP_WORKFLOWS else STEPS  # 4-step: the checkpoint's own schedule
    report = entry["outputs"][ids["SeaCacheStats"]]["seacache"][0]
    assert report["status"] == "completed" and report["steps"] == steps
    assert report["calls"] == len(report["records"]) == report["ran"] + report["reused"] >= steps
    after = result["chartAfter"]
    assert after["drawn"] and after["report"] == report
    if workflow not in FOUR_STEP_WORKFLOWS:  # of 4 steps only the middle two may be reused
        assert report["reused"] > 0, report["summary"]
    decisions = {r["decision"] for r in report["records"]}
    drawn = {k for k in BAR_COLORS if after["counts"][k] > 0}
    assert drawn == decisions, (after["counts"], decisions)
    assert screenshot.is_file() and screenshot.stat().st_size > 0


def test_missing_node_type_is_caught(server, tmp_path):
    """The load checks above can fail: a node type nobody registers is flagged on the canvas and reported to the
    user (a dialog in older frontends, a toast in newer ones)."""
    workflow = json.loads((ROOT / "example_workflows" / WORKFLOWS[0]).read_text())
    bogus = json.loads(json.dumps(next(n for n in workflow["nodes"] if n["type"] == "SeaCacheCosmos3Scheduler")))
    bogus.update(id=workflow["last_node_id"] + 1, type="SeaCacheNoSuchNode", pos=[0, -400], outputs=[])
    workflow["nodes"].append(bogus)
    workflow["last_node_id"] = bogus["id"]
    path = tmp_path / "missing_node_workflow.json"
    path.write_text(json.dumps(workflow))
    result = _run_driver(server, path, tmp_path / "missing_node.png", load_only=True)
    flagged = [n for n in result["load"]["nodes"] if not n["registered"] or n["hasErrors"]]
    assert [(str(n["id"]), n["type"], n["registered"]) for n in flagged] == [(str(bogus["id"]), "SeaCacheNoSuchNode", False)]
    assert [d for d in result["load"]["notices"] if "SeaCacheNoSuchNode" in d], result["load"]["notices"]
