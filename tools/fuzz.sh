#!/usr/bin/env bash
# Builds every libFuzzer target (//fuzz/..., --config=fuzz: clang, ASan+UBSan) and runs each
# for SECONDS (default 60) from its committed corpus. A crash, leak, sanitizer report, input
# slower than 10 s or allocation over 2 GiB fails the run; its input is copied into the
# target's corpus folder (fuzz/corpus/<dir>/crash-<sha1>) so that the replay test keeps it.
#
#   tools/fuzz.sh [SECONDS] [fuzzer ...]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds=${1:-60}
shift || true
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "fuzz.sh: SECONDS must be a whole number, got '$seconds'" >&2; exit 2; }

# Each fuzzer and its corpus folder, as fuzz/BUILD.bazel pairs them.
mapfile -t pairs < <(awk '/kiln_fuzzer\(/ {n = ""} /name = "/ {split($0, a, "\""); n = a[2]}
  /corpus_dir = "/ {split($0, a, "\""); print n, a[2]}' fuzz/BUILD.bazel)
targets=()
for pair in "${pairs[@]}"; do
  name=${pair% *}
  if (($# == 0)) || [[ " $* " == *" $name "* ]]; then targets+=("$pair"); fi
done
((${#targets[@]})) || { echo "fuzz.sh: no fuzzer matches '$*'" >&2; exit 2; }

labels=()
for pair in "${targets[@]}"; do labels+=("//fuzz:${pair% *}"); done
./bazelw build --config=fuzz "${labels[@]}"
bin=$(./bazelw info --config=fuzz bazel-bin 2>/dev/null)

work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-fuzz-XXXXXX")
trap 'rm -rf "$work"' EXIT
failed=0
for pair in "${targets[@]}"; do
  name=${pair% *} dir=fuzz/corpus/${pair#* }
  mkdir -p "$work/$name/new" "$work/$name/crash"
  log=$work/$name/log
  if "$bin/fuzz/$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$work/$name/crash/" "$work/$name/new" "$dir" >"$log" 2>&1; then
    status=ok
  else
    status=FAILED failed=1
    tail -40 "$log" >&2
    for crash in "$work/$name/crash/"*; do
      [[ -f "$crash" ]] || continue
      keep="$dir/$(basename "$crash")"
      cp "$crash" "$keep"
      echo "fuzz.sh: $name: kept the failing input as $keep (commit it with the fix)" >&2
    done
  fi
  runs=$(awk -F: '/stat::number_of_executed_units/ {gsub(/ /, "", $NF); print $NF}' "$log")
  rate=$(awk -F: '/stat::average_exec_per_sec/ {gsub(/ /, "", $NF); print $NF}' "$log")
  echo "fuzz $name: $status, ${runs:-?} runs in ${seconds} s (${rate:-?}/s), corpus $(ls "$dir" | wc -l) files"
done
exit "$failed"
