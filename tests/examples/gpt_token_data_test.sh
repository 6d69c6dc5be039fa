#!/usr/bin/env bash
# examples/gpt on token files (--train_data, --val_data) that tools/text_to_tokens made from a
# small corpus: bad data exits 2 naming the file and the offset; nanoGPT .bin, llm.c shards and
# the text itself train alike (the same tokens); resumed from a training checkpoint part-way
# through an epoch of the window order it ends byte for byte as the uninterrupted run; and
# 2 processes x 1 device equal one process with 2 devices (members of every process partition
# each batch).
set -uo pipefail
gpt="$1"
tokens="$2"
launch="$3"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

expect_error() {
  local want="$1"; shift
  local err status
  err=$("$gpt" "$@" 2>&1 >/dev/null); status=$?
  [[ $status -eq 2 ]] || fail "$* exited $status, not 2 ($err)"
  [[ "$err" == *"$want"* ]] || fail "$*: stderr '$err' lacks '$want'"
}

# 1,191 bytes, 1,071 to train on: 66 windows of 17 an epoch at --context=16, so 60 steps of 8
# run over seven epochs.
for i in $(seq 1 60); do echo "line $i of a corpus"; done >"$tmp/corpus.txt"
"$tokens" --input="$tmp/corpus.txt" --output_dir="$tmp/bin" >/dev/null || fail "text_to_tokens (bin)"
"$tokens" --input="$tmp/corpus.txt" --output_dir="$tmp/shards" --format=shard --shard_tokens=500 >/dev/null ||
  fail "text_to_tokens (shard)"

small=(--steps=3 --batch_size=4 --context=16 --layers=1 --heads=2 --width=16 --eval_batches=1 --threads=1)
printf 'abc' >"$tmp/odd.bin"
expect_error "gpt: --train_data=$tmp/odd.bin: $tmp/odd.bin: an odd length (3 bytes) for a file of uint16 tokens" \
  "${small[@]}" --train_data="$tmp/odd.bin"
expect_error "--val_data=$tmp/bin/train.bin: $tmp/bin/train.bin: magic 6881388 is not llm.c's token shard magic 20240520" \
  "${small[@]}" --train_data="$tmp/shards/train" --val_data="$tmp/bin/train.bin" --data_format=shard
head -c 100 "$tmp/shards/val/shard_000000.bin" >"$tmp/short.bin"
expect_error "$tmp/short.bin: 100 bytes are too few for llm.c's 1024-byte shard header (truncated)" \
  "${small[@]}" --train_data="$tmp/short.bin" --data_format=shard
expect_error "$tmp/bin/train.bin: token id 108 at byte offset 0 (token 0 of the file) is not below the vocabulary size 100" \
  "${small[@]}" --train_data="$tmp/bin/train.bin" --vocab=100
: >"$tmp/empty.bin"
expect_error "$tmp/empty.bin: the file is empty: no tokens" "${small[@]}" --train_data="$tmp/empty.bin"
expect_error "cannot open $tmp/none.bin: No such file or directory" "${small[@]}" --train_data="$tmp/none.bin"
expect_error "--train_data=$tmp/odd.bin: 2 tokens are too few for --context=16 (17 tokens a window)" \
  "${small[@]}" --train_data="$tmp/odd.bin" --data_format=text
expect_error "--val_data=$tmp/bin/val.bin: needs --train_data" "${small[@]}" --val_data="$tmp/bin/val.bin"
expect_error "--vocab=300: needs --train_data" "${small[@]}" --vocab=300
expect_error "--data_format=shard: needs --train_data" "${small[@]}" --data_format=shard
expect_error '--data_format=xml: unknown token file format "xml" (expected auto, bin, shard or text)' \
  "${small[@]}" --train_data="$tmp/bin/train.bin" --data_format=xml
expect_error "--sample prints bytes: it needs a vocabulary of 256, and this data's is 118" \
  "${small[@]}" --train_data="$tmp/bin/train.bin" --sample=5

# The same tokens as a nanoGPT .bin, llm.c shards (three files joined) and the text itself
# (split 90/10 like text_to_tokens) train to the same result with --vocab=256.
strip() { tail -n 1 "$1" | sed 's/"tokens_per_sec":[0-9.]*,//; s/"peak_bytes":\[[0-9,]*\],"peak_rss_bytes":[0-9]*,//'; }
"$gpt" "${small[@]}" --vocab=256 --train_data="$tmp/bin/train.bin" --val_data="$tmp/bin/val.bin" >"$tmp/bin.out" 2>&1 ||
  fail "run on .bin: $(cat "$tmp/bin.out")"
[[ "$(tail -n 1 "$tmp/bin.out")" == '{"val_loss":'*'"steps":3,"devices":["cpu:0"],"precision":"f32"}' ]] ||
  fail "the .bin run's summary: $(tail -n 1 "$tmp/bin.out")"
"$gpt" "${small[@]}" --vocab=256 --train_data="$tmp/shards/train" --val_data="$tmp/shards/val" >"$tmp/shard.out" 2>&1 ||
  fail "run on shards: $(cat "$tmp/shard.out")"
"$gpt" "${small[@]}" --train_data="$tmp/corpus.txt" --sample=5 >"$tmp/text.out" 2>&1 || fail "run on text: $(cat "$tmp/text.out")"
[[ "$(strip "$tmp/bin.out")" == "$(strip "$tmp/shard.out")" ]] || fail ".bin and shards differ: $(strip "$tmp/shard.out")"
[[ "$(strip "$tmp/bin.out")" == "$(strip "$tmp/text.out")" ]] || fail ".bin and text differ: $(strip "$tmp/text.out")"

# Resumed at step 40 (the fifth epoch, 56 of 66 windows drawn), with dropout: byte for byte the same
# parameters as the run that never stopped.
tiny=(--steps=60 --layers=1 --width=32 --heads=2 --context=16 --batch_size=8 --eval_every=30 --eval_batches=2 --threads=1
  --dropout=0.1 --train_data="$tmp/bin/train.bin" --val_data="$tmp/bin/val.bin")
"$gpt" "${tiny[@]}" --checkpoint="$tmp/full.safetensors" >"$tmp/full.out" 2>&1 || fail "tiny run: $(cat "$tmp/full.out")"
"$gpt" "${tiny[@]}" --checkpoint_dir="$tmp/ck" --checkpoint_every=20 --keep_checkpoints=10 >"$tmp/ck.out" 2>&1 ||
  fail "checkpointing run: $(cat "$tmp/ck.out")"
"$gpt" "${tiny[@]}" --resume="$tmp/ck/step-000000000040" --checkpoint="$tmp/resumed.safetensors" >"$tmp/resumed.out" 2>&1 ||
  fail "resumed run: $(cat "$tmp/resumed.out")"
grep -q '"resumed_from_step":40' "$tmp/resumed.out" || fail "resume summary: $(tail -n 1 "$tmp/resumed.out")"
cmp -s "$tmp/full.safetensors" "$tmp/resumed.safetensors" || fail "resumed on token data differs from the uninterrupted run"
/usr/bin/env python3 - "$tmp/ck/step-000000000040/training_state.safetensors" <<'PY' || fail "the checkpoint's data position"
import json, struct, sys
raw = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", raw[:8])[0]
meta = json.loads(raw[8:8 + n])["__metadata__"]
# 40 steps of 8 windows, 66 an epoch: 320 = 4 * 66 + 56.
assert (meta["data_epoch"], meta["data_drawn"]) == ("4", "56"), meta
PY
# Another dataset, or the text corpus's checkpoint, is refused naming what differs.
expect_error "was written by a run with --train_tokens=1071; this run has --train_tokens=500" \
  "${tiny[@]}" --train_data="$tmp/shards/train/shard_000000.bin" --resume="$tmp/ck/step-000000000040"
"$gpt" "${small[@]}" --steps=2 --checkpoint_dir="$tmp/ck_text" >/dev/null 2>&1 || fail "run on the text corpus"
expect_error "does not say which --train_tokens it was written with" "${small[@]}" --steps=2 \
  --train_data="$tmp/bin/train.bin" --vocab=256 --resume="$tmp/ck_text/step-000000000002"

# 2 processes x 1 device is one process with cpu:0,cpu:1: the same windows to the same members.
"$gpt" "${small[@]}" --train_data="$tmp/bin/train.bin" --devices=cpu:0,cpu:1 --checkpoint="$tmp/in.safetensors" \
  >"$tmp/in.out" 2>&1 || fail "in-process run: $(cat "$tmp/in.out")"
"$launch" --nproc=2 -- "$gpt" "${small[@]}" --train_data="$tmp/bin/train.bin" --devices=cpu:0 \
  --checkpoint="$tmp/mp.safetensors" >"$tmp/mp.out" 2>&1 || fail "2 x 1 run: $(cat "$tmp/mp.out")"
cmp -s "$tmp/in.safetensors" "$tmp/mp.safetensors" || fail "2 x 1 on token data differs from cpu:0,cpu:1 in one process"

if ((failures)); then echo "$failures failed"; exit 1; fi
echo "all gpt_token_data checks passed"
