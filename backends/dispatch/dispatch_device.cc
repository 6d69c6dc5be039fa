#include "backends/dispatch/dispatch_device.h"

#include <algorithm>
#include <iterator>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kiln {
namespace {

// The text as a message shows it: quoted, escaped, and cut to a readable length.
std::string Quoted(absl::string_view text) {
  constexpr size_t kShown = 64;
  if (text.size() <= kShown) return absl::StrCat("'", absl::CHexEscape(text), "'");
  return absl::StrCat("'", absl::CHexEscape(text.substr(0, kShown)), "...' (", text.size(), " bytes)");
}

std::string CompiledList() {
  std::string out;
  for (const auto& b : kKnownBackends) {
    if (CompiledBackends::Has(b.name)) absl::StrAppend(&out, out.empty() ? "" : ", ", b.name);
  }
  return out;
}

std::string KnownList() {
  std::string out;
  for (size_t i = 0; i < std::size(kKnownBackends); ++i) {
    absl::StrAppend(&out, i == 0 ? "" : i + 1 == std::size(kKnownBackends) ? " and " : ", ", kKnownBackends[i].name);
  }
  return out;
}

}  // namespace

DispatchDevice DispatchDevice::Autodiff(DispatchDevice inner) {
  return DispatchDevice(Variant(AutodiffDevice{std::make_shared<const DispatchDevice>(std::move(inner))}));
}

absl::StatusOr<DispatchDevice> DispatchDevice::Parse(absl::string_view text) {
  const std::string quoted = Quoted(text);
  if (text.empty()) return absl::InvalidArgumentError("device '': empty; expected backend:index (e.g. cpu:0)");
  if (absl::ascii_isspace(text.front()) || absl::ascii_isspace(text.back())) {
    return absl::InvalidArgumentError(absl::StrCat("device ", quoted, " has white space around it; write it as ",
                                                   Quoted(absl::StripAsciiWhitespace(text))));
  }
  // Peeled without recursion: a hostile string nests autodiff( a million deep.
  absl::string_view body = text;
  int wrappers = 0;
  while (absl::ConsumePrefix(&body, "autodiff(")) {
    if (!absl::ConsumeSuffix(&body, ")")) {
      return absl::InvalidArgumentError(absl::StrCat("device ", quoted, ": autodiff( has no closing )"));
    }
    if (++wrappers > kMaxAutodiffWrappers) {
      return absl::InvalidArgumentError(absl::StrCat("device ", quoted, ": autodiff( is nested more than ",
                                                     kMaxAutodiffWrappers, " deep; wrap a device in autodiff once"));
    }
  }
  const size_t colon = body.find(':');
  const absl::string_view digits = colon == absl::string_view::npos ? "" : body.substr(colon + 1);
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit)) {
    return absl::InvalidArgumentError(
        absl::StrCat("device ", quoted, " is not of the form backend:index (e.g. cpu:0)"));
  }
  int index = 0;
  if (digits.size() > 9 || !absl::SimpleAtoi(digits, &index) || index > kMaxDeviceIndex) {
    return absl::InvalidArgumentError(
        absl::StrCat("device ", quoted, ": index ", Quoted(digits), " is out of range (0..", kMaxDeviceIndex, ")"));
  }
  const absl::string_view name = body.substr(0, colon);
  absl::StatusOr<DispatchDevice> device = Plain(name, index, quoted);
  if (!device.ok()) return device.status();
  for (int i = 0; i < wrappers; ++i) device = Autodiff(*std::move(device));
  return device;
}

absl::StatusOr<DispatchDevice> DispatchDevice::Plain(absl::string_view name, int index, const std::string& quoted) {
  std::optional<DispatchDevice> found;
  CompiledBackends::AnyOf([&]<class B>() {
    if (name != B::Name()) return false;
    found = DispatchDevice(typename B::Device(index));
    return true;
  });
  if (found) return *found;
  for (const auto& b : kKnownBackends) {
    if (name == b.name) {
      return absl::FailedPreconditionError(absl::StrCat("device ", quoted, ": this build has no ", name,
                                                        " backend; rebuild with --config=", b.config,
                                                        " (compiled in: ", CompiledList(), ")"));
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("device ", quoted, ": unknown backend ", Quoted(name), "; kiln knows ",
                                                 KnownList(), " (compiled in: ", CompiledList(), ")"));
}

absl::StatusOr<std::vector<DispatchDevice>> DispatchDevice::ParseList(absl::string_view text) {
  std::vector<DispatchDevice> out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    if (out.size() == kMaxListLength) {
      return absl::InvalidArgumentError(
          absl::StrCat("device list ", Quoted(text), " has more than ", kMaxListLength, " devices"));
    }
    absl::StatusOr<DispatchDevice> d = Parse(absl::StripAsciiWhitespace(part));
    if (!d.ok()) return d.status();
    out.push_back(*std::move(d));
  }
  return out;
}

absl::Status DispatchDevice::Check() const {
  const DispatchDevice& device = plain();
  return std::visit(
      [](const auto& d) -> absl::Status {
        using D = std::decay_t<decltype(d)>;
        if constexpr (std::is_same_v<D, AutodiffDevice>) {
          return absl::InternalError("plain() returned an autodiff device");
        } else {
          return BackendOfDevice<D>::type::CheckDevice(d);
        }
      },
      device.v_);
}

const DispatchDevice& DispatchDevice::plain() const {
  const DispatchDevice* d = this;
  while (const auto* wrapped = std::get_if<AutodiffDevice>(&d->v_)) d = wrapped->inner.get();
  return *d;
}

std::string DispatchDevice::backend() const {
  return std::visit(
      [](const auto& d) -> std::string {
        using D = std::decay_t<decltype(d)>;
        if constexpr (std::is_same_v<D, AutodiffDevice>) {
          return d.inner->backend();
        } else {
          const std::string name = d.ToString();
          return name.substr(0, name.find(':'));
        }
      },
      v_);
}

std::string DispatchDevice::ToString() const {
  return std::visit(
      [](const auto& d) -> std::string {
        if constexpr (std::is_same_v<std::decay_t<decltype(d)>, AutodiffDevice>) {
          return absl::StrCat("autodiff(", d.inner->ToString(), ")");
        } else {
          return d.ToString();
        }
      },
      v_);
}

bool operator==(const AutodiffDevice& a, const AutodiffDevice& b) { return *a.inner == *b.inner; }

bool operator==(const DispatchDevice& a, const DispatchDevice& b) { return a.v_ == b.v_; }

}  // namespace kiln
