#!/usr/bin/env bash
# Two hosts for real: two network namespaces joined by a veth pair, one rank in each, each
# listening on its own address. Checks correct all-reduces over the link, then cuts the link
# mid-run and checks that both ranks fail with a clear status within the timeout. Everything
# it makes is removed on exit, failure included. Skips (with the reason) when not root or
# when network namespaces cannot be made.
set -uo pipefail
worker="$1"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
timeout_ms=3000
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

if [[ $EUID -ne 0 ]]; then
  echo "SKIP: netns_test needs root to create network namespaces (CI runs as root)"
  exit 0
fi
if ! command -v ip >/dev/null; then
  echo "SKIP: iproute2's ip is not installed (./bazelw installs it)"
  exit 0
fi

id=$$
ns_a="kiln-$id-a" ns_b="kiln-$id-b"
veth_a="kv${id}a" veth_b="kv${id}b"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null; done
  wait 2>/dev/null
  ip netns del "$ns_a" 2>/dev/null
  ip netns del "$ns_b" 2>/dev/null
  ip link del "$veth_a" 2>/dev/null
  true
}
trap cleanup EXIT

if ! ip netns add "$ns_a" 2>"$tmp/netns.err"; then
  echo "SKIP: cannot create a network namespace: $(cat "$tmp/netns.err")"
  exit 0
fi
ip netns add "$ns_b" || { fail "second namespace"; exit 1; }
ip link add "$veth_a" type veth peer name "$veth_b" || { fail "veth pair"; exit 1; }
ip link set "$veth_a" netns "$ns_a" && ip link set "$veth_b" netns "$ns_b" || { fail "moving the veth ends"; exit 1; }
ip -n "$ns_a" addr add 10.77.0.1/24 dev "$veth_a" && ip -n "$ns_b" addr add 10.77.0.2/24 dev "$veth_b" || { fail "addresses"; exit 1; }
for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
ip -n "$ns_a" link set "$veth_a" up && ip -n "$ns_b" link set "$veth_b" up || { fail "links up"; exit 1; }
if command -v ping >/dev/null; then
  ip netns exec "$ns_a" ping -c 1 -W 2 10.77.0.2 >/dev/null 2>&1 || echo "note: ping across the veth failed (the ranks will tell)"
fi

# One rank per namespace, all-reducing (each iteration checks the sum) until the link goes.
run_rank() {
  local rank=$1 ns=$2 host=$3
  ip netns exec "$ns" env KILN_RANK="$rank" KILN_WORLD_SIZE=2 KILN_LOCAL_RANK=0 KILN_LOCAL_WORLD_SIZE=1 \
    KILN_RENDEZVOUS="file://$tmp/store" KILN_RUN_ID="netns-$id" KILN_HOST="$host" \
    "$worker" loop 1 "$timeout_ms" >"$tmp/rank$rank.out" 2>&1 &
  pids+=($!)
}
run_rank 0 "$ns_a" 10.77.0.1
run_rank 1 "$ns_b" 10.77.0.2

for _ in $(seq 300); do
  grep -q "ITERATION 100 ok" "$tmp/rank0.out" && grep -q "ITERATION 100 ok" "$tmp/rank1.out" && break
  sleep 0.1
done
for r in 0 1; do
  grep -q "ITERATION 100 ok" "$tmp/rank$r.out" || { fail "rank $r did not all-reduce over the veth: $(cat "$tmp/rank$r.out")"; exit 1; }
done
echo "both ranks all-reduced correctly over the veth pair (10.77.0.1 <-> 10.77.0.2)"

# Cut the link mid-run: no connection closes, so both wait out the timeout.
ip -n "$ns_a" link set "$veth_a" down
cut=$(date +%s%N)
for r in 0 1; do
  wait "${pids[$r]}"
  status=$?
  ms=$((($(date +%s%N) - cut) / 1000000))
  out=$(cat "$tmp/rank$r.out")
  other=$((1 - r))
  [[ $status -eq 3 ]] || fail "rank $r exited $status after the cut: $out"
  ((ms < timeout_ms + 4000)) || fail "rank $r took $ms ms to fail (timeout $timeout_ms ms)"
  grep -Eq "^STATUS (DEADLINE_EXCEEDED|UNAVAILABLE): process group \(gloo, rank $r of 2\): .* rank\(s\) $other " <<<"$out" ||
    fail "rank $r's status: $out"
  echo "rank $r: $(grep '^STATUS' <<<"$out") ($ms ms after the cut)"
done
pids=()

if ((failures)); then echo "$failures failed"; exit 1; fi
echo "all netns_test checks passed"
