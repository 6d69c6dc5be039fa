#!/usr/bin/env bash
# tools/launch leaves no process of a generation behind, whatever ends it: SIGTERM, SIGINT or
# SIGKILL to launch, or a failed rank and a restart. Each rank starts three children that
# escape the usual ways: one ignores SIGTERM (in the rank's process group), one runs in its own
# session (setsid), and one is orphaned (a double fork). Processes are found by a tag in their
# environment (/proc/PID/environ), which every descendant of launch inherits; the rendezvous
# folder launch made in TMPDIR must be gone too. SIGKILL also goes to launch's whole process
# group at once, and to launch's keeper (launch then cleans up itself).
set -uo pipefail
launch="$1"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# The pids whose environment holds KILN_LEFTOVER_TAG=$1 (and, when given, $2 too). Bash
# builtins only: a fork per process would be slow on a loaded machine.
tagged() {
  local want="KILN_LEFTOVER_TAG=$1" also="${2:-}" p e tag extra entries
  local -a found=()
  for p in /proc/[0-9]*; do
    { mapfile -d '' entries <"$p/environ"; } 2>/dev/null || continue
    tag=0 extra=0
    for e in "${entries[@]}"; do
      [[ "$e" == "$want" ]] && tag=1
      [[ -n "$also" && "$e" == "$also" ]] && extra=1
    done
    ((tag)) && [[ -z "$also" || $extra -eq 1 ]] && found+=("${p#/proc/}")
  done
  echo "${found[@]}"
}
# Each pid with its parent and command line, for a failure message.
describe() {
  local pid
  for pid in "$@"; do
    echo "  pid $pid ppid $(sed -n 's/^PPid:\t//p' "/proc/$pid/status" 2>/dev/null) $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)"
  done
}
# Waits up to 15 s for every process tagged $1 to be gone; the leftovers are a failure (and
# are killed, so that they do not disturb later checks).
expect_none_left() {
  local what="$1" tag="$2" left
  for _ in $(seq 150); do
    left=$(tagged "$tag")
    [[ -z "$left" ]] && return
    sleep 0.1
  done
  fail "$what: processes left behind:
$(describe $left)"
  kill -KILL $left 2>/dev/null
}

# A rank: three escaping children (ignoring SIGTERM, SIGINT and SIGHUP, so that only SIGKILL
# ends them), then "ready", then it runs until stopped.
rank='(trap "" TERM INT HUP; exec sleep 300) &
  setsid bash -c "trap \"\" TERM INT HUP; exec sleep 300" </dev/null >/dev/null 2>&1 &
  ( (trap "" TERM INT HUP; exec sleep 300) & )
  echo ready; while true; do sleep 0.1; done'

# Starts launch with two such ranks in a fresh TMPDIR, waits for them and their children, sends
# `signal` to `target` (launch; launch's process group, as timeout(1) sends its signal; or
# launch's keeper, its only child), and checks launch's status, the processes and the folder.
stop_with() {
  local name="$1" target="$2" signal="$3" want_status="$4"
  local tag="leftover-$$-$name" dir="$tmp/$name"
  mkdir -p "$dir/tmpdir"
  # setsid: launch leads its own process group (a background job of this script does not).
  TMPDIR="$dir/tmpdir" KILN_LEFTOVER_TAG="$tag" setsid "$launch" --nproc=2 --grace=1 -- bash -c "$rank" \
    >"$dir/out" 2>"$dir/err" &
  local pid=$! count=0
  for _ in $(seq 150); do
    [[ $(grep -c ready "$dir/out") -eq 2 ]] && count=$(wc -w <<<"$(tagged "$tag")") && ((count >= 8)) && break
    sleep 0.1
  done
  ((count >= 8)) || fail "$name: the ranks and their children did not start ($count tagged): $(cat "$dir/out" "$dir/err")"
  [[ -n "$(ls -A "$dir/tmpdir")" ]] || fail "$name: launch made no rendezvous folder in TMPDIR"
  case $target in
    launch) kill -"$signal" "$pid" ;;
    group)
      [[ $(cut -d' ' -f5 "/proc/$pid/stat") == "$pid" ]] || fail "$name: launch does not lead its process group"
      kill -"$signal" -- "-$pid"
      ;;
    keeper)
      local keeper
      keeper=$(grep -l "^PPid:[[:space:]]*$pid\$" /proc/[0-9]*/status 2>/dev/null | cut -d/ -f3)
      [[ $(wc -w <<<"$keeper") -eq 1 ]] || fail "$name: launch has not one child but '$keeper'"
      kill -"$signal" $keeper
      ;;
  esac
  wait "$pid" 2>/dev/null  # bash would report the kill
  local status=$?
  [[ $status -eq $want_status ]] || fail "$name: launch exited $status, not $want_status: $(cat "$dir/err")"
  expect_none_left "$name" "$tag"
  for _ in $(seq 50); do [[ -z "$(ls -A "$dir/tmpdir")" ]] && break; sleep 0.1; done
  [[ -z "$(ls -A "$dir/tmpdir")" ]] || fail "$name: the rendezvous folder was left behind: $(ls -A "$dir/tmpdir")"
}
stop_with TERM launch TERM 143
stop_with INT launch INT 130
stop_with KILL launch KILL 137
stop_with group-KILL group KILL 137
stop_with keeper-KILL keeper KILL 1
grep -qx "launch: the keeper of generation 0 (pid [0-9]*) was killed by signal 9 (Killed); stopping the ranks" \
  "$tmp/keeper-KILL/err" || fail "no message for the keeper's death: $(cat "$tmp/keeper-KILL/err")"

# Across a restart: rank 0 of generation 0 fails once every child is up; when generation 1
# says it is running, nothing of generation 0 may be left. Then SIGTERM ends generation 1
# with nothing left either.
tag="leftover-$$-restart"
mkdir -p "$tmp/restart/tmpdir"
TMPDIR="$tmp/restart/tmpdir" KILN_LEFTOVER_TAG="$tag" "$launch" --nproc=2 --grace=1 --max_restarts=1 -- bash -c '
  if [[ $KILN_RESTART_COUNT == 1 ]]; then echo "generation 1"; while true; do sleep 0.1; done; fi
  (trap "" TERM INT HUP; exec sleep 300) &
  setsid bash -c "trap \"\" TERM INT HUP; exec sleep 300" </dev/null >/dev/null 2>&1 &
  ( (trap "" TERM INT HUP; exec sleep 300) & )
  echo ready
  if [[ $KILN_RANK == 0 ]]; then
    while [[ ! -e '"$tmp/restart/go"' ]]; do sleep 0.1; done
    exit 1
  fi
  while true; do sleep 0.1; done' >"$tmp/restart/out" 2>"$tmp/restart/err" &
pid=$!
count=0
for _ in $(seq 150); do
  [[ $(grep -c ready "$tmp/restart/out") -eq 2 ]] &&
    count=$(wc -w <<<"$(tagged "$tag" KILN_RESTART_COUNT=0)") && ((count >= 8)) && break
  sleep 0.1
done
((count >= 8)) || fail "restart: generation 0 did not start ($count tagged): $(cat "$tmp/restart/out" "$tmp/restart/err")"
touch "$tmp/restart/go"
for _ in $(seq 200); do [[ $(grep -c "generation 1" "$tmp/restart/out") -eq 2 ]] && break; sleep 0.1; done
[[ $(grep -c "generation 1" "$tmp/restart/out") -eq 2 ]] || fail "restart: generation 1 did not start: $(cat "$tmp/restart/err")"
left=$(tagged "$tag" KILN_RESTART_COUNT=0)
[[ -z "$left" ]] || fail "restart: generation 0's processes run on in generation 1:
$(describe $left)"
kill -TERM "$pid"
wait "$pid"
status=$?
[[ $status -eq 143 ]] || fail "restart: launch exited $status, not 143: $(cat "$tmp/restart/err")"
expect_none_left "restart" "$tag"
[[ -z "$(ls -A "$tmp/restart/tmpdir")" ]] || fail "restart: the rendezvous folder was left behind"

if ((failures)); then echo "$failures failed"; exit 1; fi
echo "all launch_leftover_test checks passed"
