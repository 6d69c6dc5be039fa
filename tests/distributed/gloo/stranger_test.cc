// Strangers during a process group's rendezvous: connections to a rank's listening port that
// close at once, hold the port, send Gloo frames, claim another world size, or hold another
// run token are logged and ignored, and the real ranks still connect and reduce exactly. A
// rank given another token fails with a message that says so. Ranks run as threads of this
// test, so the test can attack rank 0's port after it is published and before rank 1 starts.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "distributed/gloo/gloo_process_group.h"
#include "distributed/gloo/mesh.h"
#include "distributed/process/rendezvous_store.h"
#include "gloo/broadcast.h"
#include "gloo/transport/tcp/address.h"
#include "gloo/transport/tcp/device.h"

namespace kiln::distributed {
namespace {

using std::chrono::milliseconds;

std::string FreshStore() {
  static int n = 0;
  return absl::StrCat("file://", std::getenv("TEST_TMPDIR"), "/stranger-store-", n++);
}

ProcessGroupOptions Options(int rank, int size, const std::string& store, const std::string& token,
                            milliseconds timeout = milliseconds(20000)) {
  return {.rank = rank,
          .world_size = size,
          .rendezvous = store,
          .run_id = "strangers",
          .host = "127.0.0.1",
          .run_token = token,
          .timeout = timeout};
}

// Captures what this process writes to stderr while it lives.
class StderrCapture {
 public:
  StderrCapture() : path_(absl::StrCat(std::getenv("TEST_TMPDIR"), "/stderr-", serial_++)) {
    std::fflush(stderr);
    saved_ = dup(2);
    std::FILE* f = std::fopen(path_.c_str(), "w");
    dup2(fileno(f), 2);
    std::fclose(f);
  }
  ~StderrCapture() { Restore(); }
  std::string Text() {
    Restore();
    std::ifstream in(path_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  void Restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
    saved_ = -1;
  }
  static inline int serial_ = 0;
  std::string path_;
  int saved_ = -1;
};

// The port rank `rank` of a world of `size` listens on for `peer`, once it is published.
sockaddr_storage PublishedPort(const std::string& store_address, int rank, int size, int peer) {
  auto store = RendezvousStore::Open(store_address, "strangers").value();
  store->Wait({absl::StrCat("mesh/", rank)}, milliseconds(10000));
  const std::vector<char> record = store->Get(absl::StrCat("mesh/", rank));
  const size_t address_bytes = (record.size() - 4) / (size - 1);
  const size_t index = peer < rank ? peer : peer - 1;
  const std::vector<char> bytes(record.begin() + 4 + index * address_bytes,
                                record.begin() + 4 + (index + 1) * address_bytes);
  return gloo::transport::tcp::Address(bytes).getSockaddr();
}

int Connect(const sockaddr_storage& to) {
  const int fd = socket(to.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const socklen_t length = to.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  EXPECT_EQ(connect(fd, reinterpret_cast<const sockaddr*>(&to), length), 0) << std::strerror(errno);
  return fd;
}

void Send(int fd, const std::string& bytes) {
  ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
}

std::string U32(uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }

// Rank `rank` of a 2-rank mesh, connected straight through ConnectMesh (the process group's
// join step would wait for both ranks before any port opens).
std::shared_ptr<gloo::Context> Mesh(const std::string& store_address, int rank, const std::string& token) {
  auto store = RendezvousStore::Open(store_address, "strangers").value();
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  return ConnectMesh(*store, gloo::transport::tcp::CreateDevice(attr),
                     {.rank = rank, .world_size = 2, .timeout = milliseconds(20000), .token = token});
}

// Rank 0 broadcasts 1000 floats to rank 1.
void ExpectBroadcast(const std::shared_ptr<gloo::Context>& a, const std::shared_ptr<gloo::Context>& b) {
  std::vector<float> from(1000, 7.0f), to(1000, 0.0f);
  std::thread t([&] {
    gloo::BroadcastOptions o(b);
    o.setOutput(to.data(), to.size());
    o.setRoot(0);
    gloo::broadcast(o);
  });
  gloo::BroadcastOptions o(a);
  o.setOutput(from.data(), from.size());
  o.setRoot(0);
  gloo::broadcast(o);
  t.join();
  EXPECT_EQ(to, from);
}

// Both ranks sum [rank + 1, rank + 1, ...]: 3 everywhere.
void ExpectReduces(GlooProcessGroup& group) {
  std::vector<float> data(1000, static_cast<float>(group.rank() + 1));
  ASSERT_TRUE(group.AllReduce("sum", data.data(), data.data(), data.size(), DType::kF32, ReduceOp::kSum).ok());
  for (float v : data) ASSERT_EQ(v, 3.0f);
}

TEST(Strangers, AreIgnoredAndTheRealRanksConnect) {
  const std::string store = FreshStore();
  StderrCapture captured;
  auto rank0 = std::async(std::launch::async, [&] { return Mesh(store, 0, "tok-A-1234567890"); });
  const sockaddr_storage port = PublishedPort(store, 0, 2, 1);

  close(Connect(port));            // connect and close
  const int held = Connect(port);  // connect and hold the port
  // A Gloo frame (opcode 1: "into the unbound buffer of slot 12345"), on which Gloo's event
  // loop would throw and end the process.
  const int frames = Connect(port);
  Send(frames, std::string(8, '\0') + U32(1) + std::string(4, '\0') + U32(12345) + std::string(36, '\0'));
  const int other_world = Connect(port);  // a kiln hello from another world size
  Send(other_world, "KILNAUTH" + U32(1) + U32(3) + U32(1) + U32(0) + std::string(32, 'n'));
  const int wrong_proof = Connect(port);  // the right hello, then a proof without the token
  Send(wrong_proof, "KILNAUTH" + U32(1) + U32(2) + U32(1) + U32(0) + std::string(32, 'n'));
  char challenge[72];
  ASSERT_EQ(recv(wrong_proof, challenge, sizeof(challenge), MSG_WAITALL), 72);
  Send(wrong_proof, std::string(32, 'p'));
  char verdict;
  EXPECT_EQ(recv(wrong_proof, &verdict, 1, 0), 0);  // closed, no verdict

  auto rank1 = std::async(std::launch::async, [&] { return Mesh(store, 1, "tok-A-1234567890"); });
  const auto a = rank0.get(), b = rank1.get();
  ExpectBroadcast(a, b);
  for (int fd : {held, frames, other_world, wrong_proof}) close(fd);

  const std::string log = captured.Text();
  EXPECT_TRUE(absl::StrContains(log, "kiln: process group rank 0: ignored a connection at the port for rank 1 from "))
      << log;
  EXPECT_TRUE(absl::StrContains(log, "closed before its hello")) << log;
  EXPECT_TRUE(absl::StrContains(log, "(further ones are counted, not shown)")) << log;
}

TEST(Strangers, EachRejectionIsNamed) {
  // One stranger at a time, so that each is among the reported ones.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {std::string(8, '\0') + U32(1) + std::string(44, 'x'), "does not speak kiln's handshake"},
      {"KILNAUTH" + U32(1) + U32(3) + U32(1) + U32(0) + std::string(32, 'n'),
       "claims to be rank 1 of 3 calling rank 0, but this port is rank 0's for rank 1 of 2"},
  };
  for (const auto& [bytes, message] : cases) {
    const std::string store = FreshStore();
    StderrCapture captured;
    auto rank0 = std::async(std::launch::async, [&] { return Mesh(store, 0, "tok-B-1234567890"); });
    const int fd = Connect(PublishedPort(store, 0, 2, 1));
    Send(fd, bytes);
    char c;
    EXPECT_EQ(recv(fd, &c, 1, 0), 0);  // closed
    close(fd);
    auto rank1 = std::async(std::launch::async, [&] { return Mesh(store, 1, "tok-B-1234567890"); });
    ExpectBroadcast(rank0.get(), rank1.get());
    const std::string log = captured.Text();
    EXPECT_TRUE(absl::StrContains(log, message)) << log;
  }
}

TEST(Strangers, AProcessOfAnotherWorldSizeFailsAloneWithAMessage) {
  const std::string store = FreshStore();
  auto rank0 = std::async(std::launch::async,
                          [&] { return GlooProcessGroup::Connect(Options(0, 2, store, "tok-C-1234567890")); });
  auto rank1 = std::async(std::launch::async,
                          [&] { return GlooProcessGroup::Connect(Options(1, 2, store, "tok-C-1234567890")); });
  auto g0 = rank0.get();
  auto g1 = rank1.get();
  ASSERT_TRUE(g0.ok() && g1.ok());
  const auto third = GlooProcessGroup::Connect(Options(2, 3, store, "tok-C-1234567890", milliseconds(3000)));
  EXPECT_EQ(third.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(third.status().message(),
                                "rank 0 published its addresses for a world size of 2, not 3: every rank must be "
                                "started with the same world size"))
      << third.status();
  std::thread t([&] {
    ExpectReduces(**g1);
    g1->reset();  // each rank closes its group on its own thread: closing is a meeting
  });
  ExpectReduces(**g0);
  g0->reset();
  t.join();
}

TEST(Strangers, RanksWithDifferentTokensFailSayingSo) {
  const std::string store = FreshStore();
  StderrCapture captured;
  auto rank0 = std::async(std::launch::async, [&] {
    return GlooProcessGroup::Connect(Options(0, 2, store, "tok-D-1234567890", milliseconds(1000)));
  });
  auto rank1 = std::async(std::launch::async, [&] {
    return GlooProcessGroup::Connect(Options(1, 2, store, "tok-E-1234567890", milliseconds(1000)));
  });
  const auto g0 = rank0.get();
  const auto g1 = rank1.get();
  ASSERT_FALSE(g0.ok());
  ASSERT_FALSE(g1.ok());
  // The connecting side learns it from the verdict (or the challenge), the listening side
  // says what it refused when its wait ends.
  const std::string both = absl::StrCat(g0.status().message(), "\n", g1.status().message());
  EXPECT_TRUE(absl::StrContains(both, "KILN_RUN_TOKEN")) << both;
  EXPECT_TRUE(absl::StrContains(both, "does not hold this run's token")) << both;
}

}  // namespace
}  // namespace kiln::distributed
