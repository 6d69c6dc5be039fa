#!/usr/bin/env bash
# tools/launch's rendezvous folder: named kiln-launch-<launch's pid>-XXXXXX in TMPDIR and locked
# (flock) while launch or its keeper lives; at start, launch removes the folders that launches
# now gone left behind (their pid dead and their lock free), and nothing else: not a live
# launch's, not one locked from elsewhere (a launch in another pid namespace), not a link, not
# other names. A launch killed by SIGKILL between generations leaves its folder to the next.
set -uo pipefail
launch="$1"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
export TMPDIR="$tmp/tmpdir"
mkdir -p "$TMPDIR"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# A pid that is no process now.
bash -c 'exit 0' &
dead=$!
wait "$dead"
[[ ! -e /proc/$dead ]] || { echo "pid $dead came back at once; run again"; exit 1; }

stale="$TMPDIR/kiln-launch-$dead-Ab3xYz"
mkdir -p "$stale/sub" "$tmp/outside"
echo data >"$stale/file"
echo data >"$stale/sub/file"
echo keep >"$tmp/outside/file"
ln -s "$tmp/outside/file" "$stale/link-to-outside"
ln -s "$tmp/outside" "$stale/sub/link-to-outside-dir"
kept=(
  "kiln-launch-$$-Ab3xYz"       # its launch (this shell) lives
  "kiln-launch-$dead-Lock12"    # locked by a live process
  "kiln-launch-$dead-Link12"    # a link, not a folder
  "kiln-launch-$dead-File12"    # a file
  "kiln-launch-Ab3xYz"          # an old launch's name, without a pid
  "kiln-launch-0-Ab3xYz"        # no such launch
  "kiln-launch-0$dead-Ab3xYz"   # not how a pid is written
  "kiln-launch-$dead-Ab3x"      # not what mkdtemp makes
  "kiln-launch-$dead-Ab3xYz.d"
  "other-$dead-Ab3xYz"
)
for name in "${kept[@]}"; do mkdir "$TMPDIR/$name"; done
rmdir "$TMPDIR/kiln-launch-$dead-Link12" "$TMPDIR/kiln-launch-$dead-File12"
ln -s "$tmp/outside" "$TMPDIR/kiln-launch-$dead-Link12"
touch "$TMPDIR/kiln-launch-$dead-File12"
# The holder is the lock's only process (flock(1) would leave a child holding it).
(exec 3<"$TMPDIR/kiln-launch-$dead-Lock12" && flock -x 3 && exec sleep 120) &
holder=$!
for _ in $(seq 50); do flock -n -E 99 "$TMPDIR/kiln-launch-$dead-Lock12" true; [[ $? -eq 99 ]] && break; sleep 0.1; done

# A rank that prints its store, then waits to be told to end.
"$launch" --nproc=1 -- bash -c 'echo "store $KILN_RENDEZVOUS"; while [[ ! -e '"$tmp/go"' ]]; do sleep 0.1; done' \
  >"$tmp/out" 2>"$tmp/err" &
pid=$!
for _ in $(seq 150); do grep -q store "$tmp/out" && break; sleep 0.1; done
dir=$(sed -n 's|^\[rank 0\] store file://||p' "$tmp/out")
[[ "$dir" =~ ^"$TMPDIR"/kiln-launch-$pid-[A-Za-z0-9]{6}$ ]] || fail "the rendezvous folder '$dir' is not kiln-launch-$pid-XXXXXX in TMPDIR"
flock -n -E 99 "$dir" true
[[ $? -eq 99 ]] || fail "the rendezvous folder of a running launch is not locked"
touch "$tmp/go"
wait "$pid"
status=$?
[[ $status -eq 0 ]] || fail "launch exited $status: $(cat "$tmp/err")"
[[ ! -e "$stale" ]] || fail "the stale folder was not removed: $(ls -R "$stale")"
grep -qx "launch: removed $stale, the rendezvous folder of launch pid $dead, which is gone" "$tmp/err" ||
  fail "no message for the removed folder: $(cat "$tmp/err")"
[[ $(cat "$tmp/outside/file" 2>/dev/null) == keep ]] || fail "a link inside the stale folder was followed"
for name in "${kept[@]}"; do
  [[ -e "$TMPDIR/$name" || -L "$TMPDIR/$name" ]] || fail "$name was removed"
done
[[ -L "$TMPDIR/kiln-launch-$dead-Link12" ]] || fail "the link was replaced"
[[ ! -e "$dir" ]] || fail "launch's own folder was left behind"
kill "$holder"
wait "$holder" 2>/dev/null
for name in "${kept[@]}"; do rm -rf "${TMPDIR:?}/$name"; done

# SIGKILL during the back-off between generations (no keeper runs then): the folder stays
# until the next launch, which removes it.
"$launch" --nproc=1 --max_restarts=1 --restart_backoff=30 -- bash -c 'echo "store $KILN_RENDEZVOUS"; exit 1' \
  >"$tmp/killed-out" 2>"$tmp/killed-err" &
pid=$!
for _ in $(seq 150); do grep -q "restarting in" "$tmp/killed-err" 2>/dev/null && break; sleep 0.1; done
kill -KILL "$pid"
wait "$pid" 2>/dev/null
left=$(sed -n 's|^\[rank 0\] store file://||p' "$tmp/killed-out")
[[ -d "$left" ]] || fail "no folder left by a launch killed between generations: '$left' ($(cat "$tmp/killed-err"))"
"$launch" --nproc=1 true 2>"$tmp/err" || fail "the next launch failed: $(cat "$tmp/err")"
[[ ! -e "$left" ]] || fail "the next launch did not remove $left"
grep -qx "launch: removed $left, the rendezvous folder of launch pid $pid, which is gone" "$tmp/err" ||
  fail "no message for the folder of the killed launch: $(cat "$tmp/err")"
[[ -z "$(ls -A "$TMPDIR")" ]] || fail "TMPDIR is not empty: $(ls -A "$TMPDIR")"

if ((failures)); then echo "$failures failed"; exit 1; fi
echo "all launch_reclaim_test checks passed"
