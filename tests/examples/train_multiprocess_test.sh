#!/usr/bin/env bash
# examples/train across processes: under tools/launch with 2 processes x 1 device and
# 2 processes x 2 devices it ends with the parameters (and optimizer state) of the
# in-process run over the same number of devices on the same global batches; a rank killed
# mid-training makes the others fail with a clear status within the timeout and the launcher
# exit non-zero.
set -uo pipefail
train="$1"
launch="$2"
compare="$3"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# Launch's ranks: the children of its keeper, launch's one child (tools/launch_keeper.h). Walks
# /proc: procps (pgrep) may be missing.
children_of() { grep -l "^PPid:[[:space:]]*$1\$" /proc/[0-9]*/status 2>/dev/null | cut -d/ -f3 | sort -n; }
ranks_of_launch() { children_of "$(children_of "$1")"; }

common=(--train_limit=2048 --epochs=1 --batch_size=64 --threads=1)

# 2 x 1 against cpu:0,cpu:1 in one process: the cross-process sum of two gradients is the
# in-process sum of two gradients (one f32 addition, commutative), so the files are equal.
"$train" "${common[@]}" --devices=cpu:0,cpu:1 --checkpoint="$tmp/ref2.safetensors" >"$tmp/ref2.out" 2>&1 ||
  fail "in-process 2-device run: $(cat "$tmp/ref2.out")"
"$launch" --nproc=2 -- "$train" "${common[@]}" --devices=cpu:0 --checkpoint="$tmp/mp2.safetensors" >"$tmp/mp2.out" 2>&1 ||
  fail "2 x 1 run: $(cat "$tmp/mp2.out")"
tail -n 1 "$tmp/mp2.out" | grep -q '^\[rank 0\] {"test_accuracy":.*"devices":\["cpu:0"\],"processes":2,"precision":"f32"}$' ||
  fail "2 x 1 summary: $(tail -n 1 "$tmp/mp2.out")"
grep -q '^\[rank 1\]' "$tmp/mp2.out" && fail "rank 1 printed: $(grep '^\[rank 1\]' "$tmp/mp2.out")"
cmp -s "$tmp/ref2.safetensors" "$tmp/mp2.safetensors" ||
  fail "2 x 1 differs from in-process cpu:0,cpu:1: max |diff| $("$compare" "$tmp/ref2.safetensors" "$tmp/mp2.safetensors")"

# 2 x 2 against cpu:0..cpu:3: in-process sums ((g0 + g1) + g2) + g3, across processes
# (g0 + g1) + (g2 + g3), so each all-reduce may differ in the last bit of f32 (a relative
# 6e-8 of the sum); over 32 SGD steps with momentum such differences stay far below 1e-4.
"$train" "${common[@]}" --devices=cpu:0,cpu:1,cpu:2,cpu:3 --checkpoint="$tmp/ref4.safetensors" >"$tmp/ref4.out" 2>&1 ||
  fail "in-process 4-device run: $(cat "$tmp/ref4.out")"
"$launch" --nproc=2 -- "$train" "${common[@]}" --devices=cpu:0,cpu:1 --checkpoint="$tmp/mp4.safetensors" >"$tmp/mp4.out" 2>&1 ||
  fail "2 x 2 run: $(cat "$tmp/mp4.out")"
diff=$("$compare" "$tmp/ref4.safetensors" "$tmp/mp4.safetensors")
echo "2 x 2 vs in-process 4 devices: max |diff| $diff"
python3 -c "import sys; sys.exit(0 if float('${diff%% *}') <= 1e-4 else 1)" || fail "2 x 2 differs by $diff (tolerance 1e-4)"
# The summaries agree on the loss to the printed digits.
strip() { tail -n 1 "$1" | sed 's/^\[rank 0\] //; s/"samples_per_sec":[0-9.]*,//; s/"peak_bytes":\[[0-9,]*\],"peak_rss_bytes":[0-9]*,//; s/,"devices".*//'; }
[[ "$(strip "$tmp/ref4.out")" == "$(strip "$tmp/mp4.out")" ]] || fail "summaries: $(strip "$tmp/ref4.out") vs $(strip "$tmp/mp4.out")"

# Ranks started with different flags refuse to train, each naming the flag and both values
# (exit 2), before the first step.
for r in 0 1; do
  batch=$((64 * (r + 1)))
  KILN_RANK=$r KILN_WORLD_SIZE=2 KILN_RENDEZVOUS="file://$tmp/disagree-store" KILN_HOST=127.0.0.1 \
    "$train" "${common[@]/--batch_size=64/--batch_size=$batch}" --devices=cpu:0 >"$tmp/disagree$r.out" 2>&1 &
  pids[$r]=$!
done
for r in 0 1; do
  wait "${pids[$r]}"
  status=$?
  [[ $status -eq 2 ]] || fail "disagreeing rank $r exited $status: $(cat "$tmp/disagree$r.out")"
  grep -q '^train: ranks disagree on the run.s settings: rank 1 has --batch_size=128 but rank 0 has --batch_size=64; start every rank with the same flags$' "$tmp/disagree$r.out" ||
    fail "disagreeing rank $r's message: $(cat "$tmp/disagree$r.out")"
done

# A rank killed mid-training, ranks started by hand (no launcher to stop the survivor): the
# survivor fails with a status naming rank 1 within the timeout (3 s), exit status 1.
long=(--train_limit=60000 --epochs=3 --batch_size=64 --threads=1 --devices=cpu:0 --collective_timeout=3)
for r in 0 1; do
  KILN_RANK=$r KILN_WORLD_SIZE=2 KILN_RENDEZVOUS="file://$tmp/kill-store" KILN_HOST=127.0.0.1 \
    "$train" "${long[@]}" >"$tmp/kill$r.out" 2>&1 &
  pids[$r]=$!
done
# Mid-training: after rank 0 reported its first steps.
for _ in $(seq 900); do grep -q '^epoch 1/3 step' "$tmp/kill0.out" && break; sleep 0.2; done
grep -q '^epoch 1/3 step' "$tmp/kill0.out" || fail "training did not start: $(cat "$tmp/kill0.out")"
kill -9 "${pids[1]}"
killed=$(date +%s%N)
for _ in $(seq 100); do kill -0 "${pids[0]}" 2>/dev/null || break; sleep 0.1; done
wait "${pids[0]}"
status=$?
elapsed_ms=$((($(date +%s%N) - killed) / 1000000))
[[ $status -eq 1 ]] || fail "survivor exited $status: $(cat "$tmp/kill0.out")"
((elapsed_ms < 6000)) || fail "survivor took $elapsed_ms ms"
grep -Eq '^train: process group \(gloo, rank 0 of 2\): .* (lost its connection to|got no answer from) rank\(s\) 1 ' "$tmp/kill0.out" ||
  fail "survivor's message: $(cat "$tmp/kill0.out")"
echo "survivor: $(grep '^train:' "$tmp/kill0.out") after $elapsed_ms ms"

# The same under the launcher: it reports the killed rank, stops the other and exits non-zero.
"$launch" --nproc=2 -- "$train" "${long[@]}" >"$tmp/launch-kill.out" 2>&1 &
launcher=$!
for _ in $(seq 900); do grep -q '^\[rank 0\] epoch 1/3 step' "$tmp/launch-kill.out" && break; sleep 0.2; done
ranks=$(ranks_of_launch $launcher)
victim=$(tail -n 1 <<<"$ranks")
kill -9 "$victim"
for _ in $(seq 100); do kill -0 $launcher 2>/dev/null || break; sleep 0.1; done
wait $launcher
status=$?
[[ $status -ne 0 ]] || fail "launcher exited 0 after a rank was killed"
grep -q "launch: rank [01] (pid $victim) was killed by signal 9 (Killed); stopping the other ranks" "$tmp/launch-kill.out" ||
  fail "launcher output: $(tail -n 5 "$tmp/launch-kill.out")"
for pid in $ranks; do kill -0 "$pid" 2>/dev/null && fail "rank pid $pid outlived the launcher"; done

if ((failures)); then echo "$failures failed"; exit 1; fi
echo "all train_multiprocess_test checks passed"
