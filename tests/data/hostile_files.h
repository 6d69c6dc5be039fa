// Test support for readers of outside bytes: a budget on what a call may allocate (to show a
// header's claim is checked before memory is spent on it) and a FIFO reader that cannot hang
// the test (to show a reader refuses a FIFO instead of waiting for a writer).
#ifndef KILN_TESTS_DATA_HOSTILE_FILES_H_
#define KILN_TESTS_DATA_HOSTILE_FILES_H_

#include <cstddef>
#include <functional>
#include <string>

namespace kiln::testing {

// While alive, operator new throws std::bad_alloc for any allocation that would take the
// bytes handed out (in all threads) since construction past `bytes`. Not nestable.
class AllocationBudget {
 public:
  explicit AllocationBudget(size_t bytes);
  ~AllocationBudget();
  AllocationBudget(const AllocationBudget&) = delete;
  AllocationBudget& operator=(const AllocationBudget&) = delete;
  size_t spent() const;  // bytes handed out so far
};

// Makes a FIFO at `path`, runs `read(path)` on a thread and waits up to `seconds` for it. If
// it has not returned by then, opens the FIFO for writing and closes it so the reader sees
// end of file and the test can go on. True if `read` returned within the time by itself.
bool ReturnsWithoutAWriter(const std::string& path, const std::function<void(const std::string&)>& read,
                           double seconds = 10);

}  // namespace kiln::testing

#endif  // KILN_TESTS_DATA_HOSTILE_FILES_H_
