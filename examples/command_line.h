// The command line of kiln's programs, parsed strictly: every argument is a known flag with a
// valid value, or the program stops with a message (exit 2) before anything runs. Abseil's
// own parser exits 1, reads --flagfile/--fromenv files and environment behind the user's
// back, and takes a missing value at the end in its own way; these promise one behaviour.
#ifndef KILN_EXAMPLES_COMMAND_LINE_H_
#define KILN_EXAMPLES_COMMAND_LINE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln {

enum class CommandLine { kRun, kHelp };

// Sets the flags named in args (argv without the program name): --name=value, --name value,
// -name=value, --bool / --nobool / --bool=false; "--" ends the flags (kiln's programs take no
// other arguments). kHelp for --help / --helpfull / --helpshort (nothing else is checked).
// InvalidArgument, naming the argument: an unknown flag, a bad or missing value, a positional
// argument, --no on a flag that is not a bool, and Abseil's --flagfile, --fromenv,
// --tryfromenv and --undefok (not supported: flags are given on the command line).
absl::StatusOr<CommandLine> ParseCommandLineStrictly(const std::vector<std::string>& args);

// Every flag of the program, its default and its help, for --help.
std::string Usage(const std::string& program, const std::string& summary);

}  // namespace kiln

#endif  // KILN_EXAMPLES_COMMAND_LINE_H_
