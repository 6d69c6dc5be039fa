// The texts of a merge of flight recorder dumps (ops, tags, dtypes, shapes, errors), each kept
// once however many calls carry it: a call holds 4-byte ids, and equal texts have equal ids.
// A text is stored as a 2-byte length and its bytes in chunks of up to 1 MiB (a full chunk is
// never moved, so growth copies little), and its id is its place there; the index is a hash
// set of ids, 4 bytes a slot, looked up by text.
#ifndef KILN_TOOLS_FLIGHT_STRINGS_H_
#define KILN_TOOLS_FLIGHT_STRINGS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln::tools {

class FlightStrings {
 public:
  // The longest text kept (flight_dump.h's texts and shapes are shorter).
  static constexpr size_t kMaxText = 65535;

  FlightStrings();
  FlightStrings(const FlightStrings&) = delete;
  FlightStrings& operator=(const FlightStrings&) = delete;

  // The id of `s`, kept if it is new. InvalidArgument past kMaxText; ResourceExhausted once
  // 4 GiB of texts are kept (ids are 32 bits).
  absl::StatusOr<uint32_t> Intern(absl::string_view s);
  // Valid until the next Intern (the last chunk may move as it grows).
  absl::string_view Get(uint32_t id) const;

 private:
  static constexpr size_t kChunk = size_t{1} << 20;

  struct Hash {
    using is_transparent = void;
    const FlightStrings* strings;
    size_t operator()(uint32_t id) const { return (*this)(strings->Get(id)); }
    size_t operator()(absl::string_view s) const;
  };
  struct Eq {
    using is_transparent = void;
    const FlightStrings* strings;
    bool operator()(uint32_t a, uint32_t b) const { return a == b; }
    bool operator()(uint32_t a, absl::string_view b) const { return strings->Get(a) == b; }
    bool operator()(absl::string_view a, uint32_t b) const { return a == strings->Get(b); }
  };

  std::vector<std::unique_ptr<char[]>> chunks_;
  size_t used_ = 0, capacity_ = 0;  // of the last chunk
  absl::flat_hash_set<uint32_t, Hash, Eq> ids_;
};

}  // namespace kiln::tools

#endif  // KILN_TOOLS_FLIGHT_STRINGS_H_
