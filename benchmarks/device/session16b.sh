#!/usr/bin/env bash
# seconds: 560
# Session 16's second call, the attention profile: where the flash kernel's 19-26 us a site
# goes. The decode step and ViT-S in bf16 at full size, every attention site forced onto our kernel: kernel times by
# torch.profiler (flash kernel, key-split combine, sdpa when timed), then Nsight Compute's full
# set on the first flash launches of each, as .ncu-rep files read back on the CPU.
set -u
out="${AREA_OUT:-/tmp/session16b-out}"
mkdir -p "$out"
start=$(date +%s)
export CAP="${CAP:-555}"
. "$(dirname "$0")/_steps.sh"
export STITCH_MODEL_SIZE=full STITCH_MODEL_DTYPE=bfloat16
decode=tests/data/stitch_problems/level3/1_LlamaDecodeStep.py
vit=benchmarks/real_models/timm_vit_small.py
for f in "$decode" "$vit"; do
  name=$(basename "$f" .py)
  timeout "$(step 60)" python3 benchmarks/kernel_profile.py "$f" --top 10 --calls 3 \
    > "$out/profile-$name.txt" 2>&1
  echo "profile $name (timed) rc=$? ($(since))"
  grep -E "GPU time|attention|flash|combine|runner|not handled" "$out/profile-$name"*.txt | cut -c1-200
  timeout "$(step 80)" ncu --kernel-name regex:stitch_flash --launch-count 4 --set full \
    -o "$out/ncu-$name" -f python3 benchmarks/kernel_profile.py "$f" --calls 1 \
    --attention ours --no-reference > "$out/ncu-$name.txt" 2>&1
  echo "ncu $name rc=$? ($(since))"
  tail -n 3 "$out/ncu-$name.txt"
done
# The held-out level-2 problems the catalogue rewrites (session 15's second call, never run):
# the double sums of 18 and the timed replay choice of 44 and 98 on a GPU for the first time.
unset STITCH_MODEL_SIZE STITCH_MODEL_DTYPE
HELDOUT2_ONLY=13,18,42,44,50,51,98 heldout_level2 230
