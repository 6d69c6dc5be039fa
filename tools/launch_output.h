// A rank's stdout or stderr as tools/launch forwards it: bytes from the rank's pipe in, whole
// lines prefixed with "[rank N] " out.
#ifndef KILN_TOOLS_LAUNCH_OUTPUT_H_
#define KILN_TOOLS_LAUNCH_OUTPUT_H_

#include <string>

namespace kiln::launch {

struct Stream {
  int fd = -1;  // the pipe's read end (non-blocking); -1 once closed
  int out = 1;  // where its lines go: 1 or 2
  std::string pending;
};

// Writes all of `s` to `fd`; a reader gone away is reported once per fd, and the output is lost.
void WriteAll(int fd, const std::string& s);

// Reads what the pipe holds and prints the whole lines; closes the stream at its end.
void ReadStream(int rank, Stream& s);

// Reads what the pipe holds now, prints the rest (a last line without a newline too), closes it.
void CloseStream(int rank, Stream& s);

}  // namespace kiln::launch

#endif  // KILN_TOOLS_LAUNCH_OUTPUT_H_
