#!/usr/bin/env bash
# tools/flight_recorder on large dumps: two ranks' dumps of ~75 MiB each (8 members, 36,000
# calls a member, as the recorder writes them) are merged with a peak memory, above that of a
# run on a tiny dump, of at most half their size (the whole-file reader took 5.9x), and the
# report names the call one member skipped. Inputs over the stated cap (1 GiB in all) are
# refused with exit 2 before anything is read; running out of memory is exit 1 with a message. Under ASan (whose shadow memory and redzones
# change the figures) the dumps are smaller and the bound looser.
#
#   flight_recorder_memory_test.sh TOOL PEAK_RSS
# (PEAK_RSS runs TOOL and reports its peak: a child forked by this Python process would count
# Python's memory as its own.)
set -euo pipefail
exec /usr/bin/python3 - "$@" <<'EOF'
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

tool = os.path.abspath(sys.argv[1])
peak_rss = os.path.abspath(sys.argv[2])
work = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()
asan = bool(os.environ.get("ASAN_OPTIONS"))
calls = 9000 if asan else 36000  # a member
bound = 1.0 if asan else 0.5     # peak above the baseline, over the dumps' bytes
members = 8
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what, flush=True)


def run(*args, address_space=None):
    """The tool's exit code, stdout, stderr and peak RSS in bytes, as peak_rss saw them."""
    result = os.path.join(work, "result")

    def limit():
        if address_space:
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    with open(os.path.join(work, "out"), "w+b") as out, open(os.path.join(work, "err"), "w+b") as err:
        subprocess.run([peak_rss, result, tool, *args], stdout=out, stderr=err, check=True, preexec_fn=limit)
        out.seek(0)
        err.seek(0)
        with open(result) as f:
            r = json.load(f)
        return r["exit"], out.read().decode(), err.read().decode(), r["maxrss_kib"] * 1024


def write_dump(path, rank, skip_last=None):
    """A dump as FlightDumpToJson writes it; member `skip_last` lacks the last call."""
    t0 = 1700000000000000
    head = ('{"capacity":65536,"diagnosis":"rank 0 is waiting in \'step 8999 bucket 3\'",'
            f'"dumped_us":{t0 + 10**9},"format":"kiln-flight-recorder 1","group":0,"members":{members},'
            f'"rank":{rank},"reason":"DEADLINE_EXCEEDED: x","world_size":2, "entries": [')
    with open(path, "w") as f:
        f.write(head)
        first = True
        for m in range(members):
            n = calls - 1 if m == skip_last else calls
            lines = []
            for seq in range(n):
                t = t0 + seq * 1000 + m
                last = seq == calls - 1
                lines.append(
                    f'{{"dtype":"f32","ended_us":{0 if last else t + 400},"enqueued_us":{t},'
                    f'"error":"{"DEADLINE_EXCEEDED: waited" if last else ""}","member":{m},'
                    f'"op":"all_reduce(mean)","seq":{seq},"shape":[{269322 + seq % 4}],'
                    f'"started_us":{t + 100},"state":"{"failed" if last else "completed"}",'
                    f'"tag":"step {seq // 4} bucket {seq % 4}"}}')
            if lines:
                f.write(("\n" if first else ",\n") + ",\n".join(lines))
                first = False
        f.write("]}\n")


tiny = os.path.join(work, "tiny.json")
with open(tiny, "w") as f:
    f.write('{"capacity":1,"diagnosis":"","dumped_us":0,"format":"kiln-flight-recorder 1","group":0,'
            '"members":1,"rank":0,"reason":"","world_size":1, "entries": []}\n')
code, out, err, baseline = run(tiny)
check(code == 0, f"the tiny dump: exit {code}: {err}")

big = os.path.join(work, "big")
os.mkdir(big)
started = time.monotonic()
write_dump(os.path.join(big, "rank0.json"), 0)
write_dump(os.path.join(big, "rank1.json"), 1, skip_last=3)
size = sum(os.path.getsize(os.path.join(big, n)) for n in os.listdir(big))
generated = time.monotonic()
code, out, err, peak = run("--tail=3", big)
done = time.monotonic()
ratio = (peak - baseline) / size
print(f"dumps {size / 2**20:.1f} MiB ({2 * members * calls} calls); peak RSS {peak / 2**20:.1f} MiB, "
      f"baseline {baseline / 2**20:.1f} MiB; (peak - baseline) / dumps = {ratio:.3f} (bound {bound}); "
      f"generated in {generated - started:.1f} s, merged in {done - generated:.1f} s", flush=True)
check(code == 0, f"the large dumps: exit {code}: {err[-2000:]}")
check(ratio <= bound, f"peak memory {ratio:.3f}x the dumps' size, over {bound}x")
last = calls - 1
check(f"first divergence: seq {last}: rank 1 member 3 has no call (its last is seq {last - 1} all_reduce(mean) "
      f"'step {(last - 1) // 4} bucket {(last - 1) % 4}' of f32[{269322 + (last - 1) % 4}]); rank 0 member 0 "
      f"called all_reduce(mean) 'step {last // 4} bucket {last % 4}' of f32[{269322 + last % 4}]" in out,
      "the skipped call is the first divergence: " + out[-1500:])
check(f"  ... {2 * members * calls - 1 - 3} earlier call(s)\n" in out, "the tail: " + out[:500])
check(out.endswith('"kind":"missing","seq":%d},"group":0,"members":8,"missing_ranks":[],"ranks":[0,1],'
                   '"world_size":2}]}\n' % last), "the JSON line: " + out[-300:])

# Out of memory all the same (here, 32 MiB of address space): a message and exit 1, not an
# abort. (ASan reserves terabytes of address space, so not under ASan.)
if not asan:
    code, out, err, _ = run("--tail=3", big, address_space=32 << 20)
    check(code == 1 and err == "flight_recorder: out of memory (the dumps need more than this machine gives)\n",
          f"out of memory: exit {code}: {err[-500:]}")

# Over the cap: refused by size, before reading (sparse files: nothing is on disk).
over = os.path.join(work, "over.json")
with open(over, "wb") as f:
    f.truncate(2**30 + 1)
code, out, err, peak = run(over)
check(code == 2 and err == f"flight_recorder: {over}: the dumps come to 1073741825 bytes or more, over the "
      "1073741824 (1 GiB) this tool reads in one run; merge fewer dumps at a time\n", f"one file over: {code} {err}")
check(peak - baseline < 4 << 20, f"refusing read something: peak {peak} against {baseline}")
halves = [os.path.join(work, f"half{i}.json") for i in range(2)]
for h in halves:
    with open(h, "wb") as f:
        f.truncate(600 << 20)
code, out, err, _ = run(*halves)
check(code == 2 and err.startswith(f"flight_recorder: {halves[1]}: the dumps come to 1258291200 bytes or more"),
      f"two files over: {code} {err}")
code, out, err, _ = run("--help")
check(code == 0 and "Reads at most 1073741824 bytes (1 GiB) of dumps in all, the files together, and refuses more" in out, f"--help: {code} {out}")

sys.exit(1 if failures else 0)
EOF
