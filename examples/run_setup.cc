#include "examples/run_setup.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/cpu/cpu_device.h"
#include "distributed/gloo/gloo_process_group.h"
#include "distributed/group.h"
#include "distributed/own_devices.h"
#include "distributed/process/launch_env.h"
#include "examples/command_line.h"
#include "nn/safetensors.h"
#include "tensor/error.h"

namespace kiln {
namespace {

// --devices, parsed once: under a launcher each process takes its own GPUs (own_devices.h),
// the logical CPU devices listed are made to exist (the cores shared among those listed and
// the processes on this machine), and the list is validated as a whole.
std::vector<DispatchDevice> ParseDevices(const std::string& spec, int threads_flag,
                                         const distributed::LaunchEnv* launch) {
  auto parsed = DispatchDevice::ParseList(spec);
  if (!parsed.ok()) throw UsageError{absl::StrCat("--devices=", spec, ": ", parsed.status().message())};
  std::vector<DispatchDevice> devices = *std::move(parsed);
  if (launch != nullptr) {
    auto own = distributed::OwnDevices(devices, *launch);
    if (!own.ok()) throw UsageError{absl::StrCat("--devices=", spec, ": ", own.status().message())};
    devices = *std::move(own);
  }
  int highest = 0;
  for (const DispatchDevice& d : devices) {
    if (const auto* cpu = std::get_if<CpuDevice>(&d.plain().variant())) highest = std::max(highest, cpu->index());
  }
  const int listed = static_cast<int>(devices.size()) * (launch ? launch->local_world_size : 1);
  const int threads = threads_flag > 0 ? threads_flag : std::max(1, cpu::HardwareThreads() / listed);
  if (absl::Status s = cpu::Configure({.devices = highest + 1, .threads_per_device = threads}); !s.ok()) {
    throw UsageError{absl::StrCat("--devices=", spec, ": ", s.message())};
  }
  if (absl::Status s = distributed::ValidateDevices(devices, distributed::Collective::kGradientSync); !s.ok()) {
    throw UsageError{absl::StrCat("--devices=", spec, ": ", s.message())};
  }
  return devices;
}

}  // namespace

Run SetUpRun(const RunFlags& flags, distributed::Settings settings) {
  // A launcher's environment makes this process one rank of several.
  const auto launch = distributed::ReadLaunchEnv();
  if (!launch.ok()) throw UsageError{std::string(launch.status().message())};
  if (!flags.checkpoint.empty()) {
    if (absl::Status s = nn::CheckWritable(flags.checkpoint); !s.ok()) {
      throw UsageError{absl::StrCat("--checkpoint=", flags.checkpoint, ": ", s.message())};
    }
  }
  Run run;
  run.devices = ParseDevices(flags.devices, flags.threads, launch->has_value() ? &**launch : nullptr);
  run.group_options.timeout = std::chrono::milliseconds(static_cast<int64_t>(flags.collective_timeout_s * 1000));
  run.group_options.flight_recorder_dir = flags.flight_recorder_dir;
  if (!launch->has_value()) return run;
  auto world = distributed::GlooProcessGroup::Connect(
      distributed::ProcessGroupOptions::From(**launch, run.group_options.timeout));
  if (!world.ok()) throw RunFailure{std::string(world.status().message())};
  // Ranks started with different flags would each train their own way.
  settings.emplace_back("devices per process", absl::StrCat(run.devices.size()));
  if (absl::Status s = distributed::AgreeOnSettings(**world, settings); !s.ok()) {
    if (s.code() == absl::StatusCode::kInvalidArgument) throw UsageError{std::string(s.message())};
    throw RunFailure{std::string(s.message())};
  }
  run.group_options.process_group = *world;
  run.rank = (*world)->rank();
  run.processes = (*world)->world_size();
  return run;
}

int RunMain(int argc, char** argv, const char* program, const char* summary, const std::function<int()>& run) {
  try {
    const auto command_line = ParseCommandLineStrictly(std::vector<std::string>(argv + 1, argv + argc));
    if (!command_line.ok()) throw UsageError{std::string(command_line.status().message())};
    if (*command_line == CommandLine::kHelp) {
      std::printf("%s", Usage(program, summary).c_str());
      return 0;
    }
    return run();
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.message.c_str());
    return 2;
  } catch (const RunFailure& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.message.c_str());
    return 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    // Past the estimate (memory_budget.h): memory taken by someone else meanwhile, or an
    // allocator's overhead the estimate does not see.
    std::fprintf(stderr, "%s: out of memory (std::bad_alloc): the run needs more memory than is available\n", program);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
}

}  // namespace kiln
