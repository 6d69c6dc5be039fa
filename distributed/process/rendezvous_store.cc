#include "distributed/process/rendezvous_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "distributed/process/launch_env.h"
#include "gloo/common/error.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/rendezvous/redis_store.h"

namespace kiln::distributed {

struct RendezvousStore::Backing {
  std::unique_ptr<gloo::rendezvous::Store> store;
  std::function<bool(const std::vector<std::string>&)> has;  // whether all keys are set
};

namespace {

// FileStore and RedisStore can tell whether keys exist; FileStore keeps it protected.
class FileStore : public gloo::rendezvous::FileStore {
 public:
  using gloo::rendezvous::FileStore::FileStore;
  bool Has(const std::vector<std::string>& keys) { return check(keys); }
};

// mkdir -p, then a probe file: the directory must exist and take new files.
absl::Status PrepareDirectory(const std::string& address, const std::string& dir) {
  for (size_t at = 1; at <= dir.size(); ++at) {
    if (at == dir.size() || dir[at] == '/') {
      const std::string prefix = dir.substr(0, at);
      if (mkdir(prefix.c_str(), 0777) != 0 && errno != EEXIST) {
        return absl::FailedPreconditionError(absl::StrCat("rendezvous store ", address, ": cannot create directory ",
                                                          prefix, ": ", std::strerror(errno)));
      }
    }
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat("rendezvous store ", address, ": ", dir, " is not a directory"));
  }
  const std::string probe = absl::StrCat(dir, "/.kiln-probe-", getpid());
  const int fd = open(probe.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("rendezvous store ", address, ": directory ", dir, " is not writable: ", std::strerror(errno)));
  }
  close(fd);
  unlink(probe.c_str());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<RendezvousStore>> RendezvousStore::Open(const std::string& address,
                                                                       const std::string& run_id) {
  if (absl::Status s = CheckRendezvousAddress(address); !s.ok()) return s;
  const std::string prefix = absl::StrCat("kiln/", run_id.empty() ? "run" : run_id, "/");
  absl::string_view rest = address;
  if (absl::ConsumePrefix(&rest, "file://")) {
    std::string dir(rest);
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    if (absl::Status s = PrepareDirectory(address, dir); !s.ok()) return s;
    try {
      auto store = std::make_unique<FileStore>(dir);
      FileStore* raw = store.get();
      auto backing = std::make_unique<Backing>(
          Backing{std::move(store), [raw](const std::vector<std::string>& k) { return raw->Has(k); }});
      return std::unique_ptr<RendezvousStore>(new RendezvousStore(address, prefix, std::move(backing)));
    } catch (const std::exception& e) {
      return absl::FailedPreconditionError(absl::StrCat("rendezvous store ", address, ": ", e.what()));
    }
  }
  absl::ConsumePrefix(&rest, "redis://");
  std::string host(rest);
  int port = 6379;
  if (const size_t colon = rest.rfind(':'); colon != absl::string_view::npos) {
    host = std::string(rest.substr(0, colon));
    (void)absl::SimpleAtoi(rest.substr(colon + 1), &port);  // checked by CheckRendezvousAddress
  }
  // Connect once first: Gloo's RedisStore leaks its hiredis context when the connection fails.
  const struct timeval wait = {.tv_sec = 2, .tv_usec = 0};
  redisContext* probe = redisConnectWithTimeout(host.c_str(), port, wait);
  if (probe == nullptr || probe->err != 0) {
    const std::string why = probe == nullptr ? "out of memory" : probe->errstr;
    if (probe != nullptr) redisFree(probe);
    return absl::UnavailableError(absl::StrCat("rendezvous store ", address, " is unreachable: ", why));
  }
  redisFree(probe);
  try {
    auto store = std::make_unique<gloo::rendezvous::RedisStore>(host, port);
    auto* raw = store.get();
    auto backing = std::make_unique<Backing>(
        Backing{std::move(store), [raw](const std::vector<std::string>& k) { return raw->check(k); }});
    return std::unique_ptr<RendezvousStore>(new RendezvousStore(address, prefix, std::move(backing)));
  } catch (const gloo::IoException& e) {
    // Gloo's message starts with its source location; the reason follows "Redis: ".
    std::string why = e.what();
    if (const size_t at = why.find("Redis: "); at != std::string::npos) why = why.substr(at + 7);
    return absl::UnavailableError(absl::StrCat("rendezvous store ", address, " is unreachable: ", why));
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("rendezvous store ", address, " is unreachable: ", e.what()));
  }
}

RendezvousStore::RendezvousStore(std::string address, std::string prefix, std::unique_ptr<Backing> backing)
    : address_(std::move(address)), prefix_(std::move(prefix)), backing_(std::move(backing)) {}

RendezvousStore::~RendezvousStore() = default;

void RendezvousStore::Set(const std::string& key, const std::vector<char>& data) {
  backing_->store->set(Key(key), data);
}

std::vector<char> RendezvousStore::Get(const std::string& key) { return backing_->store->get(Key(key)); }

void RendezvousStore::Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::vector<std::string> full;
  for (const std::string& k : keys) full.push_back(Key(k));
  backing_->store->wait(full, timeout);
}

bool RendezvousStore::Has(const std::string& key) { return backing_->has({Key(key)}); }

}  // namespace kiln::distributed
