#!/usr/bin/env bash
# Issue 30's GPT step side by side: examples/gpt, its PyTorch peer (bench/gpt_torch.py) and, at the
# large configuration when LLMC_DIR names a checkout of Karpathy's llm.c, llm.c's train_gpt2.c
# (bench/llmc.sh), interleaved per repetition on THREADS (default 2) threads. Each reports the
# median ms/step after 3 warm-up steps (kiln's from the wall times of its --metrics records);
# then the medians over the repetitions, kiln's step time over each peer's, and the validation
# loss difference kiln - torch (held-out windows alike; batches drawn differently).
#   default: examples/gpt's defaults (4 blocks, width 128, 4 heads, context 64, batch 32)
#   large:   6 blocks, width 384, 6 heads, context 256, batch 8 (about 10.7M parameters)
#
#   [LLMC_DIR=~/llm.c] bench/gpt_peers.sh CONFIG STEPS [REPS]     e.g. bench/gpt_peers.sh large 30 3
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
config=${1:-}
steps=${2:-}
reps=${3:-1}
threads=${THREADS:-2}
# torch's best set-up here (bench/gpt_torch_setups.sh): its GEMMs on OpenBLAS's THREADS threads,
# its own ops on TORCH_THREADS (default 1; 2 intra-op threads beside OpenBLAS's ran 2-9x slower).
torch_threads=${TORCH_THREADS:-1}
case $config in
  default) model=(--layers=4 --heads=4 --width=128 --context=64 --batch_size=32) ;;
  large) model=(--layers=6 --heads=6 --width=384 --context=256 --batch_size=8) ;;
  *) echo "usage: bench/gpt_peers.sh default|large STEPS [REPS] (CONFIG: '$config')" >&2; exit 2 ;;
esac
if ! [[ $steps =~ ^[0-9]+$ && $reps =~ ^[0-9]+$ ]] || ((steps <= 3 || reps < 1)); then
  echo "bench/gpt_peers.sh: STEPS must be an integer > 3 (the warm-up is 3 steps) and REPS >= 1" >&2
  exit 2
fi
llmc=()
if [[ $config == large && -n ${LLMC_DIR:-} ]]; then llmc=(llmc); fi
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
  sudo=()
  ((EUID == 0)) || sudo=(sudo)
  # OpenBLAS: the BLAS a user of Debian's torch would have (the reference BLAS is ~8x slower here).
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends python3-torch libopenblas0-pthread >&2
fi
./bazelw build //examples:gpt >&2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
run() {  # run PEER REP: the peer's JSON line into $scratch/PEER.REP
  case $1 in
    kiln) bazel-bin/examples/gpt "${model[@]}" --steps="$steps" --eval_every="$steps" --threads="$threads" \
      --metrics="$scratch/metrics.$2" | tail -n 1 ;;
    torch) OMP_NUM_THREADS=$torch_threads OPENBLAS_NUM_THREADS=$threads /usr/bin/python3 bench/gpt_torch.py \
      "${model[@]}" --steps="$steps" --threads="$torch_threads" ;;
    llmc) OMP_NUM_THREADS=$threads bench/llmc.sh "$LLMC_DIR" "$steps" "${model[@]}" ;;
  esac >"$scratch/$1.$2"
}
grep -m1 'model name' /proc/cpuinfo
echo "before: $(uptime)"
for rep in $(seq 1 "$reps"); do
  for peer in kiln torch "${llmc[@]}"; do run "$peer" "$rep"; done
done
echo "after:  $(uptime)"
/usr/bin/python3 - "$scratch" "$config" "$steps" "$reps" <<'PY'
import glob, json, os, statistics, sys
scratch, config, steps, reps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

def kiln_ms(rep):  # the median of the step-to-step wall times after the 3 warm-up steps
    train = [json.loads(l) for l in open(f"{scratch}/metrics.{rep}") if '"kind":"train"' in l]
    wall = [r["wall_time"] for r in train]
    return 1000 * statistics.median(b - a for a, b in zip(wall[2:], wall[3:]))

runs = {}
for path in sorted(glob.glob(f"{scratch}/*.[0-9]*")):
    peer, rep = os.path.basename(path).split(".")
    if peer == "metrics":
        continue
    r = json.loads(open(path).read().splitlines()[-1])
    ms = kiln_ms(rep) if peer == "kiln" else r["ms_per_step"]
    runs.setdefault(peer, []).append((ms, r["val_loss"]))
print(f"{config}, {steps} steps, median of {reps} repetition(s):")
med = {p: (statistics.median(m for m, _ in v), statistics.median(l for _, l in v)) for p, v in runs.items()}
for peer, (ms, loss) in med.items():
    print(f"  {peer:6} {ms:9.1f} ms/step   val loss {loss:.4f}")
for peer in ("torch", "llmc"):
    if peer in med:
        print(f"  kiln / {peer}: {med['kiln'][0] / med[peer][0]:.2f} step time")
print(f"  val loss kiln - torch: {med['kiln'][1] - med['torch'][1]:+.4f} nats")
PY
