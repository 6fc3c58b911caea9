"""The README's first command, scripts/demo_t2v.py, runs without ComfyUI and says what it measured (a short run on
the tiny preset; its timing is printed, never asserted)."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_demo_prints_timeline_estimate_and_measurements():
    env = {k: v for k, v in os.environ.items() if k != "COMFYUI_PATH"}
    command = [sys.executable, str(ROOT / "scripts" / "demo_t2v.py"), "--preset", "tiny", "--steps", "4", "--repeats", "1"]
    out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, check=True).stdout
    calls, ran = map(int, re.search(r"SeaCache: (\d+) calls, (\d+) ran the stack", out).groups())
    assert calls == 4 and 2 <= ran <= 4  # the first and the last step always compute
    timeline = re.search(r"timeline \(F forced, C computed, R reused\): (F [CR] [CR] F)\n", out).group(1)
    median_line = r"median model call: uncached \d+ ms, SeaCache computed \d+ ms, reused \d+ ms -> \d+\.\d\dx"
    assert bool(re.search(median_line, out)) == ("R" in timeline)
    assert re.search(r"wall time uncached \d+\.\d s, SeaCache \d+\.\d s -> measured \d+\.\d\dx; ", out)
    assert out.rstrip().endswith(f"estimated (calls / calls that ran the stack) {calls / ran:.2f}x")
