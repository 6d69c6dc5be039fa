// examples/metrics_log, examples/tensorboard_writer and examples/progress: the records' exact
// text, what a resumed run keeps of a metrics file, the protobuf and TFRecord bytes against
// ones assembled by hand from the format, bad paths, and the progress line on and off a terminal.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "examples/metrics_log.h"
#include "examples/progress.h"
#include "examples/run_watch.h"
#include "examples/tensorboard_writer.h"

namespace kiln {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(MetricsLog, RecordsAreExactJson) {
  EXPECT_EQ(StepJson({.step = 7,
                      .epoch = 2,
                      .loss = 0.25,
                      .lr = 1e-3,
                      .grad_norm = NAN,
                      .loss_scale = 65536,
                      .per_sec = 1500.5,
                      .peak_bytes = {10, 20},
                      .wall_time = 1700000000.25},
                     "samples"),
            "{\"kind\":\"train\",\"step\":7,\"epoch\":2,\"loss\":0.25,\"lr\":0.001,\"grad_norm\":null,"
            "\"loss_scale\":65536,\"samples_per_sec\":1500.5,\"peak_bytes\":[10,20],\"wall_time\":1700000000.250}");
  EXPECT_EQ(StepJson({.step = 1, .loss = INFINITY, .wall_time = 1}, "tokens"),
            "{\"kind\":\"train\",\"step\":1,\"loss\":null,\"lr\":null,\"grad_norm\":null,\"loss_scale\":null,"
            "\"tokens_per_sec\":null,\"peak_bytes\":[],\"wall_time\":1.000}");
  EXPECT_EQ(EvalJson({.step = 500, .values = {{"val_loss", 1.0 / 3}}, .wall_time = 2}),
            "{\"kind\":\"eval\",\"step\":500,\"val_loss\":0.3333333333333333,\"wall_time\":2.000}");
}

TEST(MetricsLog, KeepsWholeRecordsUpToTheResumedStep) {
  const std::string a = "{\"kind\":\"train\",\"step\":1}\n", b = "{\"kind\":\"train\",\"step\":2}\n",
                    e = "{\"kind\":\"eval\",\"step\":2,\"val_loss\":1}\n", c = "{\"kind\":\"train\",\"step\":3}\n";
  const std::string file = a + b + e + c;
  EXPECT_EQ(MetricsBytesToKeep(file, 0), 0u);
  EXPECT_EQ(MetricsBytesToKeep(file, 1), a.size());
  EXPECT_EQ(MetricsBytesToKeep(file, 2), (a + b + e).size());  // the evaluation after step 2 too
  EXPECT_EQ(MetricsBytesToKeep(file, 3), file.size());
  EXPECT_EQ(MetricsBytesToKeep(file, 99), file.size());
  EXPECT_EQ(MetricsBytesToKeep(a + b + "{\"kind\":\"train\",\"st", 99), (a + b).size());  // torn by a kill
  EXPECT_EQ(MetricsBytesToKeep(a + "garbage\n" + b, 99), a.size());
  EXPECT_EQ(MetricsBytesToKeep(a + "{\"step\":-3}\n" + b, 99), a.size());
  EXPECT_EQ(MetricsBytesToKeep(a + "{\"step\":99999999999999999999}\n", 1LL << 62), a.size());
  EXPECT_EQ(MetricsBytesToKeep("", 5), 0u);
}

TEST(MetricsLog, OpenCutsPastTheResumedStepAndAppends) {
  const std::string path = ::testing::TempDir() + "/cut.jsonl";
  std::ofstream(path) << "{\"step\":1}\n{\"step\":2}\n{\"step\":3}\n{\"st";
  {
    auto log = MetricsLog::Open(path, 2);
    ASSERT_TRUE(log.ok()) << log.status();
    ASSERT_TRUE((*log)->Append("{\"step\":3,\"again\":1}", false).ok());
  }
  EXPECT_EQ(ReadAll(path), "{\"step\":1}\n{\"step\":2}\n{\"step\":3,\"again\":1}\n");
  {
    auto fresh = MetricsLog::Open(path, 0);  // a new run starts the file afresh
    ASSERT_TRUE(fresh.ok());
  }
  EXPECT_EQ(ReadAll(path), "");
}

TEST(MetricsLog, BadPathsAreNamed) {
  const std::string dir = ::testing::TempDir();
  EXPECT_EQ(MetricsLog::CheckPath(dir + "/no/such/m.jsonl").message(),
            "--metrics=" + dir + "/no/such/m.jsonl: cannot open it for appending: No such file or directory");
  EXPECT_EQ(MetricsLog::CheckPath(dir).message(),
            "--metrics=" + dir + ": cannot open it for appending: Is a directory");
  EXPECT_EQ(MetricsLog::CheckPath("").message(), "--metrics: an empty path");
  std::ofstream(dir + "/kept.jsonl") << "{\"step\":1}\n";
  EXPECT_TRUE(MetricsLog::CheckPath(dir + "/kept.jsonl").ok());
  EXPECT_EQ(ReadAll(dir + "/kept.jsonl"), "{\"step\":1}\n");  // checking changes nothing
}

// Bytes from a list of byte values.
std::string Bytes(std::initializer_list<int> bytes) {
  std::string s;
  for (int b : bytes) s.push_back(static_cast<char>(b));
  return s;
}

TEST(TensorBoardWriter, MaskedCrcIsTfRecords) {
  // CRC-32C("123456789") = 0xe3069283 (the standard check value), rotated right 15, + 0xa282ead8.
  EXPECT_EQ(MaskedCrc32c("123456789"), 0xc78ab0e5u);
}

TEST(TensorBoardWriter, TfRecordFraming) {
  const std::string record = TfRecord("abc");
  // Length 3 (uint64 LE), masked CRC of those 8 bytes, the data, masked CRC of the data.
  std::string length = Bytes({3, 0, 0, 0, 0, 0, 0, 0});
  auto le32 = [](uint32_t v) { return Bytes({int(v & 255), int(v >> 8 & 255), int(v >> 16 & 255), int(v >> 24)}); };
  EXPECT_EQ(record, length + le32(MaskedCrc32c(length)) + "abc" + le32(MaskedCrc32c("abc")));
  EXPECT_EQ(MaskedCrc32c(length), 0x0e4999b0u);  // values from tests/examples/read_tfevents.py's CRC
  EXPECT_EQ(MaskedCrc32c("abc"), 0x21f1576eu);
}

TEST(TensorBoardWriter, EventsAreProtobufWireFormat) {
  const std::string wall = Bytes({0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f});  // field 1 fixed64: 1.5
  // Summary{value {tag "a", simple_value 0.5}}: 0a 08 | 0a 01 'a' 15 <0.5f>.
  EXPECT_EQ(ScalarsEvent(1.5, 3, {{"a", 0.5}}),
            wall + Bytes({0x10, 3, 0x2a, 10, 0x0a, 8, 0x0a, 1, 'a', 0x15, 0, 0, 0, 0x3f}));
  EXPECT_EQ(FileVersionEvent(1.5), wall + Bytes({0x10, 0, 0x1a, 13}) + "brain.Event:2");
  EXPECT_EQ(SessionStartEvent(1.5, 300), wall + Bytes({0x10, 0xac, 0x02, 0x32, 2, 0x08, 1}));  // 300: varint ac 02
}

TEST(TensorBoardWriter, DirThatIsAFileIsRefused) {
  const std::string file = ::testing::TempDir() + "/not_a_dir";
  std::ofstream(file) << "x";
  EXPECT_EQ(TensorBoardWriter::CheckDir(file).message(), "--tensorboard_dir=" + file + ": not a folder");
  EXPECT_EQ(ReadAll(file), "x");
  const std::string made = ::testing::TempDir() + "/tb/a/b";
  EXPECT_TRUE(TensorBoardWriter::CheckDir(made).ok());
  EXPECT_TRUE(std::filesystem::is_directory(made));
}

TEST(TensorBoardWriter, WritesTheFileVersionThenScalars) {
  const std::string dir = ::testing::TempDir() + "/tb_write";
  std::string path;
  {
    auto writer = TensorBoardWriter::Open(dir, 0);
    ASSERT_TRUE(writer.ok()) << writer.status();
    path = (*writer)->path();
    ASSERT_TRUE((*writer)->Add(2.0, 1, {{"x", 1.0}, {"dropped", NAN}}, true).ok());
  }
  const std::string file = ReadAll(path);
  const std::string first = TfRecord(FileVersionEvent(0));
  ASSERT_GT(file.size(), first.size());
  EXPECT_EQ(file.substr(file.size() - TfRecord(ScalarsEvent(2.0, 1, {{"x", 1.0}})).size()),
            TfRecord(ScalarsEvent(2.0, 1, {{"x", 1.0}})));  // the NaN left out
  EXPECT_NE(path.find("/events.out.tfevents."), std::string::npos);
}

// What Progress writes, through a temporary file.
template <class F>
std::string Captured(F draw) {
  std::FILE* out = std::tmpfile();
  draw(out);
  std::fflush(out);
  std::rewind(out);
  std::string text;
  for (int c; (c = std::fgetc(out)) != EOF;) text.push_back(static_cast<char>(c));
  std::fclose(out);
  return text;
}

TEST(Progress, PlainLinesOffATerminalAreUnchanged) {
  const std::string text = Captured([](std::FILE* out) {
    Progress p(false, 10, 2, "samples", nullptr, out);
    for (int s = 1; s <= 10; ++s) p.Step(1, s, 0.5, 100);
    p.EndEpoch(1, 0.5, 0.75);
  });
  EXPECT_EQ(text,
            "epoch 1/2 step 2/10 loss 0.5000 100 samples/s\n"
            "epoch 1/2 step 4/10 loss 0.5000 100 samples/s\n"
            "epoch 1/2 step 6/10 loss 0.5000 100 samples/s\n"
            "epoch 1/2 step 8/10 loss 0.5000 100 samples/s\n"
            "epoch 1/2 step 10/10 loss 0.5000 100 samples/s\n"
            "epoch 1/2 done: train_loss 0.5000 test_accuracy 0.7500\n");
}

TEST(Progress, OneLineRewrittenInPlaceOnATerminal) {
  const std::string text = Captured([](std::FILE* out) {
    Progress p(true, 4, 1, "tokens", nullptr, out);
    p.Step(1, 1, 2.5, 1000);
    p.Step(1, 4, 2.0, 1000);  // the last step is always drawn
    p.Clear();
  });
  EXPECT_EQ(text.find('\n'), std::string::npos);
  EXPECT_EQ(text.rfind("\r\033[K", 0), 0u);
  EXPECT_NE(text.find("\r\033[Kstep [=======>                      ] 1/4 loss 2.5000 1000 tokens/s eta "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\r\033[Kstep [==============================] 4/4 loss 2.0000 1000 tokens/s eta 0s"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.substr(text.size() - 4), "\r\033[K");  // Clear
}

TEST(Progress, EtaReads) {
  EXPECT_EQ(FormatEta(0), "eta 0s");
  EXPECT_EQ(FormatEta(42.4), "eta 42s");
  EXPECT_EQ(FormatEta(185), "eta 3m05s");
  EXPECT_EQ(FormatEta(3720), "eta 1h02m");
  EXPECT_EQ(FormatEta(NAN), "eta ?");
  EXPECT_EQ(FormatEta(-1), "eta ?");
}

}  // namespace
}  // namespace kiln
