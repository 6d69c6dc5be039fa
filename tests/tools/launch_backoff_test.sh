#!/usr/bin/env bash
# tools/launch --restart_backoff: launch waits before each restart, doubling the wait after each
# failed generation (1 s by default, at most 60 s: launch_restart_delay_test), and says so; a
# SIGTERM or SIGINT during the wait ends launch at once; a rank exiting with status 2 (bad
# input) is not restarted. Times are measured from the ranks' own start times, with loose
# bounds: only the lower ones are tight (a wait is never shorter than asked).
set -uo pipefail
launch="$1"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
export TMPDIR="$tmp/tmpdir"
mkdir -p "$TMPDIR"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
launch_lines() { grep '^launch:' "$1" | sed 's/(pid [0-9]*)/(pid P)/'; }
# Seconds between generation $2 and the one before it, in a file of "GENERATION TIME" lines.
gap() { awk -v g="$2" '{t[$1] = $2} END {printf "%.3f", t[g] - t[g - 1]}' "$1"; }
# Whether $1 >= $2 (decimals).
at_least() { awk -v a="$1" -v b="$2" 'BEGIN {exit !(a >= b)}'; }
# A rank that notes when its generation started, then fails with status $1.
failing_rank() { echo 'echo "$KILN_RESTART_COUNT $(date +%s.%N)" >>"$STARTS"; exit '"$1"; }

# 0.5 s, then 1 s, then 2 s.
export STARTS="$tmp/starts"
"$launch" --nproc=1 --grace=0 --max_restarts=3 --restart_backoff=0.5 -- bash -c "$(failing_rank 1)" 2>"$tmp/err"
status=$?
[[ $status -eq 1 ]] || fail "failing on every start: status $status: $(cat "$tmp/err")"
[[ $(wc -l <"$STARTS") -eq 4 ]] || fail "not 4 generations: $(cat "$STARTS")"
for gw in "1 0.5" "2 1" "3 2"; do
  g=${gw% *} want=${gw#* }
  got=$(gap "$STARTS" "$g")
  at_least "$got" "$want" || fail "generation $g started $got s after the one before, not >= $want s"
  at_least "$((${want%.*} + 5))" "$got" || fail "generation $g started $got s after the one before, far more than $want s"
done
expected="launch: rank 0 (pid P) exited with status 1 in generation 0; stopping the other ranks
launch: restart 1 of 3: rank 0 exited with status 1 in generation 0; starting all 1 rank(s) again as generation 1
launch: restarting in 0.5 s (generation 1 of 3)
launch: rank 0 (pid P) exited with status 1 in generation 1; stopping the other ranks
launch: restart 2 of 3: rank 0 exited with status 1 in generation 1; starting all 1 rank(s) again as generation 2
launch: restarting in 1 s (generation 2 of 3)
launch: rank 0 (pid P) exited with status 1 in generation 2; stopping the other ranks
launch: restart 3 of 3: rank 0 exited with status 1 in generation 2; starting all 1 rank(s) again as generation 3
launch: restarting in 2 s (generation 3 of 3)
launch: rank 0 (pid P) exited with status 1 in generation 3; stopping the other ranks
launch: giving up after 3 restart(s): rank 0 exited with status 1 in generation 3; exiting with status 1"
[[ "$(launch_lines "$tmp/err")" == "$expected" ]] || fail "back-off messages: $(cat "$tmp/err")"

# The default is 1 s.
rm -f "$STARTS"
"$launch" --nproc=2 --grace=0 --max_restarts=1 -- bash -c "$(failing_rank 1)" 2>"$tmp/err"
got=$(gap "$STARTS" 1)
at_least "$got" 0.95 || fail "the default back-off: generation 1 started $got s after generation 0"
grep -qx "launch: restarting in 1 s (generation 1 of 1)" "$tmp/err" || fail "default back-off message: $(cat "$tmp/err")"

# A SIGTERM or SIGINT during a 30 s back-off ends launch at once with the failure's status,
# and no generation starts.
for signal in TERM INT; do
  rm -f "$STARTS"
  err="$tmp/err-$signal"  # a new file: the loop below must not read an earlier run's
  "$launch" --nproc=1 --grace=0 --max_restarts=2 --restart_backoff=30 -- bash -c "$(failing_rank 5)" 2>"$err" &
  pid=$!
  for _ in $(seq 150); do grep -q "restarting in" "$err" 2>/dev/null && break; sleep 0.1; done
  start=$(date +%s)
  kill -"$signal" "$pid"
  wait "$pid"
  status=$?
  elapsed=$(($(date +%s) - start))
  [[ $status -eq 5 ]] || fail "$signal during the back-off: status $status, not 5: $(cat "$err")"
  ((elapsed < 10)) || fail "$signal during the back-off: launch took $elapsed s to end"
  name=$([[ $signal == TERM ]] && echo Terminated || echo Interrupt)
  [[ "$(launch_lines "$err" | tail -2)" == "launch: restarting in 30 s (generation 1 of 2)
launch: got $name during the back-off; not restarting" ]] || fail "$signal during the back-off: $(cat "$err")"
  [[ $(wc -l <"$STARTS") -eq 1 ]] || fail "$signal during the back-off started a generation: $(cat "$STARTS")"
done

# Status 2 is bad input: a restart would fail the same way, so there is none.
rm -f "$STARTS"
"$launch" --nproc=2 --grace=0 --max_restarts=3 -- \
  bash -c 'if [[ $KILN_RANK == 1 ]]; then '"$(failing_rank 2)"'; fi; sleep 30' 2>"$tmp/err"
status=$?
[[ $status -eq 2 ]] || fail "a rank exiting 2: launch exited $status, not 2"
[[ "$(launch_lines "$tmp/err")" == "launch: rank 1 (pid P) exited with status 2 in generation 0; stopping the other ranks
launch: not restarting: rank 1 exited with status 2 in generation 0 (bad input; a restart would fail the same way)" ]] ||
  fail "a rank exiting 2: $(cat "$tmp/err")"
[[ $(wc -l <"$STARTS") -eq 1 ]] || fail "a rank exiting 2 was restarted: $(cat "$STARTS")"

# The flag: plain decimal seconds in 0..60.
for b in -1 60.5 61 1e1 nan inf " 1" "" . 0x1 one; do
  err=$("$launch" --nproc=1 --restart_backoff="$b" true 2>&1 >/dev/null)
  status=$?
  [[ $status -eq 2 ]] || fail "--restart_backoff='$b' exited $status, not 2"
  [[ "$err" == *"--restart_backoff='$b': expected seconds in 0..60 (a decimal number such as 0.5)"* ]] ||
    fail "--restart_backoff='$b': $err"
done
"$launch" --nproc=1 --restart_backoff=60 true || fail "--restart_backoff=60 was refused"
[[ -z "$(ls -A "$TMPDIR")" ]] || fail "launch left files in TMPDIR: $(ls -A "$TMPDIR")"

if ((failures)); then echo "$failures failed"; exit 1; fi
echo "all launch_backoff_test checks passed"
