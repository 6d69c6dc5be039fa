#include "tools/launch_backoff.h"

#include <algorithm>

namespace kiln::launch {

double RestartDelay(double first, int restart) {
  double delay = first;
  // Doubling stops at the cap, so a millionth restart neither loops long nor overflows.
  for (int i = 1; i < restart && delay < kMaxRestartBackoffSeconds; ++i) delay *= 2;
  return std::max(first, std::min(delay, kMaxRestartBackoffSeconds));
}

}  // namespace kiln::launch
