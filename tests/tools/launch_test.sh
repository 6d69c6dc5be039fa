#!/usr/bin/env bash
# tools/launch as a user runs it: every rank gets its place, a fresh store and the run's token,
# output lines carry their rank, a failing rank stops the others and sets the exit status,
# signals are forwarded, and bad usage exits 2. (launch_fork_failure_test: fork failing.)
set -uo pipefail
launch="$1"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# Each rank prints its variables; stdout and stderr both get the prefix; a last line without
# a newline is still printed whole.
out=$("$launch" --nproc=3 -- bash -c 'echo "vars $KILN_RANK/$KILN_WORLD_SIZE/$KILN_LOCAL_RANK/$KILN_LOCAL_WORLD_SIZE $KILN_HOST"; echo "store $KILN_RENDEZVOUS run $KILN_RUN_ID"; echo "err $KILN_RANK" >&2; printf "tail $KILN_RANK"' 2>"$tmp/err")
status=$?
[[ $status -eq 0 ]] || fail "three ranks exited $status"
for r in 0 1 2; do
  grep -qx "\[rank $r\] vars $r/3/$r/3 127.0.0.1" <<<"$out" || fail "rank $r's variables: $out"
  grep -qx "\[rank $r\] tail $r" <<<"$out" || fail "rank $r's unterminated last line: $out"
  grep -qx "\[rank $r\] err $r" "$tmp/err" || fail "rank $r's stderr: $(cat "$tmp/err")"
done
stores=$(grep -o 'store file://[^ ]*' <<<"$out" | sort -u)
[[ $(wc -l <<<"$stores") -eq 1 ]] || fail "ranks saw different stores: $stores"
dir=${stores#store file://}
[[ "$dir" == "${TMPDIR:-/tmp}"/kiln-launch-* ]] || fail "store is not a fresh directory: $dir"
[[ ! -e "$dir" ]] || fail "the store directory $dir was not removed"
[[ $(grep -o 'run [^ ]*$' <<<"$out" | sort -u | wc -l) -eq 1 ]] || fail "ranks saw different run ids"
out=$("$launch" --nproc=2 --rendezvous=redis://db:6379 -- bash -c 'echo $KILN_RENDEZVOUS')
grep -q "^\[rank 1\] redis://db:6379$" <<<"$out" || fail "--rendezvous not passed on: $out"

# One rank fails: the others (which would sleep for a minute) are stopped, and launch exits
# with the failing rank's status.
start=$(date +%s)
"$launch" --nproc=3 -- bash -c 'if [[ $KILN_RANK == 1 ]]; then sleep 0.5; exit 7; fi; sleep 60' 2>"$tmp/err"
status=$?
elapsed=$(($(date +%s) - start))
[[ $status -eq 7 ]] || fail "a rank exiting 7 gave $status"
((elapsed < 10)) || fail "the other ranks were not stopped ($elapsed s)"
grep -q "launch: rank 1 (pid [0-9]*) exited with status 7; stopping the other ranks" "$tmp/err" || fail "no failure message: $(cat "$tmp/err")"

# A rank killed by a signal: 128 + 9.
"$launch" --nproc=2 -- bash -c 'if [[ $KILN_RANK == 0 ]]; then kill -9 $$; fi; sleep 60' 2>"$tmp/err"
status=$?
[[ $status -eq 137 ]] || fail "a rank killed by SIGKILL gave $status"
grep -qx "launch: rank 0 (pid [0-9]*) was killed by signal 9 (Killed); stopping the other ranks" "$tmp/err" ||
  fail "no signal message: $(cat "$tmp/err")"

# A rank that ignores SIGTERM is killed after the grace period.
start=$(date +%s)
"$launch" --nproc=2 --grace=1 -- bash -c 'trap "" TERM; if [[ $KILN_RANK == 0 ]]; then exit 3; fi; for i in $(seq 600); do sleep 0.1; done' 2>/dev/null
status=$?
elapsed=$(($(date +%s) - start))
[[ $status -eq 3 ]] || fail "grace: status $status"
((elapsed < 8)) || fail "a rank ignoring SIGTERM was not killed after the grace period ($elapsed s)"

# SIGTERM to launch reaches every rank (which say so) and launch exits 128 + 15.
"$launch" --nproc=2 -- bash -c 'trap "echo rank $KILN_RANK got TERM; exit 0" TERM; echo ready; while true; do sleep 0.1; done' >"$tmp/out" 2>"$tmp/err" &
pid=$!
for _ in $(seq 100); do [[ $(grep -c ready "$tmp/out") -eq 2 ]] && break; sleep 0.1; done
kill -TERM $pid
wait $pid
status=$?
[[ $status -eq 143 ]] || fail "SIGTERM: launch exited $status"
for r in 0 1; do grep -q "^\[rank $r\] rank $r got TERM" "$tmp/out" || fail "rank $r did not get SIGTERM: $(cat "$tmp/out")"; done
grep -q "launch: got Terminated; forwarding it to every rank" "$tmp/err" || fail "no forwarding message: $(cat "$tmp/err")"

# Usage errors.
expect_usage() {
  local want="$1"; shift
  local err
  err=$("$launch" "$@" 2>&1 >/dev/null); local status=$?
  [[ $status -eq 2 ]] || fail "$* exited $status, not 2"
  [[ "$err" == *"$want"* ]] || fail "$*: '$err' lacks '$want'"
}
expect_usage "--nproc is required" true
expect_usage "no program to run" --nproc=2
expect_usage "unknown flag '--procs=2'" --procs=2 true
expect_usage "unknown flag '--x\\n[rank 0] forged'" $'--x\n[rank 0] forged' true
# A number of ranks is digits, 1..1024 (which also keeps launch from forking thousands).
for n in 0 1025 100000 99999999999999999999 -1 +2 " 2" "2 " 2.0 0x2 "" two; do
  expect_usage "--nproc='$n': expected a whole number of ranks in 1..1024" --nproc="$n" true
done
# The grace period is a plain decimal in 0..3600: nan and inf would make the SIGKILL deadline
# meaningless.
for g in nan inf -inf -1 3600.5 1e9 1e999 +1 " 1" "" . 0x10 five; do
  expect_usage "--grace='$g': expected seconds in 0..3600 (a decimal number such as 2.5)" --nproc=1 --grace="$g" true
done
"$launch" --nproc=1 --grace=3600 true || fail "--grace=3600 was refused"
# Restarts are a whole number in 0..1000000 (launch_restart_test runs them).
for m in -1 +1 " 1" "1 " "" 1.0 0x1 1e3 two 1000001 99999999999999999999; do
  expect_usage "--max_restarts='$m': expected a whole number of restarts in 0..1000000" --nproc=1 --max_restarts="$m" true
done
"$launch" --nproc=1 --max_restarts=1000000 true || fail "--max_restarts=1000000 was refused"
"$launch" --nproc=1 --max_restarts=0 true || fail "--max_restarts=0 was refused"
"$launch" --nproc=1 --grace=0.25 true || fail "--grace=0.25 was refused"
"$launch" --nproc=1024 --grace=0 -- true 2>"$tmp/err" || grep -q "failed: Too many open files" "$tmp/err" ||
  fail "--nproc=1024: $(head -3 "$tmp/err")"
expect_usage "--rendezvous: rendezvous address '/shared/run': expected file:///absolute/shared/dir or redis://host[:port]" \
  --rendezvous=/shared/run --nproc=1 true
expect_usage "--rendezvous: rendezvous address 'redis://db:+1': expected" --rendezvous=redis://db:+1 --nproc=1 true

# A system call that fails is named with its reason, and launch exits 1.
err=$(TMPDIR=/nonexistent/dir "$launch" --nproc=1 true 2>&1); status=$?
[[ $status -eq 1 ]] || fail "an unusable TMPDIR gave $status"
[[ "$err" =~ ^"launch: mkdtemp for the rendezvous directory '/nonexistent/dir/kiln-launch-"[0-9]+"-XXXXXX' failed: No such file or directory"$ ]] ||
  fail "mkdtemp message: $err"

# The run token: 64 hex digits, the same for every rank, fresh for each run; launch's own
# KILN_RUN_TOKEN is passed through unchanged; launch never prints it, not even when a rank fails.
token_of_run() {
  "$launch" --nproc=3 -- bash -c 'echo "token $KILN_RUN_TOKEN"' | sed 's/^\[rank [0-9]*\] token //' | sort -u
}
first=$(token_of_run)
[[ "$first" =~ ^[0-9a-f]{64}$ ]] || fail "ranks' tokens are not one 64-hex-digit token: '$first'"
second=$(token_of_run)
[[ "$second" =~ ^[0-9a-f]{64}$ && "$second" != "$first" ]] || fail "a second run reused or lacks the token: '$second'"
given=$(KILN_RUN_TOKEN='shared token with spaces: passed as is' token_of_run)
[[ "$given" == 'shared token with spaces: passed as is' ]] || fail "KILN_RUN_TOKEN not passed through: '$given'"
"$launch" --nproc=2 -- bash -c 'if [[ $KILN_RANK == 0 ]]; then echo "$KILN_RUN_TOKEN" >"'"$tmp"'/token"; exit 3; fi; sleep 30' \
  >"$tmp/out" 2>"$tmp/err"
status=$?
[[ $status -eq 3 ]] || fail "token run: status $status"
token=$(cat "$tmp/token")
[[ "$token" =~ ^[0-9a-f]{64}$ ]] || fail "rank 0 wrote no token: '$token'"
[[ -n "$token" ]] && grep -qF "$token" "$tmp/out" "$tmp/err" && fail "launch printed the run token: $(cat "$tmp/out" "$tmp/err")"

# Output still in the pipe when the ranks exit is printed, even with no grace period.
out=$("$launch" --nproc=2 --grace=0 -- seq 20000)
[[ $(grep -c "^\[rank 1\] " <<<"$out") -eq 20000 ]] || fail "rank 1's output was cut: $(grep -c "^\[rank 1\] " <<<"$out") lines"
# A rank's child that keeps the rank's output open does not keep launch waiting past the grace
# period once every rank has exited.
start=$(date +%s)
out=$("$launch" --nproc=1 --grace=1 -- bash -c 'sleep 8 & echo started')
status=$?
elapsed=$(($(date +%s) - start))
[[ $status -eq 0 ]] || fail "a rank with a background child: status $status"
((elapsed < 5)) || fail "launch waited for a rank's child ($elapsed s)"
[[ "$out" == "[rank 0] started" ]] || fail "a rank with a background child: output '$out'"

"$launch" --nproc=1 /nonexistent/program 2>"$tmp/err"
status=$?
[[ $status -eq 127 ]] || fail "a missing program gave $status"
grep -q "\[rank 0\] launch: cannot run /nonexistent/program: No such file or directory" "$tmp/err" || fail "missing program message: $(cat "$tmp/err")"

# Started with stdout closed, launch still gives each rank its own stdout pipe.
"$launch" --nproc=2 -- bash -c 'echo out; echo "err $KILN_RANK" >&2' >&- 2>"$tmp/err"
status=$?
[[ $status -eq 0 ]] || fail "with stdout closed: status $status: $(cat "$tmp/err")"
[[ $(grep -c "^\[rank [01]\] err [01]$" "$tmp/err") -eq 2 ]] || fail "with stdout closed: $(cat "$tmp/err")"

if ((failures)); then echo "$failures failed"; exit 1; fi
echo "all launch_test checks passed"
