#include "tools/launch_output.h"

#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "tools/launch_messages.h"

namespace kiln::launch {
namespace {

// Prints the whole lines of `s.pending` (all of it when `flush`), each with the rank's prefix.
void Emit(int rank, Stream& s, bool flush) {
  const std::string prefix = absl::StrCat("[rank ", rank, "] ");
  size_t start = 0, nl;
  std::string out;
  while ((nl = s.pending.find('\n', start)) != std::string::npos) {
    out += prefix + s.pending.substr(start, nl - start + 1);
    start = nl + 1;
  }
  s.pending.erase(0, start);
  if (flush && !s.pending.empty()) {
    out += prefix + s.pending + "\n";
    s.pending.clear();
  }
  if (!out.empty()) WriteAll(s.out, out);
}

}  // namespace

void WriteAll(int fd, const std::string& s) {
  static bool reported[3] = {};
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // The reader of launch's output went away: the ranks keep running, their output is lost.
      if (fd >= 0 && fd < 3 && !reported[fd]) {
        reported[fd] = true;
        Failed(absl::StrCat("write to ", fd == 1 ? "stdout" : "stderr"));
      }
      return;
    }
    done += n;
  }
}

void ReadStream(int rank, Stream& s) {
  if (s.fd < 0) return;
  char buf[65536];
  const ssize_t n = read(s.fd, buf, sizeof(buf));
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n < 0) Failed(absl::StrCat("read of rank ", rank, "'s ", s.out == 1 ? "stdout" : "stderr"));
  if (n <= 0) {
    CloseStream(rank, s);
    return;
  }
  s.pending.append(buf, n);
  Emit(rank, s, false);
}

void CloseStream(int rank, Stream& s) {
  if (s.fd < 0) return;
  // Bounded: the read end does not block, but a writer that never stops must not keep launch here.
  char buf[65536];
  ssize_t n;
  for (int i = 0; i < 64 && (n = read(s.fd, buf, sizeof(buf))) > 0; ++i) s.pending.append(buf, n);
  Emit(rank, s, true);
  close(s.fd);
  s.fd = -1;
}

}  // namespace kiln::launch
