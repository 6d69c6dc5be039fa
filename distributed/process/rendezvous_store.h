// The rendezvous store of a process group: a shared directory (file:///shared/dir) or a Redis
// server (redis://host:port), chosen by one address. kiln's own type: Gloo's FileStore and
// RedisStore (Debian's libgloo has it compiled in) do the work behind it, which only
// rendezvous_store.cc sees. Keys live under a prefix per run, so runs that share a store do
// not read each other's keys. Adds what Gloo's Store lacks for a clear rendezvous: a presence
// check, to name the ranks that never joined.
#ifndef KILN_DISTRIBUTED_PROCESS_RENDEZVOUS_STORE_H_
#define KILN_DISTRIBUTED_PROCESS_RENDEZVOUS_STORE_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln::distributed {

class RendezvousStore {
 public:
  // InvalidArgument: a malformed address. FailedPrecondition: a directory that cannot be
  // created or written. Unavailable: a Redis server that does not answer.
  static absl::StatusOr<std::unique_ptr<RendezvousStore>> Open(const std::string& address, const std::string& run_id);
  ~RendezvousStore();
  RendezvousStore(const RendezvousStore&) = delete;
  RendezvousStore& operator=(const RendezvousStore&) = delete;

  // Under this run's prefix. A store that fails throws as Gloo's stores do (gloo::IoException
  // and friends, which distributed/gloo/errors.h turns into statuses); so does Wait when the
  // keys are not all set within `timeout`.
  void Set(const std::string& key, const std::vector<char>& data);
  std::vector<char> Get(const std::string& key);
  void Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  // Whether `key` is set.
  bool Has(const std::string& key);

  const std::string& address() const { return address_; }

 private:
  struct Backing;  // Gloo's store and its presence check (rendezvous_store.cc)
  RendezvousStore(std::string address, std::string prefix, std::unique_ptr<Backing> backing);
  std::string Key(const std::string& key) const { return prefix_ + key; }

  const std::string address_;
  const std::string prefix_;
  const std::unique_ptr<Backing> backing_;
};

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_PROCESS_RENDEZVOUS_STORE_H_
