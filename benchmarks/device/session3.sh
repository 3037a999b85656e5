#!/usr/bin/env bash
# seconds: 470
# One short GPU round that closes several issues at once, each step capped so a slow one cannot
# take the others' time. Carry .whl (the project's wheels, openai included) and .whl-ray (ray's
# slim wheel and its four dependencies; see ray.sh). Steps:
# A. in the background from the start: KernelBench's own harness against our Verifier on
#    standalone copies (kernelbench_eval; its builds overlap with the tests below);
# 1. the new whole-model op families on the GPU (Swin's roll, table[index], tensor clamp bounds,
#    constructors that need real tensors);
# 2. the hostile candidate that is NaN on negative inputs (its result used to be unreadable);
# 3. step-by-step generation with builtin seeding (SIGINT on its cap, so pytest shows where);
# 4. once A is done, on a quiet GPU: ray.sh on two level-2 problems, DevicePool then local Ray.
set -u
out="${AREA_OUT:-/tmp/session3}"
mkdir -p "$out/kb" "$out/ray"
start=$(date +%s)
export TORCH_EXTENSIONS_DIR=/tmp/torch-ext

timeout 240 python3 benchmarks/kernelbench_agreement.py \
  tests/data/kernelbench/level1/19_ReLU.py tests/data/kernelbench/level2/76_Gemm_Add_ReLU.py \
  --out "$out/kb" > "$out/kb/agreement.log" 2>&1 &
kb=$!

timeout -s INT 60 python3 -m pytest -m gpu tests/builtin/test_gpu_l3.py -k "swin or item_in" \
  -p no:cacheprovider -q -rA -W ignore > "$out/l3_new.txt" 2>&1
echo "1 l3 new families rc=$? ($(( $(date +%s) - start )) s)"
grep -E "^(PASSED|FAILED)|passed|failed" "$out/l3_new.txt" | tail -8

adv=tests/adversarial/hostile/distribution_03_exp_log.py
timeout 60 python3 -m stitch_lsp verify tests/adversarial/refs/relu_scale_positive.py "$adv" \
  --format json > "$out/distribution_03.json" 2> "$out/distribution_03.err"
echo "2 distribution_03 rc=$? ($(( $(date +%s) - start )) s)"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['status'], '|', d['message'][:200]); print([e['code'] for e in d.get('exploits', [])])" "$out/distribution_03.json"

timeout -s INT 100 python3 -m pytest -m gpu tests/agents/test_gpu_steps.py -p no:cacheprovider \
  -q -rA -s -W ignore -k builtin_seeds > "$out/steps.txt" 2>&1
echo "3 steps rc=$? ($(( $(date +%s) - start )) s)"
grep -E "^(attempt|PASSED|FAILED)|passed|failed|Error" "$out/steps.txt" | tail -15

wait $kb
echo "A kernelbench agreement rc=$? ($(( $(date +%s) - start )) s)"
cat "$out/kb/agreement.md" 2>/dev/null || tail -n 15 "$out/kb/agreement.log"

AREA_OUT="$out/ray" RAY_BENCH="${RAY_BENCH:-14,52}" RAY_RUN_SECONDS=90 timeout 200 \
  bash benchmarks/device/ray.sh > "$out/ray/log.txt" 2>&1
echo "4 ray rc=$? ($(( $(date +%s) - start )) s)"; tail -n 20 "$out/ray/log.txt"
