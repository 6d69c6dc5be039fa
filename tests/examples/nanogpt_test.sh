#!/usr/bin/env bash
# examples/gpt and nanoGPT's layout as a user meets them: --export_nanogpt writes the trained
# parameters under nanoGPT's names (lm_head tied), equal to the kiln checkpoint's; --init_from
# starts a run from such a file (a step at a negligible rate leaves the same parameters); bad
# input exits 2 naming the problem.
set -uo pipefail
gpt="$1"
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

small=(--batch_size=4 --context=16 --layers=2 --heads=2 --width=16 --eval_batches=1 --threads=1 --gelu=exact)
"$gpt" "${small[@]}" --steps=6 --eval_every=6 --checkpoint="$tmp/kiln.safetensors" \
  --export_nanogpt="$tmp/nano.safetensors" >"$tmp/run.out" 2>&1 || fail "exporting run: $(cat "$tmp/run.out")"

# The export against the kiln checkpoint, read with the standard library alone.
/usr/bin/env python3 - "$tmp/kiln.safetensors" "$tmp/nano.safetensors" <<'PY' || fail "the export differs"
import json, re, struct, sys
def load(p):
    raw = open(p, "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n])
    return {k: (v["shape"], raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]) for k, v in h.items() if k != "__metadata__"}
kiln, nano = load(sys.argv[1]), load(sys.argv[2])
parts = {"ln_1": "ln_1", "attn.qkv": "attn.c_attn", "attn.proj": "attn.c_proj", "ln_2": "ln_2", "mlp.fc": "mlp.c_fc", "mlp.proj": "mlp.c_proj"}
want = {}
for k, v in kiln.items():
    m = re.fullmatch(r"h\.(\d+)\.(.+)\.(weight|bias)", k)
    want["transformer.h.%s.%s.%s" % (m[1], parts[m[2]], m[3]) if m else "transformer." + k] = v
want["lm_head.weight"] = kiln["wte.weight"]
if want != nano: sys.exit("keys %s vs %s" % (sorted(want), sorted(nano)))
PY

# A run from the export, one step at lr 1e-30 (no f32 parameter moves): the same parameters.
"$gpt" "${small[@]}" --steps=1 --eval_every=1 --lr=1e-30 --warmup=0 --init_from="$tmp/nano.safetensors" \
  --checkpoint="$tmp/again.safetensors" >"$tmp/again.out" 2>&1 || fail "--init_from run: $(cat "$tmp/again.out")"
cmp -s "$tmp/kiln.safetensors" "$tmp/again.safetensors" || fail "--init_from did not start from the exported parameters"

expect_error "--gelu=relu: expected tanh or exact" --gelu=relu
expect_error "--init_from: cannot open $tmp/missing.safetensors" --init_from="$tmp/missing.safetensors" --steps=1
expect_error "transformer.h.1.attn.c_proj.bias is not in the model ([16])" "${small[@]}" --layers=1 --steps=1 \
  --init_from="$tmp/nano.safetensors"
expect_error "transformer.h.0.attn.c_proj.bias is [16] but the model's h.0.attn.proj.bias is [32]" "${small[@]}" --width=32 \
  --steps=1 --init_from="$tmp/nano.safetensors"
expect_error "--init_from: the starting weights of a fresh run" --init_from="$tmp/nano.safetensors" --resume=latest \
  --checkpoint_dir="$tmp/ck"
expect_error "--export_nanogpt=$tmp/no/such/dir/x.safetensors" --export_nanogpt="$tmp/no/such/dir/x.safetensors"

if ((failures)); then echo "$failures failed"; exit 1; fi
echo "all nanogpt_test checks passed"
