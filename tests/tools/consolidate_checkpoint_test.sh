#!/usr/bin/env bash
# tools/consolidate_checkpoint: a sharded checkpoint (3 members, parameters and AdamW slots)
# into the model.safetensors an unsharded checkpoint holds, byte for byte, checked again by a
# reader written from the safetensors format alone (parameters only, shapes, every value);
# progress and the final JSON line; exit 2 naming the problem on bad input, nothing written.
set -euo pipefail
tool=$1 make=$2
tmp=$(mktemp -d "${TEST_TMPDIR:-/tmp}/consolidate-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$make" "$tmp/ck" 3 "$tmp/expected.safetensors" || fail "making the checkpoint"
"$tool" --in="$tmp/ck" --out="$tmp/model.safetensors" >"$tmp/out" 2>"$tmp/err" || fail "consolidating: $(cat "$tmp/err")"
cmp -s "$tmp/model.safetensors" "$tmp/expected.safetensors" || fail "not the unsharded file's bytes"
grep -qx 'consolidate_checkpoint: \[4/4\] 1.weight' "$tmp/err" || fail "progress: $(cat "$tmp/err")"
[[ "$(wc -l <"$tmp/out")" == 1 ]] || fail "one line expected: $(cat "$tmp/out")"
grep -q '^{"bytes":[0-9]*,"elements":25,"in":"[^"]*/ck","out":"[^"]*/model.safetensors","parameters":4,"seconds":[0-9.e-]*,"stage":"optimizer","world_size":3}$' \
  "$tmp/out" || fail "summary: $(cat "$tmp/out")"

# What PyTorch's load_state_dict(strict=True) needs: exactly the parameters, whole, in a
# well-formed file (the format read from its definition: 8-byte length, JSON header, data).
/usr/bin/env python3 - "$tmp/model.safetensors" <<'PY' || fail "the file as safetensors"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
header, data = json.loads(raw[8:8 + n]), raw[8 + n:]
assert header.pop("__metadata__") == {"format": "pt"}, "metadata"
want = {"0.weight": ([3, 5], "F32", 0), "0.bias": ([3], "F32", 1), "1.weight": ([2, 3], "BF16", 2), "1.bias": ([1], "BF16", 3)}
assert sorted(header) == sorted(want), f"keys {sorted(header)}"
spans = sorted(tuple(h["data_offsets"]) for h in header.values())
assert spans[0][0] == 0 and spans[-1][1] == len(data) and all(a[1] == b[0] for a, b in zip(spans, spans[1:])), "tiling"
for name, (shape, dtype, k) in want.items():
    h = header[name]
    assert h["shape"] == shape and h["dtype"] == dtype, f"{name}: {h}"
    begin, end = h["data_offsets"]
    count = 1
    for d in shape: count *= d
    if dtype == "F32":
        values = struct.unpack(f"<{count}f", data[begin:end])
    else:  # bf16: the high half of an f32
        values = [struct.unpack("<f", b"\0\0" + data[begin + 2 * i:begin + 2 * i + 2])[0] for i in range(count)]
    assert end - begin == count * (4 if dtype == "F32" else 2), f"{name}: {end - begin} bytes"
    assert list(values) == [k + i / 4 for i in range(count)], f"{name}: {values}"
PY

expect_bad() {  # expect_bad WHAT MESSAGE ARGS...: exit 2, MESSAGE on stderr, no output file
  local what=$1 message=$2; shift 2
  local rc=0
  "$tool" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  [[ $rc == 2 ]] || fail "$what: exit $rc, expected 2: $(cat "$tmp/err")"
  grep -qF -- "$message" "$tmp/err" || fail "$what: $(cat "$tmp/err")"
}
before=$(md5sum <"$tmp/model.safetensors")
expect_bad "existing out" "$tmp/model.safetensors exists already, and nothing is overwritten" \
  --in="$tmp/ck" --out="$tmp/model.safetensors"
[[ "$(md5sum <"$tmp/model.safetensors")" == "$before" ]] || fail "--out was changed"
expect_bad "no arguments" "--in and --out are both needed"
expect_bad "unknown flag" "unknown argument --world=2" --world=2
expect_bad "no index" "$tmp/nothing has no index.json" --in="$tmp/nothing" --out="$tmp/a.safetensors"

cp -r "$tmp/ck" "$tmp/tampered"
# One byte of parameter 1.weight's chunk flipped (a tampered optimizer slot would not matter:
# consolidation reads only the parameters).
/usr/bin/env python3 - "$tmp/tampered/shard-1-of-3.safetensors" <<'PY'
import json, struct, sys
raw = bytearray(open(sys.argv[1], "rb").read())
(n,) = struct.unpack("<Q", raw[:8])
raw[8 + n + json.loads(raw[8:8 + n])["1.weight"]["data_offsets"][0]] ^= 0x7f
open(sys.argv[1], "wb").write(raw)
PY
expect_bad "tampered shard" "shard-1-of-3.safetensors: the chunk of tensor 1.weight was changed or damaged" \
  --in="$tmp/tampered" --out="$tmp/b.safetensors"
cp -r "$tmp/ck" "$tmp/missing"
rm "$tmp/missing/shard-2-of-3.safetensors"
expect_bad "missing shard" "$tmp/missing/shard-2-of-3.safetensors is missing" --in="$tmp/missing" --out="$tmp/c.safetensors"
ls "$tmp" | grep -q '^[abc]\.safetensors' && fail "a file was written on bad input: $(ls "$tmp")"
echo PASS
