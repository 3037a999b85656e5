#!/usr/bin/env bash
# seconds: 390
# `stitch-lsp bench` over level-2 dev problems twice in one run: through this machine's
# DevicePool, then through a local Ray head (`--ray`, one actor per job holding a GPU). Each run
# gets cold build, extension and inductor caches of its own. Prints the wall time of each and
# the per-problem results side by side; the verdicts must be identical (exit 1 if not).
# On a machine with several GPUs the same script shows how both scale.
#
# python3 there has no ray. Carry these in .whl/ beside the project's usual wheels:
#   pip download --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
#     --platform manylinux_2_17_x86_64 --no-deps -d /tmp/raywhl \
#     ray==2.60.0 jsonschema jsonschema-specifications referencing rpds-py
#   python3 benchmarks/device/slim_ray_wheel.py /tmp/raywhl/ray-2.60.0-cp312-*.whl .whl
#   cp /tmp/raywhl/jsonschema*.whl /tmp/raywhl/referencing-*.whl /tmp/raywhl/rpds_py-*.whl .whl/
# ray-2.60.0-cp312 is 75.6 MiB, more than one call carries (64 MiB); the slim copy leaves out
# ray/jars (the Java worker) and is 44.6 MiB, 45.1 MiB with the four dependencies (the other
# dependencies of ray, click, filelock, msgpack, packaging, protobuf, pyyaml and requests, are
# on the machine). Run: bash benchmarks/device/round.sh ray
set -u
out="${AREA_OUT:-/tmp/ray-out}"
mkdir -p "$out"
kb=tests/data/kernelbench
only="${RAY_BENCH:-14,52,67,2,1,24,41,30}"
cap="${RAY_RUN_SECONDS:-175}"
python3 -c "import ray; print('ray', ray.__version__, 'at', ray.__file__)" \
  || { echo "ray is not importable: carry its wheels (see this script's header)"; exit 1; }
nvidia-smi -L

run() {
  local name=$1
  shift
  local root=/tmp/ray-compare/$name
  rm -rf "$root"
  mkdir -p "$root"
  local t0 t1
  t0=$(date +%s.%N)
  STITCH_CACHE_DIR=$root/build TORCH_EXTENSIONS_DIR=$root/ext \
    TORCHINDUCTOR_CACHE_DIR=$root/inductor TRITON_CACHE_DIR=$root/triton \
    timeout -k 10 "$cap" python3 -m stitch_lsp bench "$kb" --level 2 --only "$only" \
    --no-extra-baselines --json "$out/$name.json" --out "$root/candidates" "$@" \
    > "$out/$name.txt" 2>&1
  local rc=$?
  t1=$(date +%s.%N)
  echo "$name rc=$rc wall_s=$(python3 -c "print(round($t1 - $t0, 1))")" | tee -a "$out/walls.txt"
  tail -n 4 "$out/$name.txt"
}

run devicepool
run ray --ray

python3 - "$out" <<'PY'
import json, sys
from pathlib import Path

out = Path(sys.argv[1])
walls = dict(
    (line.split()[0], float(line.split("wall_s=")[1]))
    for line in (out / "walls.txt").read_text().splitlines()
)
runs = {}
for name in ("devicepool", "ray"):
    path = out / f"{name}.json"
    runs[name] = {r["problem"]: r for r in json.loads(path.read_text())["rows"]} if path.is_file() else {}

def fmt(v):
    return "-" if v is None else f"{v:.3f}"

lines = [
    f"wall time: DevicePool {walls.get('devicepool')} s, Ray {walls.get('ray')} s",
    "",
    "| problem | DevicePool | Ray | same verdict | vs eager (pool) | vs eager (Ray) | Ray ran on |",
    "|---|---|---|---|---|---|---|",
]
differ = 0
for problem in sorted(set(runs["devicepool"]) | set(runs["ray"])):
    a, b = runs["devicepool"].get(problem, {}), runs["ray"].get(problem, {})
    va = (a.get("status"), a.get("correct"))
    vb = (b.get("status"), b.get("correct"))
    same = va == vb and a and b
    differ += not same
    lines.append(
        f"| {problem} | {va[0]} | {vb[0]} | {'yes' if same else 'NO'} "
        f"| {fmt(a.get('speedup_vs_eager'))} | {fmt(b.get('speedup_vs_eager'))} | {b.get('device')} |"
    )
lines.append("")
lines.append("verdicts identical" if not differ else f"{differ} problem(s) differ")
text = "\n".join(lines)
(out / "compare.md").write_text(text + "\n")
print(text)
sys.exit(1 if differ else 0)
PY
