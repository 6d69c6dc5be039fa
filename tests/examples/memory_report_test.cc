// examples/process_memory and examples/memory_report: VmRSS and VmHWM parsed from
// /proc/self/status text (and read from a fake /proc and the real one), and the text the
// examples print: the progress line's "mem current/peak" and the JSON line's fields.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "examples/memory_report.h"
#include "examples/process_memory.h"

namespace kiln {
namespace {

constexpr int64_t kKiB = 1024, kMiB = 1024 * kKiB;

TEST(ProcessMemory, ParsesVmRssAndVmHwm) {
  const char* status =
      "Name:\tgpt\n"
      "VmPeak:\t  300000 kB\n"
      "VmHWM:\t   96256 kB\n"
      "VmRSS:\t   81920 kB\n"
      "RssAnon:\t   40960 kB\n";
  const auto memory = ParseProcessMemory(status);
  ASSERT_TRUE(memory.has_value());
  EXPECT_EQ(memory->rss_bytes, 81920 * kKiB);
  EXPECT_EQ(memory->peak_rss_bytes, 96256 * kKiB);
  EXPECT_EQ(ParseProcessMemory("VmRSS:\t 5 kB\n"), std::nullopt);             // no VmHWM
  EXPECT_EQ(ParseProcessMemory("VmHWM: 5 kB\nVmRSS: 5 MB\n"), std::nullopt);  // not the kernel's unit
  EXPECT_EQ(ParseProcessMemory("VmHWM: 5 kB\nVmRSS: -5 kB\n"), std::nullopt);
  EXPECT_EQ(ParseProcessMemory("VmHWM: 9007199254740992 kB\nVmRSS: 5 kB\n"), std::nullopt);  // * 1024 overflows
  EXPECT_EQ(ParseKibField("VmRSSX: 5 kB\nVmRSS: 7 kB\n", "VmRSS"), 7 * kKiB);
}

TEST(ProcessMemory, ReadsAFakeProcAndNothingWhereThereIsNone) {
  const std::filesystem::path root = std::filesystem::path(::testing::TempDir()) / "proc_memory";
  std::filesystem::create_directories(root / "self");
  std::ofstream(root / "self/status") << "Name:\tx\nVmHWM:\t 2048 kB\nVmRSS:\t 1024 kB\n";
  const ProcessMemory memory = ReadProcessMemory(root.string());
  EXPECT_EQ(memory.rss_bytes, 1 * kMiB);
  EXPECT_EQ(memory.peak_rss_bytes, 2 * kMiB);
  const ProcessMemory none = ReadProcessMemory((root / "missing").string());
  EXPECT_EQ(none.rss_bytes, 0);
  EXPECT_EQ(none.peak_rss_bytes, 0);
}

// The real /proc: 64 MiB written raise the resident set and its peak by about that much.
TEST(ProcessMemory, TheRealResidentSetFollowsTouchedMemory) {
  const ProcessMemory before = ReadProcessMemory();
  ASSERT_GT(before.rss_bytes, 0);
  ASSERT_GE(before.peak_rss_bytes, before.rss_bytes);
  constexpr size_t kBytes = 64 * kMiB;
  const std::unique_ptr<char[]> block(new char[kBytes]);
  std::memset(block.get(), 1, kBytes);
  const ProcessMemory during = ReadProcessMemory();
  EXPECT_GE(during.rss_bytes - before.rss_bytes, 60 * kMiB);
  EXPECT_GE(during.peak_rss_bytes, before.rss_bytes + 60 * kMiB);
  EXPECT_EQ(block[kBytes - 1], 1);
}

TEST(MemoryReport, ProgressTextShowsEachDeviceInOneUnit) {
  const ProcessMemory process{.rss_bytes = 95 * kMiB + kMiB / 2, .peak_rss_bytes = 100 * kMiB};
  EXPECT_EQ(MemoryProgress({{12 * kMiB + 3 * kMiB / 10, 15 * kMiB}}, process), "mem 12.3/15.0 MiB, rss 95.5 MiB");
  EXPECT_EQ(MemoryProgress({{512 * kKiB, 2 * kMiB}, {kMiB, 3 * kMiB / 2}}, process),
            "mem 0.5/2.0, 1.0/1.5 MiB, rss 95.5 MiB");
  EXPECT_EQ(MemoryProgress({{1536, 4096}}, {.rss_bytes = 3 * (int64_t{1} << 30)}), "mem 1.5/4.0 KiB, rss 3.0 GiB");
}

TEST(MemoryReport, JsonFieldsHaveAPeakPerDevice) {
  const ProcessMemory process{.rss_bytes = 1, .peak_rss_bytes = 123456789};
  EXPECT_EQ(MemoryJsonFields({{10, 20}, {30, 40}}, process), ",\"peak_bytes\":[20,40],\"peak_rss_bytes\":123456789");
  EXPECT_EQ(MemoryJsonFields({{0, 7}}, process), ",\"peak_bytes\":[7],\"peak_rss_bytes\":123456789");
}

}  // namespace
}  // namespace kiln
