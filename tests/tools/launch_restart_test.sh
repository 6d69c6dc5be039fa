#!/usr/bin/env bash
# tools/launch --max_restarts: a rank killed or failing stops every rank, all start again as a
# new generation (KILN_RESTART_COUNT) that resumes from the checkpoint and ends with the same
# state as a run never cut; a rank failing on every start ends launch after N restarts with its
# status; --max_restarts=0 is launch without restarts; ranks of different generations never
# form one group. The ranks are restart_worker (a Gloo process group, one all-reduce a step).
set -uo pipefail
launch="$1"
worker="$2"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# launch's own lines (the ranks' are prefixed), pids as P.
launch_lines() { grep '^launch:' "$1" | sed 's/(pid [0-9]*)/(pid P)/'; }

# Uninterrupted: the state every restarted run must end with.
mkdir "$tmp/whole"
"$launch" --nproc=3 -- "$worker" --checkpoint="$tmp/whole" --steps=20 >"$tmp/out" 2>"$tmp/err"
status=$?
[[ $status -eq 0 ]] || fail "uninterrupted run: status $status: $(cat "$tmp/err")"
want=$(grep '^\[rank 0\] final state' "$tmp/out")
[[ -n "$want" ]] || fail "uninterrupted run printed no final state: $(cat "$tmp/out")"

# (--restart_backoff=0 here: launch_backoff_test times the waits.)
# Cut twice (a SIGKILL, then an exit 1 of another rank), restarted twice: the same state, and
# each generation resumed where the last checkpoint was. A given store and token (passed
# through unchanged, so the same in every generation) leave only the generation's keys to
# keep the generations apart.
mkdir "$tmp/cut" "$tmp/store"
KILN_RUN_TOKEN=0123456789abcdef0123456789abcdef "$launch" --nproc=3 --max_restarts=2 --restart_backoff=0 \
  --rendezvous="file://$tmp/store" -- "$worker" --checkpoint="$tmp/cut" --steps=20 \
  --fail=0,1,5,kill --fail=1,2,4,exit >"$tmp/out" 2>"$tmp/err"
status=$?
[[ $status -eq 0 ]] || fail "restarted run: status $status: $(cat "$tmp/err")"
got=$(grep '^\[rank 0\] final state' "$tmp/out")
[[ "$got" == "$want" ]] || fail "restarted run ended with '$got', not '$want'"
expected="launch: rank 1 (pid P) was killed by signal 9 (Killed) in generation 0; stopping the other ranks
launch: restart 1 of 2: rank 1 was killed by signal 9 (Killed) in generation 0; starting all 3 rank(s) again as generation 1
launch: restarting in 0 s (generation 1 of 2)
launch: rank 2 (pid P) exited with status 1 in generation 1; stopping the other ranks
launch: restart 2 of 2: rank 2 exited with status 1 in generation 1; starting all 3 rank(s) again as generation 2
launch: restarting in 0 s (generation 2 of 2)"
[[ "$(launch_lines "$tmp/err")" == "$expected" ]] || fail "restart messages: $(cat "$tmp/err")"
for r in 0 1 2; do
  for gs in "0 0" "1 5" "2 9"; do
    g=${gs% *} s=${gs#* }
    grep -qx "\[rank $r\] rank $r generation $g resumed at step $s" "$tmp/out" ||
      fail "rank $r in generation $g did not resume at step $s: $(cat "$tmp/out")"
  done
done
[[ $(grep -c 'resumed at' "$tmp/out") -eq 9 ]] || fail "not 3 generations of 3 ranks: $(cat "$tmp/out")"

# A rank that fails on every start: N restarts, then launch gives up with its status.
mkdir "$tmp/every"
"$launch" --nproc=2 --max_restarts=2 --restart_backoff=0 -- "$worker" --checkpoint="$tmp/every" --steps=20 --fail='*,0,2,exit' \
  >"$tmp/out" 2>"$tmp/err"
status=$?
[[ $status -eq 1 ]] || fail "failing on every start: status $status, not 1"
expected="launch: rank 0 (pid P) exited with status 1 in generation 0; stopping the other ranks
launch: restart 1 of 2: rank 0 exited with status 1 in generation 0; starting all 2 rank(s) again as generation 1
launch: restarting in 0 s (generation 1 of 2)
launch: rank 0 (pid P) exited with status 1 in generation 1; stopping the other ranks
launch: restart 2 of 2: rank 0 exited with status 1 in generation 1; starting all 2 rank(s) again as generation 2
launch: restarting in 0 s (generation 2 of 2)
launch: rank 0 (pid P) exited with status 1 in generation 2; stopping the other ranks
launch: giving up after 2 restart(s): rank 0 exited with status 1 in generation 2; exiting with status 1"
[[ "$(launch_lines "$tmp/err")" == "$expected" ]] || fail "give-up messages: $(cat "$tmp/err")"
[[ $(cat "$tmp/every/checkpoint") == "6 "* ]] || fail "three generations of 2 steps: checkpoint $(cat "$tmp/every/checkpoint")"
# Killed by a signal on every start: 128 + 9.
mkdir "$tmp/killed"
"$launch" --nproc=2 --max_restarts=1 --restart_backoff=0 -- "$worker" --checkpoint="$tmp/killed" --steps=20 --fail='*,1,0,kill' \
  >"$tmp/out" 2>"$tmp/err"
status=$?
[[ $status -eq 137 ]] || fail "killed on every start: status $status, not 137"
[[ "$(launch_lines "$tmp/err" | tail -1)" == "launch: giving up after 1 restart(s): rank 1 was killed by signal 9 (Killed) in generation 1; exiting with status 137" ]] ||
  fail "give-up message after a kill: $(cat "$tmp/err")"

# --max_restarts=0 is launch as it was: one start, the failing rank's status, no generation in
# the message, no restart.
mkdir "$tmp/none"
"$launch" --nproc=2 --max_restarts=0 -- "$worker" --checkpoint="$tmp/none" --steps=20 --fail=0,1,3,exit \
  >"$tmp/out" 2>"$tmp/err"
status=$?
[[ $status -eq 1 ]] || fail "--max_restarts=0: status $status, not 1"
[[ "$(launch_lines "$tmp/err")" == "launch: rank 1 (pid P) exited with status 1; stopping the other ranks" ]] ||
  fail "--max_restarts=0 messages: $(cat "$tmp/err")"
[[ $(grep -c 'resumed at' "$tmp/out") -eq 2 ]] || fail "--max_restarts=0 started the ranks again: $(cat "$tmp/out")"

# Every rank sees its generation; the rendezvous address and run id stay, the token launch
# makes is new in each generation. Rank 0 fails in generations 0 and 1, late enough for rank 1
# to have printed.
"$launch" --nproc=2 --max_restarts=3 --restart_backoff=0 -- bash -c 'echo "gen $KILN_RESTART_COUNT $KILN_RENDEZVOUS $KILN_RUN_ID $(sha256sum <<<"$KILN_RUN_TOKEN" | cut -c1-16)"
  [[ $KILN_RANK == 1 || $KILN_RESTART_COUNT == 2 ]] || { sleep 0.5; exit 4; }' >"$tmp/out" 2>"$tmp/err"
status=$?
[[ $status -eq 0 ]] || fail "generation variable run: status $status: $(cat "$tmp/err")"
for r in 0 1; do
  [[ "$(grep "^\[rank $r\] gen" "$tmp/out" | cut -d' ' -f4 | tr '\n' ' ')" == "0 1 2 " ]] ||
    fail "rank $r's KILN_RESTART_COUNT: $(cat "$tmp/out")"
done
[[ $(cut -d' ' -f5,6 "$tmp/out" | sort -u | wc -l) -eq 1 ]] || fail "the rendezvous or run id changed: $(cat "$tmp/out")"
[[ $(cut -d' ' -f4,7 "$tmp/out" | sort -u | wc -l) -eq 3 && $(cut -d' ' -f7 "$tmp/out" | sort -u | wc -l) -eq 3 ]] ||
  fail "the token is not one per generation: $(cat "$tmp/out")"

# Ranks of two generations with the same store, run id and token do not meet: each waits for
# a partner of its own generation and names it.
export KILN_WORLD_SIZE=2 KILN_RENDEZVOUS="file://$tmp/mixed" KILN_RUN_ID=mixed KILN_HOST=127.0.0.1
export KILN_RUN_TOKEN=0123456789abcdef0123456789abcdef
mkdir "$tmp/mixed-ckpt"
KILN_RANK=0 KILN_RESTART_COUNT=1 "$worker" --checkpoint="$tmp/mixed-ckpt" --steps=1 --timeout_ms=1500 2>"$tmp/err0" &
new=$!
KILN_RANK=1 KILN_RESTART_COUNT=0 "$worker" --checkpoint="$tmp/mixed-ckpt" --steps=1 --timeout_ms=1500 2>"$tmp/err1"
old_status=$?
wait $new
new_status=$?
[[ $new_status -eq 3 && $old_status -eq 3 ]] || fail "mixed generations: statuses $new_status and $old_status, not 3"
grep -qx "restart_worker: DEADLINE_EXCEEDED: rendezvous at file://$tmp/mixed (run mixed.restart-1) timed out after 1500 ms: rank(s) 1 of 2 did not join (this is rank 0); start every rank with the same rendezvous address, run id and world size" "$tmp/err0" ||
  fail "generation 1's rank 0: $(cat "$tmp/err0")"
grep -qx "restart_worker: DEADLINE_EXCEEDED: rendezvous at file://$tmp/mixed (run mixed) timed out after 1500 ms: rank(s) 0 of 2 did not join (this is rank 1); start every rank with the same rendezvous address, run id and world size" "$tmp/err1" ||
  fail "generation 0's rank 1: $(cat "$tmp/err1")"
unset KILN_WORLD_SIZE KILN_RENDEZVOUS KILN_RUN_ID KILN_HOST KILN_RUN_TOKEN

# A signal to launch ends it without a restart.
"$launch" --nproc=2 --max_restarts=5 -- bash -c 'echo ready; while true; do sleep 0.1; done' >"$tmp/out" 2>"$tmp/err" &
pid=$!
for _ in $(seq 100); do [[ $(grep -c ready "$tmp/out") -eq 2 ]] && break; sleep 0.1; done
kill -TERM $pid
wait $pid
status=$?
[[ $status -eq 143 ]] || fail "SIGTERM with restarts: launch exited $status"
grep -q "restart" "$tmp/err" && fail "SIGTERM to launch restarted the ranks: $(cat "$tmp/err")"
[[ $(grep -c ready "$tmp/out") -eq 2 ]] || fail "SIGTERM to launch started ranks again: $(cat "$tmp/out")"

# ... also when it comes while the ranks of a failed generation are being stopped: launch
# exits with the failure's status and starts nothing.
"$launch" --nproc=2 --max_restarts=5 -- bash -c 'echo "start $KILN_RESTART_COUNT"
  if [[ $KILN_RANK == 0 ]]; then sleep 0.3; exit 5; fi
  trap "sleep 1; exit 0" TERM; while true; do sleep 0.1; done' >"$tmp/out" 2>"$tmp/err" &
pid=$!
for _ in $(seq 100); do grep -q "stopping the other ranks" "$tmp/err" && break; sleep 0.05; done
kill -TERM $pid
wait $pid
status=$?
[[ $status -eq 5 ]] || fail "SIGTERM while stopping: launch exited $status, not 5"
[[ "$(launch_lines "$tmp/err")" == "launch: rank 0 (pid P) exited with status 5 in generation 0; stopping the other ranks
launch: got Terminated; forwarding it to every rank" ]] || fail "SIGTERM while stopping: $(cat "$tmp/err")"
[[ $(grep -c "start" "$tmp/out") -eq 2 ]] || fail "SIGTERM while stopping started ranks again: $(cat "$tmp/out")"

if ((failures)); then echo "$failures failed"; exit 1; fi
echo "all launch_restart_test checks passed"
