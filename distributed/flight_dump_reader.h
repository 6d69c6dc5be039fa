// Reads a flight recorder dump (flight_dump.h) as its bytes stream in, so that a dump of any
// size is read in memory bounded by its longest token: each entry is checked and handed on as
// it ends, and nothing of it is kept here. The keys may come in any order (a head after the
// entries is checked at the end); a key twice in one object is refused.
#ifndef KILN_DISTRIBUTED_FLIGHT_DUMP_READER_H_
#define KILN_DISTRIBUTED_FLIGHT_DUMP_READER_H_

#include <cstddef>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "distributed/flight_dump.h"

namespace kiln::distributed {

// The longest token (a string with its quotes and escapes, a number) a reader takes: a text of
// kMaxFlightText bytes written with \u escapes throughout. Anything longer is refused as it
// streams in, before the JSON lexer has buffered it.
inline constexpr size_t kMaxFlightToken = 6 * kMaxFlightText + 2;
// Containers nested deeper than this (only unknown keys hold any) are refused.
inline constexpr int kMaxFlightNesting = 64;

// Fills `buf` with up to `size` bytes of the dump and says how many; 0 at its end.
using FlightDumpSource = absl::FunctionRef<absl::StatusOr<size_t>(char* buf, size_t size)>;
// Takes one entry, checked on its own (its member against the head's `members` once that is
// known); valid only during the call. A status other than OK stops the reading with it.
using FlightEntrySink = absl::FunctionRef<absl::Status(const FlightDumpEntry& entry)>;

// The dump's head (its `entries` left empty), once every entry has gone to `on_entry`.
// InvalidArgument naming the first thing that is not a dump within flight_dump.h's bounds (the
// head's checks come at its end, so entries before a bad head may have gone to `on_entry`);
// the source's or the sink's own error as it is.
absl::StatusOr<FlightDump> ReadFlightDump(FlightDumpSource read, FlightEntrySink on_entry);

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_FLIGHT_DUMP_READER_H_
