#!/usr/bin/env bash
# Ranks started by Open MPI's mpirun find their place in OMPI_COMM_WORLD_* (no KILN_RANK)
# and run every collective across 2 processes x 2 devices. Skips when mpirun is missing.
set -uo pipefail
worker="$1"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
if ! command -v mpirun >/dev/null; then
  echo "SKIP: mpirun is not installed (Debian's openmpi-bin; ./bazelw installs it)"
  exit 0
fi
env -u KILN_RANK -u KILN_WORLD_SIZE timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 \
  -x KILN_RENDEZVOUS="file://$tmp/store" -x KILN_HOST=127.0.0.1 -x KILN_RUN_ID="mpirun-$$" \
  "$worker" collectives 2 >"$tmp/out" 2>&1
status=$?
cat "$tmp/out"
[[ $status -eq 0 ]] || { echo "FAIL: mpirun exited $status"; exit 1; }
for r in 0 1; do grep -q "JOINED rank $r of 2" "$tmp/out" || { echo "FAIL: rank $r did not join"; exit 1; }; done
! grep -q FAIL "$tmp/out" || exit 1
echo "mpirun ranks ran every collective"
