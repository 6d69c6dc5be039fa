#include "examples/train_position.h"

#include <cmath>

#include "tensor/random.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace kiln {
namespace {

constexpr char kSettingPrefix[] = "setting";  // "setting--batch_size" = "64"
constexpr int64_t kMaxCount = int64_t{1} << 53;

// Digits only, no sign or space, at most `max`.
bool ParseCount(const std::string& text, uint64_t max, uint64_t* out) {
  if (text.empty() || text.size() > 20) return false;
  for (char c : text) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return absl::SimpleAtoi(text, out) && *out <= max;
}

class Reader {
 public:
  Reader(const std::map<std::string, std::string>& metadata, const std::string& path)
      : metadata_(metadata), path_(path) {}

  const std::string* Find(const std::string& key) {
    const auto it = metadata_.find(key);
    if (it != metadata_.end()) return &it->second;
    if (error_.ok()) error_ = absl::InvalidArgumentError(absl::StrCat(path_, ": the training state has no ", key));
    return nullptr;
  }
  template <class T>
  void Count(const std::string& key, uint64_t max, T* out) {
    const std::string* text = Find(key);
    uint64_t v = 0;
    if (text == nullptr) return;
    if (!ParseCount(*text, max, &v)) return Fail(key, *text, absl::StrCat("a whole number from 0 to ", max));
    *out = static_cast<T>(v);
  }
  void Number(const std::string& key, double* out) {
    const std::string* text = Find(key);
    if (text == nullptr) return;
    if (text->size() > 40 || !absl::SimpleAtod(*text, out) || !std::isfinite(*out)) Fail(key, *text, "a finite number");
  }
  void Fail(const std::string& key, const std::string& value, const std::string& expected) {
    if (error_.ok()) {
      error_ = absl::InvalidArgumentError(absl::StrCat(path_, ": the training state's ", key, " is \"",
                                                       absl::CEscape(value.substr(0, 40)), "\", not ", expected));
    }
  }
  absl::Status& error() { return error_; }

 private:
  const std::map<std::string, std::string>& metadata_;
  const std::string& path_;
  absl::Status error_;
};

}  // namespace

std::map<std::string, std::string> PositionMetadata(const TrainPosition& p, const distributed::Settings& settings) {
  std::map<std::string, std::string> m;
  m["step"] = absl::StrCat(p.step);
  m["epoch"] = absl::StrCat(p.epoch);
  m["step_in_epoch"] = absl::StrCat(p.step_in_epoch);
  m["data_generator"] = absl::StrCat(p.data_generator);
  m["loss_sum"] = absl::StrFormat("%.17g", p.loss_sum);
  m["last_epoch_loss"] = absl::StrFormat("%.17g", p.last_epoch_loss);
  m["members"] = absl::StrCat(p.members);
  m["devices"] = p.devices;
  m["generators"] = absl::StrJoin(p.generators, ",");
  if (p.has_data_position) {
    m["data_epoch"] = absl::StrCat(p.data_epoch);
    m["data_drawn"] = absl::StrCat(p.data_drawn);
  }
  if (p.loss_scale > 0) {
    m["loss_scale"] = absl::StrFormat("%.17g", p.loss_scale);
    m["loss_scale_good_steps"] = absl::StrCat(p.loss_scale_good_steps);
  }
  for (const auto& [flag, value] : settings) m[kSettingPrefix + flag] = value;
  return m;
}

absl::StatusOr<TrainPosition> ParsePosition(const std::map<std::string, std::string>& metadata,
                                            const distributed::Settings& settings, const std::string& path) {
  // Settings first: a checkpoint of another run is refused for what differs, not for a detail.
  for (const auto& [flag, value] : settings) {
    const auto it = metadata.find(kSettingPrefix + flag);
    if (it == metadata.end()) {
      return absl::InvalidArgumentError(absl::StrCat(path, " does not say which ", flag, " it was written with"));
    }
    if (it->second != value) {
      return absl::InvalidArgumentError(absl::StrCat(path, " was written by a run with ", flag, "=",
                                                     absl::CEscape(it->second.substr(0, 64)), "; this run has ", flag,
                                                     "=", value));
    }
  }
  TrainPosition p;
  Reader r(metadata, path);
  r.Count("step", kMaxCount, &p.step);
  r.Count("epoch", kMaxCount, &p.epoch);
  r.Count("step_in_epoch", kMaxCount, &p.step_in_epoch);
  r.Count("data_generator", UINT64_MAX, &p.data_generator);
  r.Number("loss_sum", &p.loss_sum);
  r.Number("last_epoch_loss", &p.last_epoch_loss);
  r.Count("members", 1 << 20, &p.members);
  if (const std::string* devices = r.Find("devices")) p.devices = *devices;
  if (const std::string* list = r.Find("generators"); list != nullptr && !list->empty()) {
    for (absl::string_view part : absl::StrSplit(*list, ',')) {
      uint64_t v = 0;
      if (!ParseCount(std::string(part), UINT64_MAX, &v)) {
        r.Fail("generators", std::string(part), "a list of whole numbers");
        break;
      }
      p.generators.push_back(v);
    }
  }
  p.has_data_position = metadata.contains("data_epoch");
  if (p.has_data_position) {  // runs on a token dataset
    r.Count("data_epoch", kMaxCount, &p.data_epoch);
    r.Count("data_drawn", kMaxCount, &p.data_drawn);
  }
  p.has_loss_scale = metadata.contains("loss_scale");
  if (p.has_loss_scale) {  // runs with loss scaling (--precision=f16)
    r.Number("loss_scale", &p.loss_scale);
    r.Count("loss_scale_good_steps", kMaxCount, &p.loss_scale_good_steps);
    if (r.error().ok() && !(p.loss_scale > 0)) r.Fail("loss_scale", metadata.at("loss_scale"), "a positive number");
  }
  if (!r.error().ok()) return r.error();
  if (p.epoch < 1 || p.members < 1 || p.step_in_epoch > p.step) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": the training state's position (step ", p.step, ", epoch ",
                                                   p.epoch, ", step ", p.step_in_epoch, " of it, ", p.members,
                                                   " members) is impossible"));
  }
  return p;
}

absl::Status CheckPosition(const TrainPosition& p, int64_t optimizer_steps, const PositionRules& rules,
                           const std::string& path) {
  const auto impossible = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": the training state's position (step ", p.step, ", epoch ",
                                                   p.epoch, ", step ", p.step_in_epoch, " of it) ", why,
                                                   "; no run with this run's settings writes that"));
  };
  const int64_t last_epoch = rules.epochs + (rules.next_epoch_at_end ? 1 : 0);
  if (p.epoch < 1 || p.epoch > last_epoch) {
    return impossible(absl::StrCat("has an epoch outside 1..", rules.epochs));
  }
  if (p.epoch > rules.epochs && p.step_in_epoch != 0) return impossible("goes on past the last epoch");
  if (p.step_in_epoch > rules.max_steps_per_epoch) {
    return impossible(absl::StrCat("is past the epoch's ", rules.max_steps_per_epoch, " steps"));
  }
  // Whole epochs before this one, each of min..max steps (kMaxCount bounds keep this exact).
  const int64_t done = p.epoch - 1;
  if (p.step < done * rules.min_steps_per_epoch + p.step_in_epoch ||
      p.step > done * rules.max_steps_per_epoch + p.step_in_epoch) {
    return impossible(absl::StrCat(
        "does not add up: ", done, " whole epochs of ", rules.min_steps_per_epoch,
        rules.max_steps_per_epoch != rules.min_steps_per_epoch ? absl::StrCat("-", rules.max_steps_per_epoch) : "",
        " steps came before"));
  }
  Generator data(rules.first_data_generator);
  data.Skip(static_cast<uint64_t>(p.step) * rules.draws_per_step + static_cast<uint64_t>(done) * rules.draws_per_epoch);
  if (data.state() != p.data_generator) {
    return impossible(absl::StrCat("has a data order generator at ", p.data_generator, ", not ", data.state(),
                                   " where this run's data stands then"));
  }
  if (optimizer_steps > p.step || (rules.loss_scaler == nullptr && optimizer_steps != p.step)) {
    return impossible(absl::StrCat("has an optimizer that made ", optimizer_steps, " steps"));
  }
  if (rules.loss_scaler == nullptr) {
    if (p.has_loss_scale) return impossible("has a loss scale, but this run scales no loss");
    return absl::OkStatus();
  }
  if (!p.has_loss_scale) return impossible("has no loss scale, but this run scales its loss");
  if (!rules.loss_scaler->CanReach(p.loss_scale, p.loss_scale_good_steps, p.step)) {
    return impossible(
        absl::StrFormat("has a loss scale of %g after %d good steps, which the loss scaler does not "
                        "reach in %d steps",
                        p.loss_scale, p.loss_scale_good_steps, p.step));
  }
  return absl::OkStatus();
}

}  // namespace kiln
