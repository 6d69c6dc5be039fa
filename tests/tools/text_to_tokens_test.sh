#!/usr/bin/env bash
# tools/text_to_tokens on a corpus folder: the token files it writes read back (by an independent
# reader here, from the formats' descriptions) as the corpus's bytes split 90/10, in nanoGPT's raw
# .bin and in llm.c's shards; bad input exits 2 naming it and writes nothing.
set -uo pipefail
tool="$1"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

mkdir -p "$tmp/corpus"
for i in $(seq 1 300); do echo "line $i: a corpus is any text at all"; done >"$tmp/corpus/b.txt"
printf 'First file.\n\xff\x00 bytes of every value\n' >"$tmp/corpus/a.txt"
echo "an index" >"$tmp/corpus/a.dat"  # left out, as fortune's are

out=$("$tool" --input="$tmp/corpus" --output_dir="$tmp/bin" 2>"$tmp/bin.err") || fail "bin run: $(cat "$tmp/bin.err")"
[[ "$(echo "$out" | wc -l)" == 1 ]] || fail "more than one line on stdout: $out"
/usr/bin/env python3 - "$tmp" "$out" <<'PY' || fail "the .bin files differ from the corpus"
import json, struct, sys
tmp, line = sys.argv[1], json.loads(sys.argv[2])
text = open(f"{tmp}/corpus/a.txt", "rb").read() + open(f"{tmp}/corpus/b.txt", "rb").read()
split = len(text) * 9 // 10
def raw(path):
    data = open(path, "rb").read()
    return bytes(struct.unpack(f"<{len(data) // 2}H", data))
assert raw(f"{tmp}/bin/train.bin") == text[:split], "train.bin"
assert raw(f"{tmp}/bin/val.bin") == text[split:], "val.bin"
want = {"input": f"{tmp}/corpus", "format": "bin", "vocab": 256, "train_tokens": split, "val_tokens": len(text) - split,
        "files": 2, "train_data": f"{tmp}/bin/train.bin", "val_data": f"{tmp}/bin/val.bin"}
assert line == want, line
PY

out=$("$tool" --input="$tmp/corpus" --output_dir="$tmp/shards" --format=shard --shard_tokens=4000 --val_fraction=0.25 \
  2>"$tmp/shard.err") || fail "shard run: $(cat "$tmp/shard.err")"
/usr/bin/env python3 - "$tmp" "$out" <<'PY' || fail "the shards differ from the corpus"
import glob, json, struct, sys
tmp, line = sys.argv[1], json.loads(sys.argv[2])
text = open(f"{tmp}/corpus/a.txt", "rb").read() + open(f"{tmp}/corpus/b.txt", "rb").read()
split = int(len(text) * 0.75)
def shards(folder):
    out = b""
    files = sorted(glob.glob(f"{folder}/*"))
    for path in files:
        data = open(path, "rb").read()
        header = struct.unpack("<256i", data[:1024])
        assert header[0] == 20240520 and header[1] == 1 and not any(header[3:]), header[:4]
        assert len(data) == 1024 + 2 * header[2], (path, header[2], len(data))
        assert header[2] <= 4000
        out += bytes(struct.unpack(f"<{header[2]}H", data[1024:]))
    return out, len(files)
train, n = shards(f"{tmp}/shards/train")
assert train == text[:split] and n == (split + 3999) // 4000, ("train", n)
val, m = shards(f"{tmp}/shards/val")
assert val == text[split:] and m == 1, "val"
assert line["files"] == n + m and line["train_data"] == f"{tmp}/shards/train", line
PY
ls -A "$tmp/bin" "$tmp/shards/train" | grep -q "\.tmp-" && fail "a temporary file was left: $(ls -A "$tmp/bin" "$tmp/shards/train")"

expect_error() {
  local want="$1"; shift
  local err status
  err=$("$tool" "$@" 2>&1 >/dev/null); status=$?
  [[ $status -eq 2 ]] || fail "$* exited $status, not 2 ($err)"
  [[ "$err" == "text_to_tokens: $want"* ]] || fail "$*: stderr '$err' lacks '$want'"
}
expect_error "--input=$tmp/none: cannot open $tmp/none: No such file or directory" --input="$tmp/none" --output_dir="$tmp/x"
: >"$tmp/empty.txt"
expect_error "--input=$tmp/empty.txt: $tmp/empty.txt: the file is empty: no tokens" --input="$tmp/empty.txt" --output_dir="$tmp/x"
echo -n "a" >"$tmp/one.txt"
expect_error "--input=$tmp/one.txt: 1 bytes cannot be split with --val_fraction=0.1 (each split needs at least one)" \
  --input="$tmp/one.txt" --output_dir="$tmp/x"
expect_error "$tmp/bin/train.bin exists already" --input="$tmp/corpus" --output_dir="$tmp/bin"
expect_error "--format=csv: expected bin or shard" --input="$tmp/corpus" --output_dir="$tmp/x" --format=csv
expect_error "--val_fraction=1: expected a number between 0 and 1" --input="$tmp/corpus" --output_dir="$tmp/x" --val_fraction=1
expect_error "--shard_tokens=0: expected 1..2147483647" --input="$tmp/corpus" --output_dir="$tmp/x" --shard_tokens=0
expect_error "--input and --output_dir are needed" --input="$tmp/corpus"
expect_error "unknown argument --in=x" --in=x
expect_error "cannot create the folder $tmp/no/such: No such file or directory" --input="$tmp/corpus" --output_dir="$tmp/no/such"
[[ ! -e "$tmp/x" ]] || fail "a refused run created $tmp/x"

if ((failures)); then echo "$failures failed"; exit 1; fi
echo "all text_to_tokens checks passed"
