#!/usr/bin/env bash
# Watching a run: --metrics (one JSON line per step and per evaluation), --tensorboard_dir
# (event files read back by read_tfevents.py, a decoder written from the format with its own
# CRC-32C) and the progress line on a terminal, in examples/gpt and examples/train. A kill -9
# and --resume=latest, or a resume from an older checkpoint, leave every step once, with the
# uninterrupted run's values; bad paths exit 2 naming them and change no file.
set -uo pipefail
gpt="$1"
train="$2"
read_events="$3"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

tiny=(--layers=1 --width=32 --heads=2 --context=16 --batch_size=8 --eval_every=50 --eval_batches=2 --threads=1)

# check_metrics FILE STEPS EVAL_EVERY: steps 1..STEPS once each, in order, an eval record after
# every EVAL_EVERY-th step and the last, every field present.
check_metrics() {
  python3 - "$@" <<'PY'
import json, sys
path, steps, every = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
records = [json.loads(line) for line in open(path)]
train = [r["step"] for r in records if r["kind"] == "train"]
evals = [r["step"] for r in records if r["kind"] == "eval"]
if train != list(range(1, steps + 1)):
    sys.exit(f"{path}: train steps {train[:5]}...{train[-5:]} (of {len(train)}), expected 1..{steps} once")
want = sorted(set(list(range(every, steps + 1, every)) + [steps]))
if evals != want:
    sys.exit(f"{path}: eval steps {evals}, expected {want}")
fields = {"kind", "step", "loss", "lr", "grad_norm", "loss_scale", "peak_bytes", "wall_time"}
for r in records:
    if r["kind"] == "train" and not fields <= set(r):
        sys.exit(f"{path}: record {r} lacks {fields - set(r)}")
    if r["kind"] == "train" and (not r["peak_bytes"] or r["peak_bytes"][0] <= 0):
        sys.exit(f"{path}: peak_bytes {r['peak_bytes']}")
PY
}

# same_values A B: the same records but for the measured fields (speed, memory, time).
same_values() {
  python3 - "$@" <<'PY'
import json, sys
def values(path):
    out = []
    for line in open(path):
        r = json.loads(line)
        for k in ("tokens_per_sec", "samples_per_sec", "peak_bytes", "wall_time"):
            r.pop(k, None)
        out.append(r)
    return out
a, b = values(sys.argv[1]), values(sys.argv[2])
if a != b:
    diff = next(i for i in range(min(len(a), len(b)) + 1) if i == min(len(a), len(b)) or a[i] != b[i])
    sys.exit(f"{sys.argv[2]} differs from {sys.argv[1]} at record {diff}: "
             f"{b[diff] if diff < len(b) else 'end'} vs {a[diff] if diff < len(a) else 'end'}")
PY
}

# ---- examples/gpt: one run, its metrics and its event file.
"$gpt" "${tiny[@]}" --steps=120 --metrics="$tmp/full.jsonl" --tensorboard_dir="$tmp/tb_full" >"$tmp/full.out" 2>&1 ||
  fail "gpt run: $(cat "$tmp/full.out")"
check_metrics "$tmp/full.jsonl" 120 50 || fail "gpt metrics"
python3 - "$tmp/full.jsonl" "$tmp/full.out" <<'PY' || fail "gpt metrics values"
import json, math, sys
records = [json.loads(l) for l in open(sys.argv[1])]
final = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
train = [r for r in records if r["kind"] == "train"]
# The schedule of examples/gpt (warm-up 100 steps to 1e-3, cosine to 1e-4 at step 120).
for r in train:
    s = r["step"] - 1
    lr = 1e-3 * (s + 1) / 100 if s < 100 else 1e-4 + 0.5 * 9e-4 * (1 + math.cos(math.pi * min(1, (s - 100) / 20)))
    if abs(r["lr"] - lr) > 1e-12 * lr:
        sys.exit(f"step {r['step']}: lr {r['lr']}, expected {lr}")
    if not (r["grad_norm"] > 0 and r["loss_scale"] is None and r["tokens_per_sec"] > 0):
        sys.exit(f"record {r}")
last_eval = [r for r in records if r["kind"] == "eval"][-1]
if round(last_eval["val_loss"], 4) != final["val_loss"]:
    sys.exit(f"last eval {last_eval['val_loss']} vs the JSON line's val_loss {final['val_loss']}")
PY
"$gpt" "${tiny[@]}" --steps=20 --clip=0 --metrics="$tmp/noclip.jsonl" >/dev/null 2>&1 || fail "gpt --clip=0"
grep -q '"grad_norm":null' "$tmp/noclip.jsonl" || fail "without clipping no norm is measured: $(head -n 1 "$tmp/noclip.jsonl")"

# tb_equal DIR METRICS: the newest event file in DIR, decoded, holds the metrics file's values
# at float32 precision; its first event is the file version.
tb_equal() {
  local file
  file=$(ls "$1"/events.out.tfevents.* | sort | tail -n 1)
  "$read_events" "$file" >"$tmp/events.json" || { echo "decoding $file failed"; return 1; }
  python3 - "$tmp/events.json" "$2" "${3:-0}" <<'PY'
import json, struct, sys
events = [json.loads(l) for l in open(sys.argv[1])]
resumed = int(sys.argv[3])
f32 = lambda v: struct.unpack("<f", struct.pack("<f", v))[0]
if events[0].get("file_version") != "brain.Event:2":
    sys.exit(f"first event {events[0]}")
rest = events[1:]
if resumed:
    if rest[0].get("session_log_status") != 1 or rest[0]["step"] != resumed + 1:
        sys.exit(f"a resumed run's second event {rest[0]}, expected SessionLog START at {resumed + 1}")
    rest = rest[1:]
records = [json.loads(l) for l in open(sys.argv[2])]
records = [r for r in records if r["step"] > resumed or (r["kind"] == "eval" and r["step"] > resumed)]
if len(rest) != len(records):
    sys.exit(f"{len(rest)} scalar events, {len(records)} metrics records after step {resumed}")
for e, r in zip(rest, records):
    if e["step"] != r["step"] or abs(e["wall_time"] - r["wall_time"]) > 0.002:
        sys.exit(f"event {e} vs record {r}")
    prefix = "train/" if r["kind"] == "train" else "eval/"
    want = {prefix + k: f32(v) for k, v in r.items()
            if k not in ("kind", "step", "epoch", "wall_time", "peak_bytes") and v is not None}
    want.update({f"memory/peak_bytes_device{i}": f32(v) for i, v in enumerate(r.get("peak_bytes", []))})
    if e["scalars"] != want:
        sys.exit(f"step {r['step']}: scalars {e['scalars']}, expected {want}")
PY
}
tb_equal "$tmp/tb_full" "$tmp/full.jsonl" || fail "gpt event file"

# ---- kill -9 and --resume=latest: every step once, the uninterrupted run's values.
"$gpt" "${tiny[@]}" --steps=600 --metrics="$tmp/long.jsonl" >/dev/null 2>&1 || fail "gpt 600 steps"
rm -rf "$tmp/ck"
"$gpt" "${tiny[@]}" --steps=600 --checkpoint_dir="$tmp/ck" --checkpoint_every=20 --metrics="$tmp/killed.jsonl" \
  --tensorboard_dir="$tmp/tb_killed" >"$tmp/killed.out" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  last=$(tail -n 1 "$tmp/killed.jsonl" 2>/dev/null | sed -n 's/.*"step":\([0-9]*\).*/\1/p')
  [[ -n "$last" && "$last" -ge 45 ]] && break
  sleep 0.05
done
kill -9 "$pid"
wait "$pid" 2>/dev/null
[[ -n "$last" && "$last" -ge 45 && "$last" -lt 600 ]] || fail "the run was not killed mid-way (last step $last)"
"$gpt" "${tiny[@]}" --steps=600 --checkpoint_dir="$tmp/ck" --checkpoint_every=20 --resume=latest \
  --metrics="$tmp/killed.jsonl" --tensorboard_dir="$tmp/tb_killed" >"$tmp/resumed.out" 2>&1 ||
  fail "resume=latest: $(cat "$tmp/resumed.out")"
from=$(tail -n 1 "$tmp/resumed.out" | sed -n 's/.*"resumed_from_step":\([0-9]*\).*/\1/p')
[[ -n "$from" ]] || fail "no resumed_from_step: $(tail -n 1 "$tmp/resumed.out")"
check_metrics "$tmp/killed.jsonl" 600 50 || fail "metrics after kill -9 and resume"
same_values "$tmp/long.jsonl" "$tmp/killed.jsonl" || fail "killed and resumed metrics"
tb_equal "$tmp/tb_killed" "$tmp/killed.jsonl" "${from:-0}" || fail "resumed event file"
[[ $(ls "$tmp/tb_killed" | wc -l) -eq 2 ]] || fail "one event file per run expected: $(ls "$tmp/tb_killed")"

# A resume from an older checkpoint of a finished run cuts the records past it.
cp "$tmp/killed.jsonl" "$tmp/older.jsonl"
"$gpt" "${tiny[@]}" --steps=600 --resume="$tmp/ck/step-000000000560" --metrics="$tmp/older.jsonl" >"$tmp/older.out" 2>&1 ||
  fail "resume from step 560: $(cat "$tmp/older.out")"
same_values "$tmp/long.jsonl" "$tmp/older.jsonl" || fail "resumed from an older checkpoint"

# ---- The progress line on a terminal: rewritten in place with an ETA; plain lines otherwise.
if command -v script >/dev/null; then
  script -qefc "$gpt ${tiny[*]} --steps=300" /dev/null >"$tmp/tty.out" 2>&1 </dev/null || fail "gpt on a terminal"
  grep -q $'\r\e\\[Kstep \\[' "$tmp/tty.out" || fail "no in-place progress line on a terminal: $(head -c 300 "$tmp/tty.out" | od -c | head)"
  grep -qE 'tokens/s eta [0-9]+s' "$tmp/tty.out" || fail "no ETA on the terminal line"
fi
grep -q $'\r' "$tmp/full.out" && fail "carriage returns in output that is not a terminal"
grep -q '^epoch 1/1 step 24/120 loss [0-9.]* [0-9]* tokens/s mem ' "$tmp/full.out" || fail "plain progress lines changed: $(head -n 2 "$tmp/full.out")"

# ---- examples/train: steps with epochs, an eval per epoch, resumed from a mid-epoch checkpoint.
small=(--train_limit=500 --epochs=2 --batch_size=64 --threads=1)
"$train" "${small[@]}" --metrics="$tmp/train.jsonl" --tensorboard_dir="$tmp/tb_train" >"$tmp/train.out" 2>&1 ||
  fail "train run: $(cat "$tmp/train.out")"
check_metrics "$tmp/train.jsonl" 16 8 || fail "train metrics"
python3 - "$tmp/train.jsonl" "$tmp/train.out" <<'PY' || fail "train metrics values"
import json, sys
records = [json.loads(l) for l in open(sys.argv[1])]
final = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
epochs = [r["epoch"] for r in records if r["kind"] == "train"]
if epochs != [1] * 8 + [2] * 8:
    sys.exit(f"epochs {epochs}")
last = records[-1]
if last["kind"] != "eval" or round(last["test_accuracy"], 4) != final["test_accuracy"]:
    sys.exit(f"last record {last} vs {final}")
if abs(sum(r["loss"] for r in records[9:17]) / 8 - last["train_loss"]) > 1e-6:
    sys.exit("the epoch's train_loss is not the mean of its steps' losses")
if any(r["grad_norm"] is not None or not r["samples_per_sec"] > 0 for r in records if r["kind"] == "train"):
    sys.exit("train does not clip: grad_norm null, a positive samples_per_sec")
PY
tb_equal "$tmp/tb_train" "$tmp/train.jsonl" || fail "train event file"
"$train" "${small[@]}" --checkpoint_dir="$tmp/train_ck" --checkpoint_every=5 --metrics="$tmp/train2.jsonl" >/dev/null 2>&1 ||
  fail "train with checkpoints"
"$train" "${small[@]}" --resume="$tmp/train_ck/step-000000000010" --metrics="$tmp/train2.jsonl" >"$tmp/train2.out" 2>&1 ||
  fail "train resumed: $(cat "$tmp/train2.out")"
same_values "$tmp/train.jsonl" "$tmp/train2.jsonl" || fail "train resumed metrics"

# ---- Bad paths: exit 2 naming them, before any file is changed.
expect_error() {  # expect_error PROGRAM MESSAGE ARGS...
  local program="$1" want="$2"; shift 2
  local err status
  err=$("$program" "$@" 2>&1 >/dev/null); status=$?
  [[ $status -eq 2 ]] || fail "$* exited $status, not 2 ($err)"
  [[ "$err" == *"$want"* ]] || fail "$*: stderr '$err' lacks '$want'"
}
snapshot() { (cd "$tmp" && find ck train_ck -type f | sort | xargs md5sum; md5sum killed.jsonl train.jsonl); }
before=$(snapshot)
expect_error "$gpt" "--metrics=$tmp/missing/m.jsonl: cannot open it for appending: No such file or directory" \
  "${tiny[@]}" --steps=600 --checkpoint_dir="$tmp/ck" --resume=latest --metrics="$tmp/missing/m.jsonl"
expect_error "$train" "--metrics=$tmp/missing/m.jsonl: cannot open it for appending: No such file or directory" \
  "${small[@]}" --checkpoint_dir="$tmp/train_ck" --resume=latest --metrics="$tmp/missing/m.jsonl"
if [[ $(id -u) -eq 0 ]]; then
  readonly_file=/proc/sys/kernel/ostype  # read-only even for root
else
  readonly_file="$tmp/readonly.jsonl"
  cp "$tmp/killed.jsonl" "$readonly_file" && chmod 444 "$readonly_file"
fi
expect_error "$gpt" "--metrics=$readonly_file: cannot open it for appending: Permission denied" \
  "${tiny[@]}" --checkpoint_dir="$tmp/ck" --resume=latest --metrics="$readonly_file"
expect_error "$train" "--metrics=$readonly_file: cannot open it for appending: Permission denied" \
  "${small[@]}" --metrics="$readonly_file"
touch "$tmp/a_file"
expect_error "$gpt" "--tensorboard_dir=$tmp/a_file: not a folder" \
  "${tiny[@]}" --checkpoint_dir="$tmp/ck" --resume=latest --metrics="$tmp/killed.jsonl" --tensorboard_dir="$tmp/a_file"
expect_error "$train" "--tensorboard_dir=$tmp/a_file: not a folder" \
  "${small[@]}" --checkpoint_dir="$tmp/train_ck" --resume=latest --metrics="$tmp/train.jsonl" --tensorboard_dir="$tmp/a_file"
expect_error "$gpt" "--tensorboard_dir: cannot create $tmp/a_file/tb:" "${tiny[@]}" --tensorboard_dir="$tmp/a_file/tb"
[[ "$(snapshot)" == "$before" ]] || fail "a refused run changed a checkpoint or a metrics file"

((failures == 0)) && echo PASS
exit $((failures > 0))
