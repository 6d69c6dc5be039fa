#!/usr/bin/python3
"""Chaos soak: proves that a kiln training job survives abuse and still ends bit-identical.

A small examples/gpt job (2 ranks under tools/launch, --resume=latest, a checkpoint every 20
steps, the newest 3 kept) runs once uninterrupted for the reference: its final checkpoint's
model.safetensors. Then the scenarios below run round-robin, each round in a new seeded random
order, until --minutes are spent (every scenario at least once). Each gets a fresh
--checkpoint_dir and must end with the job's final model byte-equal to the reference (a resumed
kiln run is bit-identical to an uninterrupted one):

  kill_rank       SIGKILL to a rank at a random moment: launch restarts the ranks, they resume.
  stop_rank       SIGSTOP to a rank, never continued (a hung rank): the peer's collective
                  deadline notices, launch kills the stopped rank and restarts.
  kill_launch     SIGKILL to launch itself: nothing of the job may outlive it (processes, the
                  rendezvous folder); the same command started again resumes.
  term_launch     SIGTERM, SIGINT or SIGHUP to launch: it stops the ranks and exits without a
                  restart; the same command started again resumes.
  disk_full       rank 0's writes start failing mid-run. Without root there is no small
                  filesystem to fill, so rank 0's RLIMIT_FSIZE is lowered to 4 KiB (prlimit,
                  SIGXFSZ ignored): its next checkpoint write fails with EFBIG, as a full disk
                  fails it with ENOSPC. The failed write must leave no damaged checkpoint and end
                  the generation; the restarted ranks write freely again and resume.
  second_run      a second job on the same --checkpoint_dir while the first runs: refused with
                  exit status 2, not restarted by launch, and the first run unharmed.
  damaged_newest  a rank killed (no restarts), then one byte of the newest checkpoint's files
                  changed (a bit or the whole byte, in the safetensors header or in the tensor
                  data, which only the checkpoint's CRC-32C tells): --resume=latest must fall
                  back to an older checkpoint.
  stranger        a foreign folder and another run's checkpoint (another --seed) in the
                  checkpoint folder, either newer than the run's own (step-999999999999 and
                  step-000000000001, before the start) or older (step-000000000001 and -2, once
                  the run has a checkpoint), and a rank killed mid-run: neither may be
                  deleted, changed or resumed from.

A fault's moment is a random step of the run (reached when its newest checkpoint passes it)
plus up to one checkpoint interval, so that it lands inside the run however loaded the machine.

After every job: no process carrying the job's tag (an environment variable, found by reading
/proc/*/environ) is left 5 s after launch ended, nothing new appeared in the checkpoint folder
in those 5 s (a leftover that finishes quickly still shows by its writes), no kiln-launch-*
folder is left in the job's own TMPDIR, every step-N folder of the run is complete, and the
newest checkpoint seen before a fault is still there or superseded. At the end of a scenario
the run's newest 3 checkpoints are there, all complete, and no older one.

  tools/chaos_soak.py --gpt=bazel-bin/examples/gpt --launch=bazel-bin/tools/launch \\
      --seed=1 --minutes=3 --workdir=/tmp/soak [--scenarios=kill_rank,stranger]

Prints a line per scenario ("kill_rank: survived (...)" or "kill_rank: FAILED: <why> (...)"),
a summary and one JSON line. Exits 0 when every scenario survived, 1 when one did not (its
folder under --workdir is kept), 2 on bad arguments. Python 3 standard library only, Linux.
"""

import argparse
import hashlib
import json
import os
import random
import re
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

TAG_VAR = "CHAOS_SOAK_TAG"  # marks every process of a job, so /proc finds them all
NPROC = 2
MAX_RESTARTS = 3
KEEP = 3
STEPS = 300
EVERY = 20
GPT_SEED = 1
FOREIGN_SEED = 2  # the other run whose checkpoint the stranger scenario plants
COLLECTIVE_TIMEOUT_S = 10  # how long a hung rank goes unnoticed (a few seconds of load spare)
GRACE_S = 2  # launch's SIGTERM -> SIGKILL
LEFTOVER_WAIT_S = 5  # what a process or folder gets to disappear after its launch ended
FILE_LIMIT_BYTES = 4096  # disk_full: below any checkpoint file's size
MODEL_FILE = "model.safetensors"
STATE_FILE = "training_state.safetensors"
STEP_NAME = re.compile(r"^step-(\d{12})$")


def step_name(step):
    return "step-%012d" % step


def gpt_flags(ck_dir, seed=GPT_SEED, steps=STEPS):
    # Small enough for a few seconds on 2 cores, large enough for 15 checkpoints to fall between.
    return ["--devices=cpu:0", "--threads=1", "--steps=%d" % steps, "--batch_size=16", "--context=64",
            "--layers=2", "--heads=2", "--width=64", "--eval_every=1000000", "--eval_batches=1",
            "--seed=%d" % seed, "--checkpoint_dir=" + ck_dir, "--checkpoint_every=%d" % EVERY,
            "--keep_checkpoints=%d" % KEEP, "--resume=latest",
            "--collective_timeout=%d" % COLLECTIVE_TIMEOUT_S]


# ---- /proc ------------------------------------------------------------------------------------

def pids():
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            yield int(entry)


def read_stat(pid):
    """(comm, state, ppid) or None when the process is gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            data = f.read()
    except OSError:
        return None
    left, right = data.find(b"("), data.rfind(b")")
    fields = data[right + 2:].split()
    if left < 0 or right < 0 or len(fields) < 2:
        return None
    return data[left + 1:right].decode(errors="replace"), fields[0].decode(), int(fields[1])


def read_environ(pid):
    """The process's environment as it started (a dict), or None when unreadable or gone."""
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            data = f.read()
    except OSError:
        return None
    env = {}
    for item in data.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env


def tagged(match):
    """{pid: environment} of every live process whose tag satisfies `match` (zombies have none)."""
    found = {}
    for pid in pids():
        env = read_environ(pid)
        if env is not None and TAG_VAR in env and match(env[TAG_VAR]):
            found[pid] = env
    return found


def describe(pid, env):
    stat = read_stat(pid)
    if stat is None:
        return "pid %d (gone)" % pid
    comm, state, ppid = stat
    rank = " rank %s," % env["KILN_RANK"] if "KILN_RANK" in env else ""
    return "pid %d (%s,%s state %s, parent %d)" % (pid, comm, rank, state, ppid)


def kill_all(found):
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


# ---- checkpoints ------------------------------------------------------------------------------

def safetensors_problem(path):
    """Why the file at `path` is not a whole safetensors file, or None."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                return "%s has %d bytes, fewer than the 8-byte header length" % (path, size)
            n = struct.unpack("<Q", head)[0]
            if n > size - 8:
                return "%s: header length %d runs past the end of the %d-byte file" % (path, n, size)
            header = json.loads(f.read(n).decode("utf-8"))
    except OSError as e:
        return "cannot read %s: %s" % (path, e.strerror)
    except (UnicodeDecodeError, ValueError) as e:
        return "%s: the header is not JSON (%s)" % (path, e)
    data, end = size - 8 - n, 0
    try:
        for name, entry in header.items():
            if name == "__metadata__":
                continue
            begin, stop = entry["data_offsets"]
            if not 0 <= begin <= stop <= data:
                return "%s: tensor %s lies outside the %d data bytes" % (path, name, data)
            end = max(end, stop)
    except (AttributeError, KeyError, TypeError, ValueError):
        return "%s: the header is not a safetensors header" % path
    if end != data:
        return "%s: %d data bytes but the tensors end at %d" % (path, data, end)
    return None


def checkpoint_problem(folder):
    """Why the checkpoint folder is not complete, or None."""
    if os.path.islink(folder) or not os.path.isdir(folder):
        return "%s is not a folder" % folder
    for name in (MODEL_FILE, STATE_FILE):
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            return "%s has no %s" % (folder, name)
        problem = safetensors_problem(path)
        if problem:
            return problem
    return None


def own_steps(ck_dir, strangers=()):
    """{step: folder} of the step-N folders in ck_dir, the planted ones left out."""
    out = {}
    try:
        names = os.listdir(ck_dir)
    except OSError:
        return out
    for name in names:
        m = STEP_NAME.match(name)
        if m and name not in strangers:
            out[int(m.group(1))] = os.path.join(ck_dir, name)
    return out


def newest_complete(ck_dir, strangers=()):
    steps = own_steps(ck_dir, strangers)
    for step in sorted(steps, reverse=True):
        if checkpoint_problem(steps[step]) is None:
            return step
    return None


def first_difference(got, want):
    """Where two model files differ: the byte and what it belongs to in `want`."""
    i = next((k for k in range(min(len(got), len(want))) if got[k] != want[k]), min(len(got), len(want)))
    where = "past the end of one file"
    if i < 8:
        where = "the header length"
    elif len(want) >= 8:
        n = struct.unpack("<Q", want[:8])[0]
        if i < 8 + n:
            where = "the header"
        else:
            try:
                for name, entry in json.loads(want[8:8 + n].decode()).items():
                    if name != "__metadata__" and entry["data_offsets"][0] <= i - 8 - n < entry["data_offsets"][1]:
                        where = "tensor " + name
            except (ValueError, KeyError, TypeError):
                pass
    return "the final model differs from the reference at byte %d (%s; %d bytes, reference %d)" % (
        i, where, len(got), len(want))


def tree_digest(folder):
    """A digest of every file's name and bytes under `folder` (None when it is gone)."""
    if not os.path.isdir(folder):
        return None
    h = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(folder)):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            h.update(os.path.relpath(path, folder).encode() + b"\0")
            with open(path, "rb") as f:
                h.update(f.read())
    return h.hexdigest()


# ---- jobs -------------------------------------------------------------------------------------

class Job:
    """One start of tools/launch over the gpt job (or gpt alone), tagged, its output in files."""

    def __init__(self, soak, folder, name, ck_dir, max_restarts=MAX_RESTARTS, seed=GPT_SEED, steps=STEPS,
                 direct=False, ignore_sigxfsz=False):
        self.name, self.folder = name, folder
        self.tag = soak.new_tag()
        self.tmpdir = os.path.join(folder, name + ".tmp")
        os.makedirs(self.tmpdir)
        self.out_path = os.path.join(folder, name + ".out")
        self.err_path = os.path.join(folder, name + ".err")
        # A launcher's variables in the soak's own environment would make the job join another run.
        env = {k: v for k, v in os.environ.items() if not k.startswith("KILN_")}
        env.update({"TMPDIR": self.tmpdir, TAG_VAR: self.tag})
        command = [soak.gpt] + gpt_flags(ck_dir, seed, steps)
        if not direct:
            command = [soak.launch, "--nproc=%d" % NPROC, "--max_restarts=%d" % max_restarts,
                       "--grace=%d" % GRACE_S, "--"] + command
        # Python ignores SIGXFSZ and Popen restores it for the child: disk_full ignores it again,
        # so that a write over the file size limit fails with EFBIG instead of killing the rank.
        preexec = (lambda: signal.signal(signal.SIGXFSZ, signal.SIG_IGN)) if ignore_sigxfsz else None
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(command, cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=err, preexec_fn=preexec)
        self.started = time.monotonic()
        self.rc = None

    def elapsed(self):
        return time.monotonic() - self.started

    def running(self):
        return self.proc.poll() is None

    def run_until(self, seconds):
        """Sleeps until `seconds` after the start; whether the job is still running then."""
        while self.running() and self.elapsed() < seconds:
            time.sleep(0.05)
        return self.running()

    def ranks(self):
        """{rank: pid} of the ranks launch runs now: the job's processes given KILN_RANK whose
        parent was not (launch's keeper starts them; a rank's own children inherit it)."""
        out = {}
        mine = tagged(lambda t: t == self.tag)
        for pid, env in mine.items():
            stat = read_stat(pid)
            if stat and "KILN_RANK" in env and "KILN_RANK" not in mine.get(stat[2], {}):
                out[int(env["KILN_RANK"])] = pid
        return out

    def wait_for_ranks(self, timeout=10):
        deadline = time.monotonic() + timeout
        while self.running() and time.monotonic() < deadline:
            ranks = self.ranks()
            if ranks:
                return ranks
            time.sleep(0.05)
        return {}

    def finish(self, timeout):
        """Waits for launch; on timeout kills it (and its processes) and returns None."""
        try:
            self.rc = self.proc.wait(timeout=max(timeout - self.elapsed(), 1))
            return self.rc
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            kill_all(tagged(lambda t: t == self.tag))
            return None

    def text(self, which="err"):
        with open(self.err_path if which == "err" else self.out_path, "rb") as f:
            return f.read().decode(errors="replace")

    def tail(self):
        """For a failure message: the last line a rank wrote to stderr and launch's last line,
        paths relative to the scenario's folder."""
        got = [line.strip() for line in self.text().replace(self.folder + "/", "").splitlines() if line.strip()]
        picked = [line for line in got if line.startswith("[rank ")][-1:]
        picked += [line for line in got if line.startswith("launch:")][-1:]
        cut = [line if len(line) <= 300 else line[:300] + "..." for line in picked or got[-2:]]
        return " | ".join(cut) if cut else "(nothing on stderr)"

    def restarts_after_bad_input(self):
        """launch's restarts after a rank exited 2 (bad input, which a restart cannot mend)."""
        return re.findall(r"^launch: restart \d+ of \d+: rank \d+ exited with status 2\b", self.text(), re.M)

    def restarts(self):
        return len(re.findall(r"^launch: restart \d+", self.text(), re.M))

    def result_json(self):
        """Rank 0's JSON line, or {}."""
        for line in reversed(self.text("out").splitlines()):
            line = line[len("[rank 0] "):] if line.startswith("[rank 0] ") else line
            if line.startswith("{"):
                try:
                    return json.loads(line)
                except ValueError:
                    return {}
        return {}


def exit_text(rc):
    if rc is None:
        return "did not end within its time limit (killed)"
    if rc < 0:
        return "was killed by signal %d (%s)" % (-rc, signal.Signals(-rc).name)
    return "exited %d" % rc


class Outcome:
    """What one scenario did and what went wrong."""

    def __init__(self, name):
        self.name, self.failures, self.notes, self.restarts = name, [], [], 0

    def fail(self, why):
        self.failures.append(why)

    def note(self, what):
        self.notes.append(what)


# ---- the soak ---------------------------------------------------------------------------------

class Soak:

    def __init__(self, args):
        self.gpt, self.launch = os.path.abspath(args.gpt), os.path.abspath(args.launch)
        self.seed, self.minutes = args.seed, args.minutes
        self.rng = random.Random(args.seed)
        self.folder = tempfile.mkdtemp(prefix="soak-%d-" % args.seed, dir=os.path.abspath(args.workdir))
        self.tag_prefix = "soak%d-%s" % (os.getpid(), os.urandom(4).hex())
        self.tags = 0
        self.scenarios = args.scenarios
        self.reference = None
        self.reference_seconds = None
        self.foreign = None

    def new_tag(self):
        self.tags += 1
        return "%s-%d" % (self.tag_prefix, self.tags)

    def mine(self, tag):
        return tag.startswith(self.tag_prefix + "-")

    def sweep(self):
        """Kills whatever this soak started that is still alive (after a failure or interrupt)."""
        kill_all(tagged(self.mine))

    def job_timeout(self):
        return max(120.0, 8 * self.reference_seconds) if self.reference_seconds else 600.0

    def reach_fault(self, job, ck, strangers=(), first_step=0):
        """Waits for a random moment of the job: a step drawn from [first_step, 85% of the run],
        reached when the run's newest checkpoint passes it, then up to one checkpoint interval
        more. Whether the job still runs then. Going by the run's progress rather than the clock
        keeps faults inside the run however loaded the machine is."""
        passed = int(self.rng.uniform(first_step, 0.85 * STEPS) // EVERY) * EVERY
        while job.running() and passed > 0 and max(own_steps(ck, strangers), default=-1) < passed:
            time.sleep(0.05)
        return job.run_until(job.elapsed() + self.rng.uniform(0, 1) * self.reference_seconds * EVERY / STEPS)

    # -- checks after every job --

    def check_job(self, out, job, ck_dir, strangers=(), newest_before=None, others_write=False):
        """Nothing of the job is left, and its checkpoints are complete. Call it as soon as launch
        has been reaped. `others_write`: another job still writes in ck_dir."""
        newest_then = max(own_steps(ck_dir, strangers), default=0)
        deadline = time.monotonic() + LEFTOVER_WAIT_S
        left = tagged(lambda t: t == job.tag)
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            left = tagged(lambda t: t == job.tag)
        if left:
            out.fail("%s: %d process(es) left %d s after launch ended: %s" % (
                job.name, len(left), LEFTOVER_WAIT_S, ", ".join(describe(p, e) for p, e in sorted(left.items()))))
            kill_all(left)
        # A leftover that finishes within the wait escapes the look above, not its checkpoints:
        # one interval past the newest is a write in flight, more is training that went on.
        later = sorted(s for s in own_steps(ck_dir, strangers) if s > newest_then + EVERY)
        if later and not others_write:
            out.fail("%s: %s written after launch ended (the newest was %s then): training went on without it" % (
                job.name, ", ".join(map(step_name, later)), step_name(newest_then)))
        folders = []
        while time.monotonic() < deadline:
            folders = sorted(n for n in os.listdir(job.tmpdir) if n.startswith("kiln-launch-"))
            if not folders:
                break
            time.sleep(0.2)
        if folders:
            out.fail("%s: launch left its rendezvous folder %s in TMPDIR" % (job.name, ", ".join(folders)))
        steps = own_steps(ck_dir, strangers)
        for step in sorted(steps):
            problem = checkpoint_problem(steps[step])
            if problem:
                out.fail("%s: checkpoint %s is not complete: %s" % (job.name, step_name(step), problem))
        bad_input = job.restarts_after_bad_input()
        if bad_input:
            out.fail("%s: launch restarted the ranks %d time(s) after a rank exited 2 (bad input)" % (
                job.name, len(bad_input)))
        if newest_before is not None:
            newest = newest_complete(ck_dir, strangers)
            if newest is None or newest < newest_before:
                out.fail("%s: the newest checkpoint before the fault, %s, is lost (newest complete now: %s)" % (
                    job.name, step_name(newest_before), step_name(newest) if newest is not None else "none"))

    def check_end(self, out, job, ck_dir, strangers=()):
        """The job ended well, with the reference's model and the newest KEEP checkpoints."""
        if job.rc not in (0, None):  # None: reported by finish
            out.fail("%s %s (expected 0): %s" % (job.name, exit_text(job.rc), job.tail()))
        final = os.path.join(ck_dir, step_name(STEPS), MODEL_FILE)
        steps = own_steps(ck_dir, strangers)
        if not os.path.isfile(final):
            out.fail("%s: no final checkpoint %s (checkpoints: %s)" % (
                job.name, step_name(STEPS), ", ".join(step_name(s) for s in sorted(steps)) or "none"))
        else:
            with open(final, "rb") as f:
                got = f.read()
            if got != self.reference:
                out.fail("%s: %s" % (job.name, first_difference(got, self.reference)))
        if job.rc == 0:
            want = {STEPS - i * EVERY for i in range(KEEP)}
            missing, extra = sorted(want - set(steps)), sorted(set(steps) - want)
            if missing:
                out.fail("%s: checkpoint(s) %s of the run are gone (expected the newest %d: %s)" % (
                    job.name, ", ".join(map(step_name, missing)), KEEP, ", ".join(map(step_name, sorted(want)))))
            if extra:
                out.fail("%s: checkpoint(s) %s left beyond --keep_checkpoints=%d" % (
                    job.name, ", ".join(map(step_name, extra)), KEEP))

    def finish(self, out, job):
        if job.finish(self.job_timeout()) is None:
            out.fail("%s did not end within %.0f s (killed): %s" % (job.name, self.job_timeout(), job.tail()))
        out.restarts += job.restarts()
        return job.rc

    def kill_a_rank(self, out, job, sig, what):
        """Sends `sig` to a random rank of the job; the rank, or None when the job had ended."""
        ranks = job.wait_for_ranks()
        if not ranks:
            out.note("the job ended before the fault")
            return None
        rank = self.rng.choice(sorted(ranks))
        try:
            os.kill(ranks[rank], sig)
        except OSError:
            out.note("the job ended before the fault")
            return None
        out.note("%s to rank %d at %.1f s" % (what, rank, job.elapsed()))
        return rank

    # -- the scenarios --

    def kill_rank(self, out, folder, ck):
        job = Job(self, folder, "job", ck)
        if self.reach_fault(job, ck):
            before = newest_complete(ck)
            self.kill_a_rank(out, job, signal.SIGKILL, "SIGKILL")
        else:
            before = None
            out.note("the job ended before the fault")
        self.finish(out, job)
        self.check_job(out, job, ck, newest_before=before)
        self.check_end(out, job, ck)

    def stop_rank(self, out, folder, ck):
        job = Job(self, folder, "job", ck)
        before = None
        if self.reach_fault(job, ck):
            before = newest_complete(ck)
            self.kill_a_rank(out, job, signal.SIGSTOP, "SIGSTOP (held)")
        else:
            out.note("the job ended before the fault")
        self.finish(out, job)
        self.check_job(out, job, ck, newest_before=before)
        self.check_end(out, job, ck)

    def signal_launch(self, out, folder, ck, sig):
        """Sends `sig` to launch mid-run, checks what it leaves, then starts the job again."""
        first = Job(self, folder, "first", ck)
        before = None
        if self.reach_fault(first, ck):
            before = newest_complete(ck)
            first.proc.send_signal(sig)
            out.note("%s to launch at %.1f s" % (signal.Signals(sig).name, first.elapsed()))
            try:
                first.proc.wait(timeout=GRACE_S + 30)
            except subprocess.TimeoutExpired:
                out.fail("first: launch still running %d s after %s" % (GRACE_S + 30, signal.Signals(sig).name))
        else:
            out.note("the job ended before the fault")
        self.finish(out, first)
        if first.restarts() and sig != signal.SIGKILL:
            out.fail("first: launch restarted the ranks after %s (a signal to launch must end it)" %
                     signal.Signals(sig).name)
        self.check_job(out, first, ck, newest_before=before)
        again = Job(self, folder, "again", ck)
        self.finish(out, again)
        self.check_job(out, again, ck)
        self.check_end(out, again, ck)

    def kill_launch(self, out, folder, ck):
        self.signal_launch(out, folder, ck, signal.SIGKILL)

    def term_launch(self, out, folder, ck):
        self.signal_launch(out, folder, ck, self.rng.choice([signal.SIGTERM, signal.SIGINT, signal.SIGHUP]))

    def disk_full(self, out, folder, ck):
        job = Job(self, folder, "job", ck, ignore_sigxfsz=True)
        before = None
        if self.reach_fault(job, ck):
            before = newest_complete(ck)
            pid = job.wait_for_ranks().get(0)
            try:
                _, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
                resource.prlimit(pid, resource.RLIMIT_FSIZE, (FILE_LIMIT_BYTES, hard))
                out.note("rank 0's files limited to %d bytes at %.1f s" % (FILE_LIMIT_BYTES, job.elapsed()))
            except (OSError, TypeError):  # TypeError: no rank 0 (pid None), the job has ended
                out.note("the job ended before the fault")
        else:
            out.note("the job ended before the fault")
        self.finish(out, job)
        if "File too large" in job.text():
            out.note("the failed write reported")
        self.check_job(out, job, ck, newest_before=before)
        self.check_end(out, job, ck)

    def second_run(self, out, folder, ck):
        first = Job(self, folder, "first", ck)
        # Once the first run has a checkpoint, so that the second has something to take over.
        if self.reach_fault(first, ck, first_step=EVERY):
            second = Job(self, folder, "second", ck)
            out.note("second run started at %.1f s" % first.elapsed())
            self.finish(out, second)
            if second.rc != 2:
                done = second.result_json()
                what = second.tail()
                if second.rc == 0 and done:
                    what = "it trained alongside the first run to step %s (resumed from step %s)" % (
                        done.get("steps"), done.get("resumed_from_step", "none"))
                out.fail("second: the second run on the same --checkpoint_dir %s (expected 2, refused): %s" % (
                    exit_text(second.rc), what))
            self.check_job(out, second, ck, others_write=True)
        else:
            out.note("the first run ended before the second started")
        self.finish(out, first)
        self.check_job(out, first, ck)
        self.check_end(out, first, ck)

    def damaged_newest(self, out, folder, ck):
        first = Job(self, folder, "first", ck, max_restarts=0)
        before = None
        # Once there are two checkpoints, so that an older one is there to fall back on.
        if self.reach_fault(first, ck, first_step=2 * EVERY):
            before = newest_complete(ck)
            self.kill_a_rank(out, first, signal.SIGKILL, "SIGKILL")
        else:
            out.note("the job ended before the kill")
        self.finish(out, first)
        self.check_job(out, first, ck, newest_before=before)
        newest = newest_complete(ck)
        if newest is None:
            out.fail("first: no complete checkpoint to damage")
            return
        path = os.path.join(ck, step_name(newest), self.rng.choice([MODEL_FILE, STATE_FILE]))
        with open(path, "r+b") as f:
            header = 8 + struct.unpack("<Q", f.read(8))[0]
            size = os.fstat(f.fileno()).st_size
            # The header (what no reader takes for sound) or the tensor data (only the
            # checkpoint's checksum tells), one bit or a whole byte changed.
            at = self.rng.randrange(header) if self.rng.random() < 0.5 else self.rng.randrange(header, size)
            f.seek(at)
            old = f.read(1)[0]
            new = old ^ (1 << self.rng.randrange(8) if self.rng.random() < 0.5 else self.rng.randrange(1, 256))
            f.seek(at)
            f.write(bytes([new]))
        out.note("byte %d of %s/%s (%s) changed from 0x%02x to 0x%02x" % (
            at, step_name(newest), os.path.basename(path), "header" if at < header else "data", old, new))
        again = Job(self, folder, "again", ck)
        self.finish(out, again)
        resumed = again.result_json().get("resumed_from_step")
        if resumed is not None and resumed >= newest:
            out.fail("again: resumed from step %d, not from a checkpoint older than the damaged %s" % (
                resumed, step_name(newest)))
        # What becomes of the folder the soak damaged is the program's choice (kept aside,
        # removed, or written again when the run passes that step); only a rewritten one counts.
        damaged = (step_name(newest),) if checkpoint_problem(os.path.join(ck, step_name(newest))) else ()
        self.check_job(out, again, ck, damaged)
        self.check_end(out, again, ck, damaged)

    def stranger(self, out, folder, ck):
        os.makedirs(ck)
        # Strangers newer than any checkpoint of the run, there before it starts, test resuming;
        # older ones planted once the run has a checkpoint test pruning.
        newer = self.rng.random() < 0.5
        names = [step_name(999999999999), step_name(1)] if newer else [step_name(1), step_name(2)]
        junk, foreign = self.rng.sample(names, 2)
        strangers = (junk, foreign)
        job = None
        if not newer:
            job = Job(self, folder, "job", ck)
            while job.running() and newest_complete(ck) is None:
                time.sleep(0.05)
        os.makedirs(os.path.join(ck, junk))
        with open(os.path.join(ck, junk, "notes.txt"), "w") as f:
            f.write("not a kiln checkpoint: someone else's folder\n")
        shutil.copytree(self.foreign, os.path.join(ck, foreign))
        digests = {name: tree_digest(os.path.join(ck, name)) for name in strangers}
        out.note("a foreign folder as %s, a --seed=%d checkpoint as %s, %s" % (
            junk, FOREIGN_SEED, foreign, "planted before the start" if newer else "planted at %.1f s" % job.elapsed()))
        job = job or Job(self, folder, "job", ck)
        before = None
        if self.reach_fault(job, ck, strangers):
            before = newest_complete(ck, strangers)
            self.kill_a_rank(out, job, signal.SIGKILL, "SIGKILL")
        self.finish(out, job)
        for name in strangers:
            digest = tree_digest(os.path.join(ck, name))
            if digest is None:
                out.fail("job: the planted %s was deleted" % name)
            elif digest != digests[name]:
                out.fail("job: the planted %s was changed" % name)
        self.check_job(out, job, ck, strangers, newest_before=before)
        self.check_end(out, job, ck, strangers)

    SCENARIOS = ("kill_rank", "stop_rank", "kill_launch", "term_launch", "disk_full", "second_run",
                 "damaged_newest", "stranger")

    # -- running --

    def prepare(self):
        """The reference run and the foreign checkpoint; an error message, or None."""
        folder = os.path.join(self.folder, "reference")
        os.makedirs(folder)
        ck = os.path.join(folder, "ck")
        out = Outcome("reference")
        job = Job(self, folder, "job", ck)
        self.finish(out, job)
        self.reference_seconds = job.elapsed()
        self.check_job(out, job, ck)
        final = os.path.join(ck, step_name(STEPS), MODEL_FILE)
        if job.rc != 0 or not os.path.isfile(final):
            return "the uninterrupted job %s: %s" % (exit_text(job.rc), job.tail())
        with open(final, "rb") as f:
            self.reference = f.read()
        self.check_end(out, job, ck)
        if out.failures:
            return "; ".join(out.failures)
        print("reference: %.1f s (final model %d bytes)" % (self.reference_seconds, len(self.reference)), flush=True)
        folder = os.path.join(self.folder, "foreign")
        os.makedirs(folder)
        ck = os.path.join(folder, "ck")
        # The same job but for --seed, one process, stopped after its first checkpoint.
        job = Job(self, folder, "job", ck, seed=FOREIGN_SEED, direct=True)
        self.foreign = os.path.join(ck, step_name(EVERY))
        while job.running() and checkpoint_problem(self.foreign):
            time.sleep(0.05)
        job.proc.kill()
        job.finish(self.job_timeout())
        if checkpoint_problem(self.foreign):
            return "the foreign run (--seed=%d) %s without a checkpoint: %s" % (
                FOREIGN_SEED, exit_text(job.rc), job.tail())
        return None

    def run_one(self, name, index):
        folder = os.path.join(self.folder, "%03d-%s" % (index, name))
        os.makedirs(folder)
        out = Outcome(name)
        began = time.monotonic()
        try:
            getattr(self, name)(out, folder, os.path.join(folder, "ck"))
        except Exception as e:  # a defect of the soak itself: reported as one, never hidden
            out.fail("the soak itself failed: %r" % e)
        finally:
            left = tagged(self.mine)
            if left:
                out.fail("process(es) of this scenario still running at its end: %s" %
                         ", ".join(describe(p, e) for p, e in sorted(left.items())))
                kill_all(left)
        seconds = time.monotonic() - began
        notes = "; ".join(out.notes)
        if out.failures:
            print("%s: FAILED: %s (%s%s%.1f s)" % (name, "; ".join(out.failures), notes, "; " if notes else "",
                                                   seconds), flush=True)
        else:
            print("%s: survived (%s%srestarts %d, %.1f s)" % (name, notes, "; " if notes else "", out.restarts,
                                                              seconds), flush=True)
            shutil.rmtree(folder, ignore_errors=True)
        return out, seconds, folder

    def run(self):
        began = time.monotonic()
        deadline = began + self.minutes * 60
        results, failures, lasted = [], [], {}
        problem = self.prepare()
        if problem:
            print("reference: FAILED: " + problem, flush=True)
            failures.append({"scenario": "reference", "why": problem, "folder": self.folder})
        else:
            rounds = 0
            while True:
                order = list(self.scenarios)
                self.rng.shuffle(order)
                stop = False
                for name in order:
                    # After the first round, start only what the budget still has room for.
                    if rounds > 0 and time.monotonic() + lasted.get(name, 0) > deadline:
                        stop = True
                        break
                    out, seconds, folder = self.run_one(name, len(results) + 1)
                    lasted[name] = seconds
                    results.append(out)
                    if out.failures:
                        failures.append({"scenario": name, "why": "; ".join(out.failures), "folder": folder})
                rounds += 1
                if stop or time.monotonic() >= deadline:
                    break
        lost = len([r for r in results if r.failures])
        print("%d scenarios, %d survived, %d lost" % (len(results), len(results) - lost, lost), flush=True)
        per = {}
        for r in results:
            entry = per.setdefault(r.name, {"runs": 0, "survived": 0, "restarts": 0})
            entry["runs"] += 1
            entry["survived"] += 0 if r.failures else 1
            entry["restarts"] += r.restarts
        ok = not failures
        if ok:
            shutil.rmtree(self.folder, ignore_errors=True)
        else:
            print("kept for inspection: " + self.folder, flush=True)
        print(json.dumps({"seed": self.seed, "minutes": self.minutes, "scenarios": len(results),
                          "survived": len(results) - lost, "lost": lost,
                          "seconds": round(time.monotonic() - began, 1),
                          "reference_seconds": round(self.reference_seconds or 0, 1), "per_scenario": per,
                          "failures": failures}, separators=(",", ":")), flush=True)
        return 0 if ok else 1


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])  # exits 2 on a bad flag
    parser.add_argument("--gpt", required=True, help="the built //examples:gpt")
    parser.add_argument("--launch", required=True, help="the built //tools:launch")
    parser.add_argument("--seed", required=True, type=int, help="chooses the order, the moments and the victims")
    parser.add_argument("--minutes", required=True, type=float, help="the time budget (every scenario runs once)")
    parser.add_argument("--workdir", required=True, help="a folder for the jobs (a soak-* folder is made in it)")
    parser.add_argument("--scenarios", default=",".join(Soak.SCENARIOS), help="a comma-separated subset")
    args = parser.parse_args(argv)
    for flag in ("gpt", "launch"):
        path = getattr(args, flag)
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            parser.error("--%s=%s: not an executable file (build it: ./bazelw build //examples:gpt //tools:launch)" %
                         (flag, path))
    if not 0 < args.minutes <= 7 * 24 * 60:
        parser.error("--minutes=%g: expected a number of minutes in (0, 10080]" % args.minutes)
    names = args.scenarios.split(",")
    unknown = [n for n in names if n not in Soak.SCENARIOS]
    if unknown or not args.scenarios:
        parser.error("--scenarios=%s: unknown %s (known: %s)" % (args.scenarios, ", ".join(unknown) or "''",
                                                                 ", ".join(Soak.SCENARIOS)))
    args.scenarios = list(dict.fromkeys(names))
    try:
        os.makedirs(args.workdir, exist_ok=True)
        if not os.access(args.workdir, os.W_OK | os.X_OK):
            raise PermissionError("not writable")
    except OSError as e:
        parser.error("--workdir=%s: %s" % (args.workdir, e.strerror or e))
    return args


def main(argv):
    args = parse_args(argv)
    soak = Soak(args)

    def stop(sig, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, stop)
    try:
        return soak.run()
    except KeyboardInterrupt:
        print("chaos_soak: interrupted; the jobs are stopped, their folders kept in " + soak.folder, flush=True)
        return 1
    finally:
        soak.sweep()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
