#include "examples/command_line.h"

#include <algorithm>
#include <map>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace kiln {
namespace {

// An argument as a message quotes it: unprintable bytes escaped, cut to a readable length.
std::string Shown(absl::string_view arg) {
  constexpr size_t kShown = 80;
  std::string out;
  for (unsigned char c : arg.substr(0, kShown)) {
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppend(&out, "\\x", absl::Hex(c, absl::kZeroPad2));
    }
  }
  if (arg.size() > kShown) absl::StrAppend(&out, "... (", arg.size(), " bytes)");
  return out;
}

absl::Status Bad(absl::string_view arg, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(Shown(arg), ": ", why));
}

}  // namespace

absl::StatusOr<CommandLine> ParseCommandLineStrictly(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "--help" || a == "--helpfull" || a == "--helpshort" || a == "-help") return CommandLine::kHelp;
    if (a == "--") break;
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      if (i + 1 < args.size()) return Bad(args[i + 1], "unexpected argument; this program takes flags only");
      break;
    }
    absl::string_view body = arg;
    if (!absl::ConsumePrefix(&body, "--") && !absl::ConsumePrefix(&body, "-")) {
      return Bad(arg, "unexpected argument; this program takes flags only (--name=value)");
    }
    const size_t eq = body.find('=');
    const absl::string_view name = body.substr(0, eq);
    if (name.empty()) return Bad(arg, "a flag needs a name (--name=value)");
    if (name == "flagfile" || name == "fromenv" || name == "tryfromenv" || name == "undefok") {
      return Bad(arg, absl::StrCat("--", name, " is not supported; give every flag on the command line"));
    }
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    std::string value;
    if (flag == nullptr && absl::StartsWith(name, "no") && name.size() > 2) {
      absl::CommandLineFlag* negated = absl::FindCommandLineFlag(name.substr(2));
      if (negated != nullptr) {
        if (!negated->IsOfType<bool>()) {
          return Bad(arg, absl::StrCat("--", name.substr(2), " is not a true/false flag; give it a value (--",
                                       name.substr(2), "=...)"));
        }
        if (eq != absl::string_view::npos) return Bad(arg, "--no... takes no value");
        flag = negated;
        value = "false";
      }
    }
    if (flag == nullptr) return Bad(arg, absl::StrCat("unknown flag --", Shown(name), "; see --help"));
    if (value.empty()) {
      if (eq != absl::string_view::npos) {
        value = std::string(body.substr(eq + 1));
      } else if (flag->IsOfType<bool>()) {
        value = "true";
      } else if (i + 1 < args.size() && args[i + 1] != "--") {
        value = args[++i];  // --name value
      } else {
        return Bad(arg, absl::StrCat("--", name, " needs a value (--", name, "=", flag->DefaultValue(), ")"));
      }
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      return Bad(absl::StrCat("--", name, "=", value), error.empty() ? "not a valid value" : Shown(error));
    }
  }
  return CommandLine::kRun;
}

std::string Usage(const std::string& program, const std::string& summary) {
  std::map<std::string, const absl::CommandLineFlag*> ours;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    // The program's own flags, not those Abseil and its libraries define.
    if (!absl::StrContains(flag->Filename(), "absl/") && !flag->IsRetired()) ours.emplace(std::string(name), flag);
  }
  std::string out = absl::StrCat(summary, "\n\nusage: ", program, " [--flag=value ...]\n\n");
  for (const auto& [name, flag] : ours) {
    absl::StrAppend(&out, "  --", name, "  ", flag->Help(), " (default: ", flag->DefaultValue(), ")\n");
  }
  return out;
}

}  // namespace kiln
