#!/usr/bin/env bash
# A data-parallel run under tools/launch --max_restarts with training checkpoints: one rank is
# killed with SIGKILL once the run is under way; every rank restarts, resumes from the newest
# complete checkpoint and the job ends with the parameters of an uninterrupted run, byte for
# byte. A rank that fails on bad input (exit 2) ends the job without a restart.
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

# 4000 images, batch 64: 63 steps an epoch, 189 in all; a checkpoint every 10 steps.
common=(--train_limit=4000 --epochs=3 --batch_size=64 --threads=1 --devices=cpu:0)

"$launch" --nproc=2 -- "$train" "${common[@]}" --checkpoint="$tmp/full.safetensors" >"$tmp/full.out" 2>&1 ||
  fail "uninterrupted run: $(cat "$tmp/full.out")"

"$launch" --nproc=2 --max_restarts=2 -- "$train" "${common[@]}" --checkpoint_dir="$tmp/ck" --checkpoint_every=10 \
  --resume=latest --checkpoint="$tmp/restarted.safetensors" >"$tmp/restarted.out" 2>&1 &
job=$!
# Once a checkpoint past a step drawn at random is complete, kill rank 1 (the second rank).
kill_after=$((20 + RANDOM % 100))
deadline=$((SECONDS + 120))
until compgen -G "$tmp/ck/step-*" >/dev/null &&
  (( 10#$(ls "$tmp/ck" | grep '^step-' | sort | tail -n 1 | cut -c6-) >= kill_after )); do
  ((SECONDS < deadline)) || { fail "no checkpoint past step $kill_after in 120 s"; break; }
  kill -0 "$job" 2>/dev/null || { fail "the job ended before the kill: $(cat "$tmp/restarted.out")"; break; }
  sleep 0.05
done
ranks=($(ranks_of_launch "$job"))
if ((${#ranks[@]} == 2)); then
  kill -KILL "${ranks[1]}"
else
  fail "expected 2 ranks under launch, found ${#ranks[@]}"
fi
wait "$job" || fail "the restarted job failed: $(cat "$tmp/restarted.out")"
grep -q "launch: restart 1 of 2: rank 1 was killed by signal 9 (Killed) in generation 0" "$tmp/restarted.out" ||
  fail "no restart line: $(cat "$tmp/restarted.out")"
grep -q '"resumed_from_step":' "$tmp/restarted.out" || fail "generation 1 did not resume: $(tail -n 3 "$tmp/restarted.out")"
cmp -s "$tmp/full.safetensors" "$tmp/restarted.safetensors" ||
  fail "killed at step ~$kill_after and restarted: differs by $("$compare" "$tmp/full.safetensors" "$tmp/restarted.safetensors")"

# A rank that fails on bad input (an unwritable checkpoint folder fails rank 0 with exit 2),
# which every start would meet again: launch does not restart it, and exits 2.
touch "$tmp/not_a_folder"
"$launch" --nproc=2 --max_restarts=1 --grace=1 -- "$train" "${common[@]}" --collective_timeout=5 \
  --checkpoint_dir="$tmp/not_a_folder/ck" --resume=latest >"$tmp/failing.out" 2>&1
status=$?
((status == 2)) || fail "the job failing on bad input exited $status, not 2"
# Rank 0 decides about the checkpoint folder and every rank gets its error, so either may be
# the first to exit.
grep -qE "launch: not restarting: rank [01] exited with status 2 in generation 0 \(bad input; a restart would fail the same way\)" \
  "$tmp/failing.out" || fail "no not-restarting line: $(cat "$tmp/failing.out")"

if ((failures)); then
  echo "$failures failure(s)"
  exit 1
fi
echo "PASS (killed after step $kill_after)"
