// --tensorboard_dir=DIR: TensorBoard's event files, written without a protobuf library.
//
// An event file is a sequence of TFRecords (little-endian uint64 length, masked CRC-32C of
// those 8 bytes, the data, masked CRC-32C of the data), each holding one serialized
// tensorflow.Event: wall_time (field 1, double), step (2, int64), then file_version (3,
// "brain.Event:2", the first record), summary (5) or session_log (6). Scalars are Summary.Value
// {tag (1), simple_value (2, float)}: the form every TensorBoard version shows in its scalars
// dashboard with no plugin metadata (the tensor form needs a TensorProto and plugin_data for
// the same picture). The encoder is the few varints and fixed fields these messages use:
// Debian's libprotobuf would add a build dependency and generated code for three messages.
#ifndef KILN_EXAMPLES_TENSORBOARD_WRITER_H_
#define KILN_EXAMPLES_TENSORBOARD_WRITER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln {

using Scalars = std::vector<std::pair<std::string, double>>;  // (tag, value)

// TFRecord's checksum: the CRC-32C rotated right by 15 bits plus 0xa282ead8.
uint32_t MaskedCrc32c(absl::string_view bytes);
// One TFRecord around `data`.
std::string TfRecord(absl::string_view data);

// Serialized Events: the file's first, scalars at `step`, and a SessionLog START at `step`
// (TensorBoard then drops the points at and after `step` that earlier files hold: a resumed
// run's replaced steps).
std::string FileVersionEvent(double wall_time);
std::string ScalarsEvent(double wall_time, int64_t step, const Scalars& scalars);
std::string SessionStartEvent(double wall_time, int64_t step);

class TensorBoardWriter {
 public:
  // Creates `dir` (and its parents) if missing. InvalidArgument naming it when it is not a
  // folder or cannot be written to.
  static absl::Status CheckDir(const std::string& dir);
  // A new event file in `dir` for a run that starts after `resumed_step` (0: a new run).
  static absl::StatusOr<std::unique_ptr<TensorBoardWriter>> Open(const std::string& dir, int64_t resumed_step);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // Scalars at `step` (non-finite values left out: TensorBoard cannot plot them); `sync`:
  // fsync after the write.
  absl::Status Add(double wall_time, int64_t step, const Scalars& scalars, bool sync);
  const std::string& path() const { return path_; }

 private:
  TensorBoardWriter(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  absl::Status Write(absl::string_view event, bool sync);
  std::string path_;
  int fd_;
};

}  // namespace kiln

#endif  // KILN_EXAMPLES_TENSORBOARD_WRITER_H_
