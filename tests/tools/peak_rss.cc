// Runs a program and writes its exit code and peak resident memory to a file, as one JSON line:
//   peak_rss RESULT_FILE PROGRAM [ARG...]
// A child's peak (ru_maxrss) counts what it inherited at fork, so the parent that forks it must
// be small: a test's Python process (tens of MiB) would hide a program's own few MiB; this one
// is about 1 MiB. Exit 0 when the program ran (whatever its exit code), 2 on bad arguments, 1
// when it could not be run.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: peak_rss RESULT_FILE PROGRAM [ARG...]\n");
    return 2;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("peak_rss: fork");
    return 1;
  }
  if (pid == 0) {
    execv(argv[2], argv + 2);
    std::perror("peak_rss: exec");
    _exit(127);
  }
  int status = 0;
  struct rusage usage = {};
  if (wait4(pid, &status, 0, &usage) != pid) {
    std::perror("peak_rss: wait4");
    return 1;
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  FILE* out = std::fopen(argv[1], "w");
  if (out == nullptr || std::fprintf(out, "{\"exit\":%d,\"maxrss_kib\":%ld}\n", code, usage.ru_maxrss) < 0 ||
      std::fclose(out) != 0) {
    std::perror("peak_rss: writing the result");
    return 1;
  }
  return 0;
}
