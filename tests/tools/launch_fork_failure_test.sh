#!/usr/bin/env bash
# tools/launch when fork fails part-way through starting the ranks: it names the call and the
# reason, stops the ranks it did start (SIGTERM, then SIGKILL after the grace period), removes
# its rendezvous directory and exits 1, instead of signalling pid 1 and waiting forever for a
# rank that never existed. fork is made to fail by running launch as an unprivileged user whose
# process limit (ulimit -u) leaves room for launch, its keeper and two ranks; root ignores that
# limit, and only root can become another user, so elsewhere the test is skipped. Processes are
# found by walking /proc (procps may be missing).
set -uo pipefail
launch="$1"
if [[ $(id -u) -ne 0 ]] || ! command -v setpriv >/dev/null; then
  echo "SKIP: making fork fail needs root (to run launch as another user) and setpriv"
  exit 0
fi
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# The pids of user $1's processes.
processes_of() {
  local p
  for p in /proc/[0-9]*; do [[ $(stat -c %u "$p" 2>/dev/null) == "$1" ]] && echo "${p#/proc/}"; done
}

# A user with no processes, so that the limit counts launch and its ranks only.
uid=54321
while [[ -n $(processes_of "$uid") ]]; do uid=$((uid + 1)); done
# The other user cannot reach Bazel's folders under /root: launch runs from a copy.
dir=$(mktemp -d "/tmp/kiln-launch-fork-XXXXXX")
trap 'rm -rf "$dir"' EXIT
cp "$launch" "$dir/launch"
mkdir "$dir/tmp"
chown "$uid:$uid" "$dir/tmp"
chmod 755 "$dir" "$dir/launch"
cd "$dir" || exit 1

# bash execs launch, and each rank execs sleep: with a limit of 4, launch, its keeper and ranks
# 0 and 1 exist and rank 2's fork fails. The ranks ignore SIGTERM, so SIGKILL must follow after
# 1 s.
start=$(date +%s)
timeout 30 setpriv --reuid="$uid" --regid="$uid" --clear-groups env TMPDIR="$dir/tmp" \
  bash -c 'ulimit -u 4 && exec ./launch --nproc=4 --grace=1 -- bash -c "trap \"\" TERM; exec sleep 20"' \
  >"$dir/out" 2>"$dir/err"
status=$?
elapsed=$(($(date +%s) - start))
[[ $status -eq 1 ]] || fail "launch exited $status, not 1 (124: it hung)"
((elapsed < 10)) || fail "the started ranks were not stopped ($elapsed s)"
grep -qx "launch: fork for rank 2 failed: Resource temporarily unavailable" "$dir/err" ||
  fail "no message naming fork and its reason: $(cat "$dir/err")"
grep -qx "launch: stopping the 2 rank(s) already started" "$dir/err" || fail "no stopping message: $(cat "$dir/err")"
grep -q "kill(" "$dir/err" && fail "a kill failed: $(cat "$dir/err")"
[[ -z $(ls -A "$dir/tmp") ]] || fail "the rendezvous directory was left behind: $(ls -A "$dir/tmp")"
for _ in $(seq 50); do [[ -z $(processes_of "$uid") ]] && break; sleep 0.1; done
leftover=$(processes_of "$uid")
if [[ -n "$leftover" ]]; then
  fail "ranks outlived launch: $(for pid in $leftover; do tr '\0' ' ' <"/proc/$pid/cmdline"; echo; done)"
  for pid in $leftover; do kill -KILL "$pid"; done
fi

# A limit that leaves room for the keeper only: nothing to stop, and launch still ends at once.
timeout 30 setpriv --reuid="$uid" --regid="$uid" --clear-groups env TMPDIR="$dir/tmp" \
  bash -c 'ulimit -u 2 && exec ./launch --nproc=2 -- sleep 20' >"$dir/out" 2>"$dir/err"
status=$?
[[ $status -eq 1 ]] || fail "with no rank started, launch exited $status, not 1"
grep -qx "launch: fork for rank 0 failed: Resource temporarily unavailable" "$dir/err" ||
  fail "no fork message for rank 0: $(cat "$dir/err")"
grep -qx "launch: stopping the 0 rank(s) already started" "$dir/err" || fail "no stopping message: $(cat "$dir/err")"

# No room for the keeper: launch names that fork and exits 1, leaving nothing in TMPDIR.
timeout 30 setpriv --reuid="$uid" --regid="$uid" --clear-groups env TMPDIR="$dir/tmp" \
  bash -c 'ulimit -u 1 && exec ./launch --nproc=2 -- sleep 20' >"$dir/out" 2>"$dir/err"
status=$?
[[ $status -eq 1 ]] || fail "with no keeper started, launch exited $status, not 1"
grep -qx "launch: fork for the keeper failed: Resource temporarily unavailable" "$dir/err" ||
  fail "no fork message for the keeper: $(cat "$dir/err")"
grep -q "rank" "$dir/err" && fail "with no keeper, a rank was mentioned: $(cat "$dir/err")"
[[ -z $(ls -A "$dir/tmp") ]] || fail "the rendezvous directory was left behind: $(ls -A "$dir/tmp")"

if ((failures)); then echo "$failures failed"; exit 1; fi
echo "all launch_fork_failure_test checks passed"
