#!/usr/bin/env bash
# The one command for a CUDA machine: the CUDA tests, the pack through ComfyUI's own server at Cosmos3-Nano's size
# when ComfyUI is there (benchmarks/comfyui_gpu.py: dynamic VRAM, a 24 GB card, fp8, compile), then the plain-torch
# GPU benchmark with what is left of the budget. Everything goes into ONE results file (Markdown). Each stage
# gets what is left of the time budget; a stage the budget cannot start is listed as skipped, and a stage the budget
# runs out in is stopped (what it printed stays in the file). Needs only PyTorch (safetensors/numpy if present).
#
#   scripts/gpu_check.sh                      # on the GPU: about 9 minutes (--budget-s 540)
#   scripts/gpu_check.sh --smoke              # on the CPU in seconds: the same stages, tiny sizes (the suite runs it)
#   options: --budget-s SECONDS  --out FILE (default gpu_check_results.md)  PYTHON=... picks the interpreter
#   COMFYUI_PATH=/path/to/ComfyUI adds the ComfyUI stage (ComfyUI on the GPU unless --smoke)
# On a bare GPU machine without ComfyUI, ../shared/tools/gpu-bundle.sh packs one into .gpu/ (its header has the command).
#
# Exit status: 0 when every stage that ran passed (skipped or budget-stopped stages do not fail it), else 1.
set -uo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
SMOKE=0
BUDGET=540
OUT=gpu_check_results.md
while (($#)); do
    case "$1" in
        --smoke) SMOKE=1 ;;
        --budget-s) BUDGET=$2; shift ;;
        --out) OUT=$2; shift ;;
        *) echo "gpu_check.sh: unknown option $1 (use --smoke, --budget-s SECONDS, --out FILE)" >&2; exit 2 ;;
    esac
    shift
done

START=$(date +%s)
FAILED=0
left() { echo $((BUDGET - ($(date +%s) - START))); }

# stage NAME SECONDS COMMAND...: run COMMAND with at most SECONDS (and never past the budget), output into $OUT.
stage() {
    local name=$1 limit=$2
    shift 2
    local remaining
    remaining=$(left)
    ((limit > remaining)) && limit=$remaining
    if ((limit < 5)); then
        printf '## %s\nskipped: the budget (%s s) is spent\n\n' "$name" "$BUDGET" >>"$OUT"
        echo "gpu_check: skipped $name (budget spent)"
        return
    fi
    echo "gpu_check: $name (up to ${limit} s)"
    local begin rc
    begin=$(date +%s)
    printf '## %s\n```\n' "$name" >>"$OUT"
    timeout --kill-after=10 "$limit" "$@" >>"$OUT" 2>&1
    rc=$?
    printf '```\n' >>"$OUT"
    if ((rc == 124 || rc == 137)); then
        printf 'stopped: its time limit (%s s) ran out; the lines above are what it measured\n\n' "$limit" >>"$OUT"
    elif ((rc != 0)); then
        printf '**FAILED** (exit %s) after %s s\n\n' "$rc" "$(($(date +%s) - begin))" >>"$OUT"
        FAILED=1
    else
        printf 'passed in %s s\n\n' "$(($(date +%s) - begin))" >>"$OUT"
    fi
}

{
    echo "# SeaCache GPU check"
    echo "$(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)," \
        "budget ${BUDGET} s$( ((SMOKE)) && echo ', smoke mode (CPU, tiny sizes)')"
    echo
} >"$OUT"

stage "environment" 60 "$PY" -c "
import importlib.util, platform, torch
print('python', platform.python_version(), '| torch', torch.__version__, '| CUDA', torch.version.cuda)
print('device:', torch.cuda.get_device_name() if torch.cuda.is_available() else 'none (CPU only)')
for name in ('safetensors', 'numpy', 'triton'):
    print(name, 'present' if importlib.util.find_spec(name) else 'absent')
"

CUDA_TESTS=$(grep -l "pytest.mark.cuda" tests/test_*.py | tr '\n' ' ')
if ((SMOKE)); then
    stage "CUDA tests (pytest -m cuda)" 120 "$PY" -m pytest -q -m cuda -p no:cacheprovider $CUDA_TESTS
else
    stage "CUDA tests (pytest -m cuda)" 180 "$PY" -m pytest -q -m cuda -p no:cacheprovider $CUDA_TESTS
fi

# Through ComfyUI first (what users run); the plain-torch benchmark gets what is left.
if [[ -n "${COMFYUI_PATH:-}" ]]; then
    if ((SMOKE)); then
        stage "ComfyUI server (comfyui_gpu.py --smoke: tiny, CPU)" 600 "$PY" -m benchmarks.comfyui_gpu --smoke
    else
        comfy_budget=$(($(left) - 30))
        stage "ComfyUI server on the GPU (comfyui_gpu.py: Nano size, dynamic VRAM, a 24 GB card)" \
            "$((comfy_budget + 25))" "$PY" -m benchmarks.comfyui_gpu --budget-s "$comfy_budget"
    fi
else
    printf '## ComfyUI server\nskipped: COMFYUI_PATH is not set (no ComfyUI here)\n\n' >>"$OUT"
fi

if ((SMOKE)); then
    stage "GPU benchmark (bench_gpu.py --smoke)" 120 "$PY" -m benchmarks.bench_gpu --smoke
else
    # The benchmark skips (and lists) runs its warm-up estimates past its own budget.
    bench_budget=$(($(left) - 20))
    stage "GPU benchmark (bench_gpu.py, Nano dims, plain torch)" "$((bench_budget + 15))" \
        "$PY" -m benchmarks.bench_gpu --budget-s "$bench_budget"
fi

printf 'total %s s of the %s s budget\n' "$(($(date +%s) - START))" "$BUDGET" >>"$OUT"
echo "gpu_check: results in $OUT"
exit $FAILED
