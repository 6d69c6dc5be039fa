#!/usr/bin/env bash
# tools/pre-commit as a contributor installs and meets it: in a fresh git repository with the
# root .clang-format, a badly formatted staged C++ file is refused with the command that fixes
# it, the fixed file commits, and the check reads the staged contents and the root
# .clang-format (120 columns), not the working tree or clang-format's defaults.
set -uo pipefail
hook=$(realpath "$1")
style=$(realpath "$2")
tmp=$(mktemp -d "${TEST_TMPDIR:-/tmp}/pre-commit-XXXXXX")
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# A repository of its own, with no user or system git configuration.
export HOME=$tmp GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_NAME=test GIT_AUTHOR_EMAIL=test@example.com
export GIT_COMMITTER_NAME=test GIT_COMMITTER_EMAIL=test@example.com
cd "$tmp" && git init -q repo && cd repo || exit 1
mkdir tools && cp "$hook" tools/pre-commit && cp "$style" .clang-format
ln -s ../../tools/pre-commit .git/hooks/pre-commit  # the install command CONTRIBUTING.md gives
git add tools .clang-format && git commit -qm "the hook" || fail "a commit without C++ files was refused"

# A badly formatted file is refused, with the file named and the command that fixes it.
printf 'int  main( ){return 0;}\n' >bad.cc
git add bad.cc
if git commit -qm bad 2>"$tmp/err"; then fail "a badly formatted file was committed"; fi
grep -q '^  bad.cc$' "$tmp/err" || fail "the refusal does not name bad.cc: $(cat "$tmp/err")"
grep -q 'clang-format.* -i bad.cc && git add bad.cc' "$tmp/err" || fail "no fix command: $(cat "$tmp/err")"
[[ $(git rev-list --count HEAD) -eq 1 ]] || fail "the refused commit was made"

# Formatting only the working tree is not enough: the staged contents are what is checked.
clang-format -i bad.cc
if git commit -qm bad 2>/dev/null; then fail "an unformatted staged file passed (only the working tree was formatted)"; fi

# The fix the message gives: stage the formatted file and the commit passes.
git add bad.cc
git commit -qm formatted 2>"$tmp/err" || fail "a formatted file was refused: $(cat "$tmp/err")"

# The root .clang-format decides: a 100-column line is right at 120 columns (Google's 80 would
# break it), and a CUDA file is checked like C++.
printf 'int sum_of_two_long_named_values(int first_long_named_value, int second_long_named_value);\n' >wide.h
printf '__global__ void K( float*x ){x[0]=1;}\n' >bad.cu
git add wide.h bad.cu
git commit -qm cuda 2>"$tmp/err" && fail "a badly formatted .cu file was committed"
grep -q '^  bad.cu$' "$tmp/err" || fail "the refusal does not name bad.cu: $(cat "$tmp/err")"
grep -q '^  wide.h$' "$tmp/err" && fail "wide.h was refused: the root .clang-format was not used"
git reset -q bad.cu
git commit -qm wide 2>"$tmp/err" || fail "a file formatted for 120 columns was refused: $(cat "$tmp/err")"

# Files CI does not format are not checked; a deletion needs no check.
printf 'not   C++\n' >notes.txt
git add notes.txt && git rm -q --cached wide.h
git commit -qm other 2>"$tmp/err" || fail "a text file or a deletion was refused: $(cat "$tmp/err")"

((failures == 0)) && echo "PASS"
exit $((failures > 0))
