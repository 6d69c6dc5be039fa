#include "distributed/flight_dump_reader.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace kiln::distributed {
namespace {

using Json = nlohmann::json;

constexpr const char* kStates[] = {"entered", "started", "completed", "failed"};
constexpr int64_t kMaxTime = std::numeric_limits<int64_t>::max();

absl::Status Bad(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

// The dump's bytes, buffered, with a watch on token lengths: the JSON lexer buffers a whole
// string or number before the handler sees it, so one over the bound must be stopped here.
class GuardedBytes {
 public:
  explicit GuardedBytes(FlightDumpSource read) : read_(read) {}

  // Whether the bytes have ended (or were stopped); fills the buffer when it is used up.
  bool AtEnd() {
    if (pos_ < len_ || stopped_) return pos_ >= len_;
    absl::StatusOr<size_t> n = read_(buf_, sizeof(buf_));
    if (!n.ok()) return Stop(n.status());
    pos_ = 0;
    len_ = std::min(*n, sizeof(buf_));
    if (len_ == 0) stopped_ = true;
    return len_ == 0;
  }
  char Peek() const { return buf_[pos_]; }
  void Advance() {
    Watch(buf_[pos_++]);
    ++offset_;
  }
  const absl::Status& status() const { return status_; }

 private:
  bool Stop(absl::Status s) {
    status_ = std::move(s);
    stopped_ = true;
    pos_ = len_ = 0;
    return true;
  }
  // A string from its opening quote to its closing one; any other run of bytes between
  // whitespace and punctuation (a number, a literal).
  void Watch(char c) {
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
      ++run_;
    } else if (c == '"') {
      in_string_ = true;
      run_ = 1;
    } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '{' || c == '}' || c == '[' || c == ']' ||
               c == ',' || c == ':') {
      run_ = 0;
    } else {
      ++run_;
    }
    if (run_ > kMaxFlightToken) {
      Stop(absl::InvalidArgumentError(absl::StrCat("byte ", offset_, ": a token longer than ", kMaxFlightToken,
                                                   " bytes (a dump's texts are at most ", kMaxFlightText, " bytes)")));
    }
  }

  FlightDumpSource read_;
  char buf_[1 << 16];
  size_t pos_ = 0, len_ = 0;
  uint64_t offset_ = 0;
  bool stopped_ = false;
  absl::Status status_;
  bool in_string_ = false, escaped_ = false;
  size_t run_ = 0;
};

// What nlohmann's lexer reads through: single pass, every copy sharing the one buffer.
class ByteIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = char;

  explicit ByteIterator(GuardedBytes* bytes) : bytes_(bytes) {}
  char operator*() const { return bytes_->Peek(); }
  ByteIterator& operator++() {
    bytes_->Advance();
    return *this;
  }
  bool operator==(const ByteIterator& other) const { return AtEnd() == other.AtEnd(); }
  bool operator!=(const ByteIterator& other) const { return !(*this == other); }

 private:
  bool AtEnd() const { return bytes_ == nullptr || bytes_->AtEnd(); }
  GuardedBytes* bytes_;
};

// One JSON value as the handler sees it: a scalar, or the start of a container.
struct Value {
  enum Kind { kInteger, kString, kObject, kArray, kOther } kind = kOther;
  int64_t integer = 0;
  bool too_big = false;  // an unsigned integer past int64
  std::string* text = nullptr;
};

// The keys of the head and of an entry; the order is that of the checks at their ends.
enum HeadKey { kFormat, kWorldSize, kRank, kMembers, kGroup, kCapacity, kDumpedUs, kReason, kDiagnosis, kEntries };
constexpr const char* kHeadKeys[] = {"format",   "world_size", "rank",   "members",   "group",
                                     "capacity", "dumped_us",  "reason", "diagnosis", "entries"};
enum EntryKey { kMember, kSeq, kOp, kTag, kDtype, kState, kError, kEnqueuedUs, kStartedUs, kEndedUs, kShape };
constexpr const char* kEntryKeys[] = {"member", "seq",         "op",         "tag",      "dtype", "state",
                                      "error",  "enqueued_us", "started_us", "ended_us", "shape"};

template <size_t N>
int Find(const char* const (&keys)[N], const std::string& key) {
  const auto it = std::find_if(std::begin(keys), std::end(keys), [&](const char* k) { return key == k; });
  return it == std::end(keys) ? -1 : static_cast<int>(it - std::begin(keys));
}

// nlohmann's SAX interface: follows where in the dump each event lands.
class Handler {
 public:
  explicit Handler(FlightEntrySink on_entry) : on_entry_(on_entry) {}

  bool null() { return OnValue({}); }
  bool boolean(bool) { return OnValue({}); }
  bool number_integer(int64_t v) { return OnValue({.kind = Value::kInteger, .integer = v}); }
  bool number_unsigned(uint64_t v) {
    const bool big = v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    return OnValue({.kind = Value::kInteger, .integer = big ? 0 : static_cast<int64_t>(v), .too_big = big});
  }
  bool number_float(double, const std::string&) { return OnValue({}); }
  bool string(std::string& s) { return OnValue({.kind = Value::kString, .text = &s}); }
  bool binary(Json::binary_t&) { return OnValue({}); }
  bool start_object(size_t) { return OnValue({.kind = Value::kObject}); }
  bool start_array(size_t) { return OnValue({.kind = Value::kArray}); }
  bool key(std::string& k);
  bool end_object();
  bool end_array();
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception&) { return false; }

  const absl::Status& status() const { return status_; }
  bool done() const { return at_ == kAfter; }
  FlightDump& head() { return d_; }

 private:
  enum At { kBefore, kTop, kEntryList, kEntry, kShapeList, kAfter };

  bool OnValue(const Value& v);
  bool HeadValue(const Value& v);
  bool EntryValue(const Value& v);
  bool ShapeValue(const Value& v);
  bool FinishEntry();
  bool FinishHead();
  bool Fail(absl::Status s) {
    status_ = std::move(s);
    return false;
  }
  std::string EntryWhere() const { return absl::StrCat("entry ", entries_); }
  // Where the value being read is, for a message (built only when one is needed).
  std::string Where() const { return at_ == kTop ? "the dump" : EntryWhere(); }
  // A value that is an integer in [lo, hi] (the checks that need no other key).
  absl::Status IntegerIn(const Value& v, const char* key, int64_t lo, int64_t hi) const;
  absl::Status TextOf(const Value& v, const char* key, std::string* out) const;
  // The head's `members` and `capacity`, once they are there and valid.
  std::optional<int> Members() const;
  std::optional<int64_t> MaxEntries() const;
  absl::Status TooMany() const {
    return Bad("the dump", absl::StrCat("holds more than ", *MaxEntries(), " entries (", *Members(), " member(s) of ",
                                        head_int_[kCapacity], " calls)"));
  }

  FlightEntrySink on_entry_;
  absl::Status status_;
  At at_ = kBefore;
  int skip_ = 0;  // depth inside a value of an unknown key
  int key_ = -1;  // the key whose value comes next, -1 for an unknown one
  FlightDump d_;
  bool head_seen_[std::size(kHeadKeys)] = {};
  int64_t head_int_[std::size(kHeadKeys)] = {};
  FlightDumpEntry e_;  // the entry being read, its buffers reused
  bool entry_seen_[std::size(kEntryKeys)] = {};
  size_t entries_ = 0;  // entries ended so far
  // Entries' members while `members` was not yet known: the largest, and the first entry with it.
  int max_member_ = -1;
  size_t max_member_entry_ = 0;
};

absl::Status Handler::IntegerIn(const Value& v, const char* key, int64_t lo, int64_t hi) const {
  if (v.kind == Value::kInteger && !v.too_big && v.integer >= lo && v.integer <= hi) return absl::OkStatus();
  const std::string where = Where();
  if (v.kind != Value::kInteger) return Bad(where, absl::StrCat("'", key, "' is not an integer"));
  // Unsigned values past int64 are out of range by any bound here.
  if (v.too_big) return Bad(where, absl::StrCat("'", key, "' is out of range"));
  if (v.integer < lo || v.integer > hi) {
    return Bad(where, absl::StrCat("'", key, "' is ", v.integer, ", outside [", lo, ", ", hi, "]"));
  }
  return absl::OkStatus();
}

absl::Status Handler::TextOf(const Value& v, const char* key, std::string* out) const {
  if (v.kind == Value::kString && v.text->size() <= kMaxFlightText) {
    out->assign(*v.text);
    return absl::OkStatus();
  }
  const std::string where = Where();
  if (v.kind != Value::kString) return Bad(where, absl::StrCat("'", key, "' is not a string"));
  if (v.text->size() > kMaxFlightText) {
    return Bad(where, absl::StrCat("'", key, "' is longer than ", kMaxFlightText, " bytes"));
  }
  out->assign(*v.text);
  return absl::OkStatus();
}

std::optional<int> Handler::Members() const {
  const int64_t m = head_int_[kMembers];
  if (!head_seen_[kMembers] || m < 1 || m > kMaxFlightMembers) return std::nullopt;
  return static_cast<int>(m);
}

std::optional<int64_t> Handler::MaxEntries() const {
  const int64_t c = head_int_[kCapacity];
  if (!Members() || !head_seen_[kCapacity] || c < 0 || c > kMaxFlightCapacity) return std::nullopt;
  return c * *Members();
}

bool Handler::OnValue(const Value& v) {
  const bool container = v.kind == Value::kObject || v.kind == Value::kArray;
  if (skip_ > 0) {
    if (container && ++skip_ > kMaxFlightNesting) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("nested deeper than ", kMaxFlightNesting, " levels")));
    }
    return true;
  }
  switch (at_) {
    case kBefore:
      if (v.kind != Value::kObject) return Fail(absl::InvalidArgumentError("not a JSON object"));
      at_ = kTop;
      return true;
    case kTop: return HeadValue(v);
    case kEntryList:
      if (v.kind != Value::kObject) return Fail(Bad(EntryWhere(), "is not an object"));
      std::fill(std::begin(entry_seen_), std::end(entry_seen_), false);
      e_.shape.clear();
      at_ = kEntry;
      return true;
    case kEntry: return EntryValue(v);
    case kShapeList: return ShapeValue(v);
    case kAfter: return Fail(absl::InvalidArgumentError("not JSON"));  // the strict parser stops before
  }
  return true;
}

bool Handler::key(std::string& k) {
  if (skip_ > 0) return true;
  bool* seen = at_ == kTop ? head_seen_ : entry_seen_;
  key_ = at_ == kTop ? Find(kHeadKeys, k) : Find(kEntryKeys, k);
  if (key_ >= 0) {
    if (seen[key_]) return Fail(Bad(Where(), absl::StrCat("'", k, "' appears twice")));
    seen[key_] = true;
  }
  return true;
}

bool Handler::HeadValue(const Value& v) {
  const char* where = "the dump";
  absl::Status s;
  switch (key_) {
    case -1:
      if (v.kind == Value::kObject || v.kind == Value::kArray) skip_ = 1;
      return true;
    case kFormat: {
      std::string format;
      s = TextOf(v, kHeadKeys[kFormat], &format);
      if (s.ok() && format != kFlightDumpFormat) {
        s = Bad(where, absl::StrCat("'format' is '", format, "', not '", kFlightDumpFormat, "'"));
      }
      break;
    }
    case kReason: s = TextOf(v, kHeadKeys[kReason], &d_.reason); break;
    case kDiagnosis: s = TextOf(v, kHeadKeys[kDiagnosis], &d_.diagnosis); break;
    case kEntries:
      if (v.kind != Value::kArray) return Fail(Bad(where, "'entries' is not an array"));
      at_ = kEntryList;
      return true;
    default:
      // Ranges that depend on other keys (rank < world_size) are checked at the end.
      s = IntegerIn(v, kHeadKeys[key_], std::numeric_limits<int64_t>::min(), kMaxTime);
      head_int_[key_] = v.integer;
  }
  return s.ok() || Fail(std::move(s));
}

bool Handler::EntryValue(const Value& v) {
  absl::Status s;
  int64_t* const times[] = {&e_.enqueued_us, &e_.started_us, &e_.ended_us};
  switch (key_) {
    case -1:
      if (v.kind == Value::kObject || v.kind == Value::kArray) skip_ = 1;
      return true;
    case kMember:
      s = IntegerIn(v, "member", 0, Members().value_or(kMaxFlightMembers) - 1);
      e_.member = static_cast<int>(v.integer);
      break;
    // Sequence numbers stay exact in any JSON reader (2^53).
    case kSeq:
      s = IntegerIn(v, "seq", 0, int64_t{1} << 53);
      e_.seq = static_cast<uint64_t>(v.integer);
      break;
    case kOp: s = TextOf(v, "op", &e_.op); break;
    case kTag: s = TextOf(v, "tag", &e_.tag); break;
    case kDtype: s = TextOf(v, "dtype", &e_.dtype); break;
    case kError: s = TextOf(v, "error", &e_.error); break;
    case kState:
      s = TextOf(v, "state", &e_.state);
      if (s.ok() && std::find(std::begin(kStates), std::end(kStates), e_.state) == std::end(kStates)) {
        s = Bad(EntryWhere(), absl::StrCat("'state' is '", e_.state, "', not one of ", absl::StrJoin(kStates, ", ")));
      }
      break;
    case kEnqueuedUs:
    case kStartedUs:
    case kEndedUs:
      s = IntegerIn(v, kEntryKeys[key_], 0, kMaxTime);
      *times[key_ - kEnqueuedUs] = v.integer;
      break;
    case kShape:
      if (v.kind != Value::kArray) return Fail(Bad(EntryWhere(), "'shape' is not an array"));
      at_ = kShapeList;
      return true;
  }
  return s.ok() || Fail(std::move(s));
}

bool Handler::ShapeValue(const Value& v) {
  if (v.kind != Value::kInteger || v.too_big || v.integer < 0 || v.integer > (int64_t{1} << 62)) {
    return Fail(Bad(EntryWhere(), "'shape' holds something other than a size"));
  }
  if (e_.shape.size() == kMaxFlightRank) {
    return Fail(Bad(EntryWhere(), absl::StrCat("'shape' has more than ", kMaxFlightRank, " dims")));
  }
  e_.shape.push_back(v.integer);
  return true;
}

bool Handler::end_array() {
  if (skip_ > 0) {
    --skip_;
  } else if (at_ == kShapeList) {
    at_ = kEntry;
  } else if (at_ == kEntryList) {
    at_ = kTop;
  }
  return true;
}

bool Handler::end_object() {
  if (skip_ > 0) {
    --skip_;
    return true;
  }
  if (at_ == kEntry) return FinishEntry();
  if (at_ == kTop) return FinishHead();
  return true;
}

bool Handler::FinishEntry() {
  for (size_t k = 0; k < std::size(kEntryKeys); ++k) {
    if (entry_seen_[k]) continue;
    const std::string where = EntryWhere();
    if (k == kShape) return Fail(Bad(where, "'shape' is not an array"));
    return Fail(Bad(where, absl::StrCat("'", kEntryKeys[k], "' is missing")));
  }
  if (!Members() && e_.member > max_member_) {
    max_member_ = e_.member;
    max_member_entry_ = entries_;
  }
  ++entries_;
  // At most `capacity` calls per member (an empty ring holds none).
  if (const std::optional<int64_t> most = MaxEntries(); most && entries_ > static_cast<uint64_t>(*most)) {
    return Fail(TooMany());
  }
  at_ = kEntryList;
  if (absl::Status s = on_entry_(e_); !s.ok()) return Fail(std::move(s));
  return true;
}

bool Handler::FinishHead() {
  const std::string where = "the dump";
  struct Range {
    HeadKey key;
    int64_t lo, hi;
  };
  const int64_t world_size = head_int_[kWorldSize];
  const Range ranges[] = {{kWorldSize, 1, kMaxFlightWorldSize}, {kRank, 0, world_size - 1},
                          {kMembers, 1, kMaxFlightMembers},     {kGroup, 0, std::numeric_limits<int>::max()},
                          {kCapacity, 0, kMaxFlightCapacity},   {kDumpedUs, 0, kMaxTime}};
  if (!head_seen_[kFormat]) return Fail(Bad(where, "'format' is missing"));
  for (const Range& r : ranges) {
    const int64_t v = head_int_[r.key];
    const char* key = kHeadKeys[r.key];
    if (!head_seen_[r.key]) return Fail(Bad(where, absl::StrCat("'", key, "' is missing")));
    if (v < r.lo || v > r.hi) {
      return Fail(Bad(where, absl::StrCat("'", key, "' is ", v, ", outside [", r.lo, ", ", r.hi, "]")));
    }
  }
  for (HeadKey k : {kReason, kDiagnosis}) {
    if (!head_seen_[k]) return Fail(Bad(where, absl::StrCat("'", kHeadKeys[k], "' is missing")));
  }
  if (!head_seen_[kEntries]) return Fail(Bad(where, "'entries' is not an array"));
  // Entries that came before the head: checked against it now.
  if (max_member_ >= *Members()) {
    return Fail(Bad(absl::StrCat("entry ", max_member_entry_),
                    absl::StrCat("'member' is ", max_member_, ", outside [0, ", *Members() - 1, "]")));
  }
  if (entries_ > static_cast<uint64_t>(*MaxEntries())) return Fail(TooMany());
  d_.world_size = static_cast<int>(world_size);
  d_.rank = static_cast<int>(head_int_[kRank]);
  d_.members = *Members();
  d_.group = static_cast<int>(head_int_[kGroup]);
  d_.capacity = static_cast<int>(head_int_[kCapacity]);
  d_.dumped_us = head_int_[kDumpedUs];
  at_ = kAfter;
  return true;
}

}  // namespace

absl::StatusOr<FlightDump> ReadFlightDump(FlightDumpSource read, FlightEntrySink on_entry) {
  GuardedBytes bytes(read);
  Handler handler(on_entry);
  const bool parsed = Json::sax_parse(ByteIterator(&bytes), ByteIterator(nullptr), &handler);
  // The first error met: the source's or a token's, then the handler's, then the lexer's.
  if (!bytes.status().ok()) return bytes.status();
  if (!handler.status().ok()) return handler.status();
  if (!parsed || !handler.done()) return absl::InvalidArgumentError("not JSON");
  return std::move(handler.head());
}

}  // namespace kiln::distributed
