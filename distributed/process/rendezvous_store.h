// The rendezvous store of a process group: Gloo's FileStore (file:///shared/dir) or Gloo's
// RedisStore (redis://host:port; Debian's libgloo has it compiled in), chosen by one address.
// Keys live under a prefix per run, so runs that share a store do not read each other's keys.
// Adds what Gloo's Store lacks for a clear rendezvous: a presence check, to name the ranks
// that never joined.
#ifndef KILN_DISTRIBUTED_PROCESS_RENDEZVOUS_STORE_H_
#define KILN_DISTRIBUTED_PROCESS_RENDEZVOUS_STORE_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gloo/rendezvous/store.h"

namespace kiln::distributed {

class RendezvousStore : public gloo::rendezvous::Store {
 public:
  // InvalidArgument: a malformed address. FailedPrecondition: a directory that cannot be
  // created or written. Unavailable: a Redis server that does not answer.
  static absl::StatusOr<std::unique_ptr<RendezvousStore>> Open(const std::string& address, const std::string& run_id);

  // gloo::rendezvous::Store, under this run's prefix (Gloo's connectFullMesh uses these).
  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

  // Whether `key` is set (may throw gloo::IoException, as the other calls).
  bool Has(const std::string& key);

  const std::string& address() const { return address_; }

 private:
  RendezvousStore(std::string address, std::string prefix, std::unique_ptr<gloo::rendezvous::Store> base,
                  std::function<bool(const std::vector<std::string>&)> check)
      : address_(std::move(address)), prefix_(std::move(prefix)), base_(std::move(base)), check_(std::move(check)) {}
  std::string Key(const std::string& key) const { return prefix_ + key; }

  const std::string address_;
  const std::string prefix_;
  std::unique_ptr<gloo::rendezvous::Store> base_;
  std::function<bool(const std::vector<std::string>&)> check_;
};

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_PROCESS_RENDEZVOUS_STORE_H_
