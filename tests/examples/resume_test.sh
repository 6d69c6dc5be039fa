#!/usr/bin/env bash
# examples/train resumed from its training checkpoints: on the same devices it ends with the
# parameters of an uninterrupted run byte for byte (mid-epoch and at an epoch's end, the MLP
# and the CNN with its dropout streams); on other world sizes (1 -> 2 devices, 2 -> 1, 2
# -> 4, 2 processes -> 1) within f32 summation order; sharded (--shard=optimizer) the same, in
# the sharded form; the model file holds the parameters only; a
# checkpoint that does not fit the run is refused naming what differs, before any training.
set -uo pipefail
train="$1"
launch="$2"
compare="$3"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# 2000 images, batch 64: 32 steps an epoch (the last of 16 images), 96 in all.
common=(--train_limit=2000 --epochs=3 --batch_size=64 --threads=1)
step() { printf '%s/step-%012d' "$1" "$2"; }

run() {  # run NAME args...: the run's output in $tmp/NAME.out, its status returned
  local name="$1"; shift
  "$train" "${common[@]}" "$@" >"$tmp/$name.out" 2>&1
}

run full --checkpoint="$tmp/full.safetensors" || fail "uninterrupted run: $(cat "$tmp/full.out")"
run saving --checkpoint_dir="$tmp/ck" --checkpoint_every=10 --keep_checkpoints=100 ||
  fail "checkpointing run: $(cat "$tmp/saving.out")"
grep -q '"checkpoints":12,"checkpoint_stall_ms":' "$tmp/saving.out" ||
  fail "9 step checkpoints and 3 epoch ends expected: $(tail -n 1 "$tmp/saving.out")"
memory='s/"peak_bytes":\[[0-9,]*\],"peak_rss_bytes":[0-9]*//'  # measured, like the speed
cmp -s <(tail -n 1 "$tmp/full.out" | sed 's/"samples_per_sec":[0-9.]*//'"; $memory") \
  <(tail -n 1 "$tmp/saving.out" | sed 's/"samples_per_sec":[0-9.]*//'"; $memory"'; s/,"checkpoints".*}/}/') ||
  fail "checkpointing changed the run: $(tail -n 1 "$tmp/saving.out")"
ls -A "$tmp/ck" | grep -v '^step-' | grep -vx '.lock' && fail "left-overs in the checkpoint folder: $(ls -A "$tmp/ck")"

# The parameters file is what PyTorch's load_state_dict(strict=True) takes: parameters only.
/usr/bin/env python3 - "$(step "$tmp/ck" 50)/model.safetensors" <<'PY' || fail "model.safetensors keys"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
keys = sorted(k for k in json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]]) if k != "__metadata__")
want = sorted(f"{i}.{p}" for i in (1, 3, 5) for p in ("weight", "bias"))
sys.exit(0 if keys == want else f"keys {keys}, expected {want}")
PY

# Same devices: byte-equal, from mid-epoch (step 50 = epoch 2, step 18) and an epoch's end (64).
for at in 50 64; do
  run "resumed$at" --resume="$(step "$tmp/ck" $at)" --checkpoint="$tmp/resumed$at.safetensors" ||
    fail "resume from step $at: $(cat "$tmp/resumed$at.out")"
  grep -q "\"resumed_from_step\":$at" "$tmp/resumed$at.out" || fail "resume $at summary: $(tail -n 1 "$tmp/resumed$at.out")"
  cmp -s "$tmp/full.safetensors" "$tmp/resumed$at.safetensors" ||
    fail "resumed from step $at differs: max |diff| $("$compare" "$tmp/full.safetensors" "$tmp/resumed$at.safetensors")"
done
# The summary of a resumed run is the uninterrupted one's (loss of the last epoch included).
[[ "$(tail -n 1 "$tmp/resumed50.out" | sed 's/"samples_per_sec".*//')" == \
  "$(tail -n 1 "$tmp/full.out" | sed 's/"samples_per_sec".*//')" ]] ||
  fail "resumed summary $(tail -n 1 "$tmp/resumed50.out") vs $(tail -n 1 "$tmp/full.out")"

# Other world sizes: every remaining sample once, the same global batches, so the same
# parameters up to the order of f32 sums: 3e-8 to 6e-8 here in the optimised build, 2e-4 in
# the sanitizer build (-O1: other instruction choices, and training amplifies each rounding
# difference). A resume that loses the data order moved them by 8e-3 to 2e-2 (checked by
# breaking it).
within() {  # within A B: max |diff| of two checkpoints below 1e-3
  local d
  d=$("$compare" "$1" "$2" | cut -d' ' -f1)
  echo "$(basename "$2") vs $(basename "$1"): max |diff| $d"
  /usr/bin/env python3 -c "import sys; sys.exit(0 if float('$d') < 1e-3 else 1)" || fail "$2 differs from $1 by $d"
}
run two --devices=cpu:0,cpu:1 --resume="$(step "$tmp/ck" 50)" --checkpoint="$tmp/two.safetensors" ||
  fail "1 -> 2 devices: $(cat "$tmp/two.out")"
grep -q "resuming on 2 devices (cpu:0,cpu:1) from a checkpoint of 1 (cpu:0)" "$tmp/two.out" || fail "1 -> 2 note: $(cat "$tmp/two.out")"
within "$tmp/full.safetensors" "$tmp/two.safetensors"
run two_saving --devices=cpu:0,cpu:1 --checkpoint_dir="$tmp/ck2" --checkpoint_every=30 --keep_checkpoints=100 \
  --checkpoint="$tmp/two_full.safetensors" || fail "2-device checkpointing run: $(cat "$tmp/two_saving.out")"
run one --resume="$(step "$tmp/ck2" 30)" --checkpoint="$tmp/one.safetensors" || fail "2 -> 1 devices: $(cat "$tmp/one.out")"
within "$tmp/two_full.safetensors" "$tmp/one.safetensors"
run four --devices=cpu:0,cpu:1,cpu:2,cpu:3 --resume="$(step "$tmp/ck2" 30)" --checkpoint="$tmp/four.safetensors" ||
  fail "2 -> 4 devices: $(cat "$tmp/four.out")"
within "$tmp/two_full.safetensors" "$tmp/four.safetensors"
"$launch" --nproc=2 -- "$train" "${common[@]}" --devices=cpu:0 --checkpoint_dir="$tmp/ck3" --checkpoint_every=30 --keep_checkpoints=100 \
  >"$tmp/mp.out" 2>&1 || fail "2 x 1 checkpointing run: $(cat "$tmp/mp.out")"
run from_mp --resume="$(step "$tmp/ck3" 60)" --checkpoint="$tmp/from_mp.safetensors" ||
  fail "2 processes -> 1: $(cat "$tmp/from_mp.out")"
within "$tmp/two_full.safetensors" "$tmp/from_mp.safetensors"

# Sharded (ZeRO-1 on 2 devices): each member's chunks and an index, no whole model file; the
# same world size and stage resume byte-equal (mid-epoch and at an epoch's end), 2 x ZeRO-1 ->
# 1 device and -> 4 x ZeRO-2 within summation order.
run sharded_saving --devices=cpu:0,cpu:1 --shard=optimizer --checkpoint_dir="$tmp/cks" --checkpoint_every=25 \
  --keep_checkpoints=100 --checkpoint="$tmp/sharded_full.safetensors" || fail "sharded checkpointing: $(cat "$tmp/sharded_saving.out")"
[[ -f "$(step "$tmp/cks" 50)/index.json" && -f "$(step "$tmp/cks" 50)/shard-1-of-2.safetensors" &&
  ! -e "$(step "$tmp/cks" 50)/model.safetensors" ]] || fail "sharded checkpoint files: $(ls "$(step "$tmp/cks" 50)")"
cmp -s "$tmp/two_full.safetensors" "$tmp/sharded_full.safetensors" || fail "ZeRO-1 differs from unsharded on 2 devices"
for at in 50 64; do
  run "sharded$at" --devices=cpu:0,cpu:1 --shard=optimizer --resume="$(step "$tmp/cks" $at)" \
    --checkpoint="$tmp/sharded$at.safetensors" || fail "sharded resume from $at: $(cat "$tmp/sharded$at.out")"
  cmp -s "$tmp/sharded_full.safetensors" "$tmp/sharded$at.safetensors" || fail "sharded resume from $at differs"
done
run sharded_one --resume="$(step "$tmp/cks" 50)" --checkpoint="$tmp/sharded_one.safetensors" ||
  fail "2 x ZeRO-1 -> 1 device: $(cat "$tmp/sharded_one.out")"
within "$tmp/sharded_full.safetensors" "$tmp/sharded_one.safetensors"
run sharded_four --devices=cpu:0,cpu:1,cpu:2,cpu:3 --shard=gradients --resume="$(step "$tmp/cks" 50)" \
  --checkpoint="$tmp/sharded_four.safetensors" || fail "2 x ZeRO-1 -> 4 x ZeRO-2: $(cat "$tmp/sharded_four.out")"
within "$tmp/sharded_full.safetensors" "$tmp/sharded_four.safetensors"

# --resume=latest: the newest complete one; with none yet, a fresh start (a job's first try).
run latest --checkpoint_dir="$tmp/ck" --resume=latest --checkpoint="$tmp/latest.safetensors" || fail "latest: $(cat "$tmp/latest.out")"
grep -q '"resumed_from_step":96' "$tmp/latest.out" || fail "latest is not step 96: $(tail -n 1 "$tmp/latest.out")"
run fresh --checkpoint_dir="$tmp/empty" --resume=latest --epochs=1 || fail "latest with none: $(cat "$tmp/fresh.out")"
grep -q "starting afresh" "$tmp/fresh.out" || fail "no fresh-start note: $(cat "$tmp/fresh.out")"

# The CNN: dropout's random streams are in the checkpoint too.
cnn=(--model=cnn --train_limit=300 --epochs=2 --batch_size=50)
run cnn_full "${cnn[@]}" --checkpoint="$tmp/cnn_full.safetensors" || fail "cnn: $(cat "$tmp/cnn_full.out")"
run cnn_saving "${cnn[@]}" --checkpoint_dir="$tmp/ckc" --checkpoint_every=4 || fail "cnn saving: $(cat "$tmp/cnn_saving.out")"
run cnn_resumed "${cnn[@]}" --resume="$(step "$tmp/ckc" 8)" --checkpoint="$tmp/cnn_resumed.safetensors" ||
  fail "cnn resume: $(cat "$tmp/cnn_resumed.out")"
cmp -s "$tmp/cnn_full.safetensors" "$tmp/cnn_resumed.safetensors" ||
  fail "cnn resumed differs: $("$compare" "$tmp/cnn_full.safetensors" "$tmp/cnn_resumed.safetensors")"

# f16 with loss scaling: the scaler's state is part of the checkpoint, and the resumed run ends
# byte-equal.
run f16_full --precision=f16 --epochs=2 --checkpoint="$tmp/f16_full.safetensors" || fail "f16: $(cat "$tmp/f16_full.out")"
run f16_saving --precision=f16 --epochs=2 --checkpoint_dir="$tmp/ckf" --checkpoint_every=20 ||
  fail "f16 saving: $(cat "$tmp/f16_saving.out")"
grep -q '"loss_scale":"' "$(step "$tmp/ckf" 40)/training_state.safetensors" ||
  fail "no loss scale in the f16 checkpoint"
run f16_resumed --precision=f16 --epochs=2 --resume="$(step "$tmp/ckf" 40)" --checkpoint="$tmp/f16_resumed.safetensors" ||
  fail "f16 resume: $(cat "$tmp/f16_resumed.out")"
cmp -s "$tmp/f16_full.safetensors" "$tmp/f16_resumed.safetensors" ||
  fail "f16 resumed differs: $("$compare" "$tmp/f16_full.safetensors" "$tmp/f16_resumed.safetensors")"

# Refused, exit 2, naming what differs; nothing trains.
expect_refusal() {  # expect_refusal "message" args...
  local want="$1"; shift
  local err status
  err=$("$train" "${common[@]}" "$@" 2>&1 >/dev/null); status=$?
  [[ $status -eq 2 ]] || fail "$* exited $status, not 2 ($err)"
  [[ "$err" == *"$want"* ]] || fail "$*: stderr '$err' lacks '$want'"
}
ck50=$(step "$tmp/ck" 50)
expect_refusal "$ck50 was written by a run with --batch_size=64; this run has --batch_size=32" --resume="$ck50" --batch_size=32
expect_refusal "$ck50 was written by a run with --optimizer=sgd; this run has --optimizer=adamw" --resume="$ck50" --optimizer=adamw --lr=0.05
expect_refusal "$ck50 was written by a run with --model=mlp; this run has --model=cnn" --resume="$ck50" --model=cnn
expect_refusal "$ck50 was written by a run with --precision=f32; this run has --precision=bf16" --resume="$ck50" --precision=bf16
expect_refusal "--resume=$tmp/full.safetensors: $tmp/full.safetensors is not a checkpoint folder" --resume="$tmp/full.safetensors"
expect_refusal "--resume=latest: needs --checkpoint_dir" --resume=latest
expect_refusal "--checkpoint_every=5: needs --checkpoint_dir" --checkpoint_every=5
cp -r "$ck50" "$tmp/damaged"
head -c 100 "$ck50/training_state.safetensors" >"$tmp/damaged/training_state.safetensors"
expect_refusal "--resume=$tmp/damaged: $tmp/damaged/training_state.safetensors" --resume="$tmp/damaged"
cp -r "$ck50" "$tmp/partial" && rm "$tmp/partial/model.safetensors"
expect_refusal "$tmp/partial/model.safetensors" --resume="$tmp/partial"

if ((failures)); then
  echo "$failures failure(s)"
  exit 1
fi
echo "PASS"
