set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1 STITCH_CACHE_DIR=/tmp/stitch-cache TORCH_EXTENSIONS_DIR=/tmp/torch-ext
mkdir -p /tmp/r
s=$(date +%s)
python3 -c "from stitch_lsp.gpus import inventory, build_arch; i=inventory(); print([(g.device,g.physical,g.name,g.arch) for g in i.gpus], i.problem, build_arch())"
timeout 150 python3 -m pytest -m gpu tests/builtin/test_gpu_l3.py -p no:cacheprovider -q -rA -W ignore > /tmp/r/pytest_l3.txt 2>&1
echo "pytest rc=$? $(( $(date +%s)-s ))s"; grep -E "^(FAILED|ERROR)|passed|failed" /tmp/r/pytest_l3.txt | tail -25
left=$(( 555 - ($(date +%s) - s) ))
timeout $left python3 -m stitch_lsp bench tests/data/kernelbench --level 3 --only "6,25,28,31,33,43,44,49,50,1,2,3,4,5,13,20,21" --json /tmp/r/bench_level3_a.json --out /tmp/r/cand > /tmp/r/bench_a.txt 2>&1
echo "bench rc=$? $(( $(date +%s)-s ))s"; tail -30 /tmp/r/bench_level3_a.md 2>/dev/null || tail -20 /tmp/r/bench_a.txt
tar -czf $OUT/round2.tgz -C /tmp/r .
