#include "distributed/gloo/mesh.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "distributed/process/run_token.h"
#include "gloo/common/error.h"
#include "gloo/transport/tcp/address.h"
#include "gloo/transport/tcp/context.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/transport/tcp/loop.h"
#include "gloo/transport/tcp/pair.h"

namespace kiln::distributed {
namespace {

namespace tcp = gloo::transport::tcp;

// The handshake, on a new connection before Gloo sees it (all integers little-endian):
//   client -> server  hello:     "KILNAUTH", version, world size, client rank, server rank,
//                                32 random bytes                               (56 bytes)
//   server -> client  challenge: "KILNAUTH", 32 random bytes,
//                                HMAC(token, "kiln server" hello nonce)        (72 bytes)
//   client -> server  proof:     HMAC(token, "kiln client" hello nonce)        (32 bytes)
//   server -> client  verdict:   'K' (or the connection closes)                (1 byte)
// Both sides answer a challenge the other just made up, so a recorded exchange is worth
// nothing, and the two labels keep one side's answer from serving as the other's.
constexpr char kMagic[] = "KILNAUTH";
constexpr size_t kMagicBytes = 8;
constexpr uint32_t kVersion = 1;
constexpr size_t kNonceBytes = 32;
constexpr size_t kHelloBytes = kMagicBytes + 4 * 4 + kNonceBytes;
constexpr size_t kChallengeBytes = kMagicBytes + kNonceBytes + sizeof(Mac);
constexpr size_t kProofBytes = sizeof(Mac);
constexpr char kAccepted = 'K';
// Connections a port keeps in their handshake at once; a newer one evicts the oldest.
constexpr size_t kMaxCandidates = 16;
// Ignored connections reported per port; the rest are counted.
constexpr int kMaxLogged = 3;

void PutU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

uint32_t GetU32(absl::string_view in, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(in[at + i]);
  return v;
}

absl::string_view AsView(const Mac& mac) { return {reinterpret_cast<const char*>(mac.data()), mac.size()}; }

std::string Nonce() {
  std::string nonce(kNonceBytes, '\0');
  if (!RandomBytes(nonce.data(), nonce.size())) GLOO_THROW_IO_EXCEPTION("getrandom: ", std::strerror(errno));
  return nonce;
}

Mac ServerMac(const std::string& token, absl::string_view hello, absl::string_view nonce) {
  return Hmac(token, absl::StrCat("kiln server", hello, nonce));
}

Mac ClientMac(const std::string& token, absl::string_view hello, absl::string_view nonce) {
  return Hmac(token, absl::StrCat("kiln client", hello, nonce));
}

// Reads into `buffer` until it holds `want` bytes. Returns false when the connection ended or
// failed (`why` says how); true otherwise, also when no more bytes are there yet.
bool ReadUpTo(int fd, std::string& buffer, size_t want, std::string* why) {
  while (buffer.size() < want) {
    char chunk[128];
    const ssize_t n = ::recv(fd, chunk, std::min(sizeof(chunk), want - buffer.size()), MSG_DONTWAIT);
    if (n > 0) {
      buffer.append(chunk, static_cast<size_t>(n));
    } else if (n == 0) {
      *why = "closed";
      return false;
    } else if (errno == EINTR) {
      continue;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return true;
    } else {
      *why = std::strerror(errno);
      return false;
    }
  }
  return true;
}

// Handshake messages are far below a fresh socket's buffer, so a send either goes whole or
// the connection is unusable.
bool SendWhole(int fd, absl::string_view bytes) {
  while (true) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    return n == static_cast<ssize_t>(bytes.size());
  }
}

std::string PeerName(int fd) {
  try {
    return tcp::Address::fromPeerName(fd).str();
  } catch (const std::exception&) {
    return "an unknown address";
  }
}

// What every pair of this rank's mesh knows.
struct MeshFacts {
  int rank;
  int world_size;
  std::string token;
  FILE* log;
};

// A tcp::Pair whose listening side accepts connections itself, keeps each in the handshake
// until it proves the token, and only then hands it to Gloo; whose connecting side proves the
// token before Gloo sends a frame. Everything else is Gloo's.
class TokenPair final : public tcp::Pair {
 public:
  TokenPair(tcp::Context* context, tcp::Device* device, int peer, std::chrono::milliseconds timeout,
            const MeshFacts* facts)
      : tcp::Pair(context, device, peer, timeout), facts_(facts) {}

  ~TokenPair() override {
    std::lock_guard lock(m_);
    closing_ = true;
    for (auto& c : candidates_) Drop(*c);
    // A candidate dropped by the event loop may still have an event in the batch the loop is
    // running; wait for that batch to end before the candidates go.
    if (!candidates_.empty()) WaitForLoopTick();
  }

  // Until Gloo's constructor returned, its own handler could have accepted a connection;
  // false if it did (then this pair must not be used). Makes the listening socket
  // non-blocking, for accepting in the event loop.
  bool Guard() {
    std::lock_guard lock(m_);
    if (state_ != LISTENING) return false;
    return fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK) == 0;
  }

  void handleEvents(int events) override {
    {
      std::unique_lock lock(m_, std::try_to_lock);
      if (!lock) return;  // as Gloo does: another thread is changing this pair
      if (state_ == LISTENING) return AcceptAll();
      if (state_ == CONNECTING) return ProveToServer(events);
    }
    tcp::Pair::handleEvents(events);
  }

  // What this port ignored (for the message of a rank that never connected).
  std::string Notes() {
    std::lock_guard lock(m_);
    if (ignored_ == 0) return "";
    return absl::StrCat("; this rank ignored ", ignored_, " connection(s) at its port for rank ", rank_,
                        ", the last: ", last_ignored_);
  }

 private:
  struct Candidate final : tcp::Handler {
    TokenPair* owner = nullptr;
    int fd = -1;
    uint64_t serial = 0;  // order of arrival: the oldest is evicted first
    std::string from, hello, challenge_nonce, proof;
    bool proven = false;
    void handleEvents(int) override { owner->OnCandidate(*this); }
  };

  // Listening side (m_ held, event loop).
  void AcceptAll() {
    while (true) {
      sockaddr_storage addr{};
      socklen_t length = sizeof(addr);
      const int fd = accept4(fd_, reinterpret_cast<sockaddr*>(&addr), &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
          Note("the listening socket", absl::StrCat("accept failed: ", std::strerror(errno)));
        }
        return;
      }
      Candidate& c = FreeCandidate();
      c.fd = fd;
      c.serial = ++serial_;
      c.from = PeerName(fd);
      c.hello.clear();
      c.proof.clear();
      c.proven = false;
      device_->registerDescriptor(fd, EPOLLIN, &c);
    }
  }

  Candidate& FreeCandidate() {
    Candidate* oldest = nullptr;
    for (auto& c : candidates_) {
      if (c->fd < 0) return *c;
      if (oldest == nullptr || c->serial < oldest->serial) oldest = c.get();
    }
    if (candidates_.size() < kMaxCandidates) {
      candidates_.push_back(std::make_unique<Candidate>());
      candidates_.back()->owner = this;
      return *candidates_.back();
    }
    Ignore(*oldest, "held the port without finishing the handshake");
    return *oldest;
  }

  // A candidate's connection is readable. Its fields belong to m_.
  void OnCandidate(Candidate& c) {
    // Busy: the descriptors are level-triggered, so the unread bytes call again next tick.
    std::unique_lock lock(m_, std::try_to_lock);
    if (!lock) return;
    if (c.fd < 0) return;  // dropped earlier in this batch of events
    if (closing_ || state_ != LISTENING) return Drop(c);
    std::string why;
    if (c.hello.size() < kHelloBytes) {
      if (!ReadUpTo(c.fd, c.hello, kHelloBytes, &why)) return Ignore(c, absl::StrCat(why, " before its hello"));
      if (c.hello.size() < kHelloBytes) return;
      if (absl::string_view(c.hello).substr(0, kMagicBytes) != absl::string_view(kMagic, kMagicBytes) ||
          GetU32(c.hello, 8) != kVersion) {
        return Ignore(c, "does not speak kiln's handshake");
      }
      const uint32_t world = GetU32(c.hello, 12), client = GetU32(c.hello, 16), server = GetU32(c.hello, 20);
      if (world != static_cast<uint32_t>(facts_->world_size) || client != static_cast<uint32_t>(rank_) ||
          server != static_cast<uint32_t>(facts_->rank)) {
        return Ignore(c, absl::StrCat("claims to be rank ", client, " of ", world, " calling rank ", server,
                                      ", but this port is rank ", facts_->rank, "'s for rank ", rank_, " of ",
                                      facts_->world_size));
      }
      c.challenge_nonce = Nonce();
      const std::string challenge = absl::StrCat(absl::string_view(kMagic, kMagicBytes), c.challenge_nonce,
                                                 AsView(ServerMac(facts_->token, c.hello, c.challenge_nonce)));
      if (!SendWhole(c.fd, challenge)) return Ignore(c, "could not be sent its challenge");
    }
    if (!c.proven) {
      if (!ReadUpTo(c.fd, c.proof, kProofBytes, &why)) return Ignore(c, absl::StrCat(why, " before its proof"));
      if (c.proof.size() < kProofBytes) return;
      Mac proof;
      std::memcpy(proof.data(), c.proof.data(), proof.size());
      if (!SameMac(proof, ClientMac(facts_->token, c.hello, c.challenge_nonce))) {
        return Ignore(c, absl::StrCat("claims to be rank ", rank_,
                                      " but does not hold this run's token "
                                      "(KILN_RUN_TOKEN differs)"));
      }
      c.proven = true;
    }
    if (!SendWhole(c.fd, absl::string_view(&kAccepted, 1))) return Ignore(c, "could not be sent its verdict");
    // The peer: Gloo's listening socket goes, the proven connection takes its place.
    device_->unregisterDescriptor(c.fd, &c);
    device_->unregisterDescriptor(fd_, this);
    ::close(fd_);
    fd_ = c.fd;
    c.fd = -1;
    for (auto& other : candidates_) Drop(*other);
    handleConnected();
  }

  void Ignore(Candidate& c, const std::string& why) {
    Note(c.from, why);
    Drop(c);
  }

  void Note(const std::string& from, const std::string& why) {
    last_ignored_ = absl::StrCat("from ", from, ": ", why);
    if (++ignored_ <= kMaxLogged && facts_->log != nullptr) {
      std::fprintf(facts_->log, "kiln: process group rank %d: ignored a connection at the port for rank %d %s%s\n",
                   facts_->rank, rank_, last_ignored_.c_str(),
                   ignored_ == kMaxLogged ? " (further ones are counted, not shown)" : "");
    }
  }

  void Drop(Candidate& c) {
    if (c.fd < 0) return;
    device_->unregisterDescriptor(c.fd, &c);
    ::close(c.fd);
    c.fd = -1;
  }

  // Registers and unregisters a descriptor: unregistering from another thread returns after
  // the event loop finished the batch of events it was handling.
  void WaitForLoopTick() {
    struct Idle final : tcp::Handler {
      void handleEvents(int) override {}
    } idle;
    const int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (fd < 0) return;
    device_->registerDescriptor(fd, EPOLLIN, &idle);
    device_->unregisterDescriptor(fd, &idle);
    ::close(fd);
  }

  // Connecting side (m_ held, event loop).
  void ProveToServer(int events) {
    std::string why;
    if (hello_.empty()) {
      if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
      for (auto& c : candidates_) Drop(*c);  // Gloo closed this side's port: nobody waits there now
      int error = 0;
      socklen_t length = sizeof(error);
      if (getsockopt(fd_, SOL_SOCKET, SO_ERROR, &error, &length) != 0) error = errno;
      if (error != 0) return signalException(GLOO_ERROR_MSG("connect ", peer_.str(), ": ", std::strerror(error)));
      hello_.assign(kMagic, kMagicBytes);
      PutU32(hello_, kVersion);
      PutU32(hello_, static_cast<uint32_t>(facts_->world_size));
      PutU32(hello_, static_cast<uint32_t>(facts_->rank));
      PutU32(hello_, static_cast<uint32_t>(rank_));
      hello_ += Nonce();
      if (!SendWhole(fd_, hello_)) {
        return signalException(GLOO_ERROR_MSG("connect ", peer_.str(), ": the handshake could not be sent"));
      }
      device_->registerDescriptor(fd_, EPOLLIN, this);  // only the answer matters now
      return;
    }
    const std::string who = absl::StrCat("rank ", rank_, "'s port at ", peer_.str());
    if (challenge_.size() < kChallengeBytes) {
      if (!ReadUpTo(fd_, challenge_, kChallengeBytes, &why)) {
        return signalException(GLOO_ERROR_MSG(who, " refused this rank's handshake (", why,
                                              "): are both started with the same world size?"));
      }
      if (challenge_.size() < kChallengeBytes) return;
      const absl::string_view nonce = absl::string_view(challenge_).substr(kMagicBytes, kNonceBytes);
      Mac mac;
      std::memcpy(mac.data(), challenge_.data() + kMagicBytes + kNonceBytes, mac.size());
      if (absl::string_view(challenge_).substr(0, kMagicBytes) != absl::string_view(kMagic, kMagicBytes) ||
          !SameMac(mac, ServerMac(facts_->token, hello_, nonce))) {
        return signalException(
            GLOO_ERROR_MSG(who,
                           " does not hold this run's token: the ranks were given different KILN_RUN_TOKEN values, or "
                           "another process answered there"));
      }
      if (!SendWhole(fd_, AsView(ClientMac(facts_->token, hello_, nonce)))) {
        return signalException(GLOO_ERROR_MSG(who, ": the proof could not be sent"));
      }
    }
    std::string verdict;
    if (!ReadUpTo(fd_, verdict, 1, &why) || (!verdict.empty() && verdict[0] != kAccepted)) {
      return signalException(GLOO_ERROR_MSG(who,
                                            " refused this rank's proof of the run token: the ranks were "
                                            "given different KILN_RUN_TOKEN values"));
    }
    if (verdict.empty()) return;
    handleConnected();
  }

  const MeshFacts* const facts_;
  bool closing_ = false;
  std::vector<std::unique_ptr<Candidate>> candidates_;
  uint64_t serial_ = 0;
  int ignored_ = 0;
  std::string last_ignored_;
  std::string hello_, challenge_;  // the connecting side's handshake
};

// A tcp::Context whose pairs are TokenPairs.
class TokenContext final : public tcp::Context {
 public:
  TokenContext(std::shared_ptr<tcp::Device> device, MeshFacts facts)
      : tcp::Context(std::move(device), facts.rank, facts.world_size), facts_(std::move(facts)) {}

  std::unique_ptr<gloo::transport::Pair>& createPair(int peer) override {
    for (int attempt = 0; attempt < 3; ++attempt) {
      auto pair = std::make_unique<TokenPair>(this, device_.get(), peer, getTimeout(), &facts_);
      if (pair->Guard()) {
        pairs_[peer] = std::move(pair);
        return pairs_[peer];
      }
    }
    GLOO_THROW_IO_EXCEPTION("a connection reached the port for rank ", peer, " before it was guarded, three times");
  }

  std::string Notes(int peer) { return static_cast<TokenPair*>(pairs_[peer].get())->Notes(); }

 private:
  const MeshFacts facts_;  // the pairs point here
};

// gloo::Context over a transport context made here (Gloo's own fills it in connectFullMesh).
class MeshContext final : public gloo::Context {
 public:
  MeshContext(int rank, int size, std::shared_ptr<gloo::transport::Device> device,
              std::shared_ptr<gloo::transport::Context> transport)
      : gloo::Context(rank, size) {
    device_ = std::move(device);
    transportContext_ = std::move(transport);
  }
};

std::string Key(int rank) { return absl::StrCat("mesh/", rank); }

}  // namespace

std::shared_ptr<gloo::Context> ConnectMesh(RendezvousStore& store,
                                           const std::shared_ptr<gloo::transport::Device>& device,
                                           const MeshOptions& o) {
  auto tcp_device = std::dynamic_pointer_cast<tcp::Device>(device);
  GLOO_ENFORCE(tcp_device != nullptr, "ConnectMesh needs Gloo's TCP transport");
  auto transport = std::make_shared<TokenContext>(tcp_device, MeshFacts{o.rank, o.world_size, o.token, o.log});
  transport->setTimeout(o.timeout);

  // Each rank publishes its world size and its listening address for every other rank.
  std::string record;
  PutU32(record, static_cast<uint32_t>(o.world_size));
  size_t address_bytes = 0;
  for (int r = 0; r < o.world_size; ++r) {
    if (r == o.rank) continue;
    const std::vector<char> bytes = transport->createPair(r)->address().bytes();
    address_bytes = bytes.size();
    record.append(bytes.begin(), bytes.end());
  }
  store.Set(Key(o.rank), std::vector<char>(record.begin(), record.end()));

  for (int r = 0; r < o.world_size; ++r) {
    if (r == o.rank) continue;
    store.Wait({Key(r)}, o.timeout);
    const std::vector<char> theirs = store.Get(Key(r));
    const absl::string_view view(theirs.data(), theirs.size());
    if (view.size() < 4 || GetU32(view, 0) != static_cast<uint32_t>(o.world_size) ||
        view.size() != 4 + address_bytes * (o.world_size - 1)) {
      GLOO_THROW_IO_EXCEPTION("rank ", r, " published its addresses for a world size of ",
                              view.size() < 4 ? 0 : GetU32(view, 0), ", not ", o.world_size,
                              ": every rank must be started with the same world size");
    }
    const size_t index = o.rank < r ? o.rank : o.rank - 1;  // r lists every rank but itself
    const size_t at = 4 + index * address_bytes;
    try {
      transport->getPair(r)->connect(std::vector<char>(theirs.begin() + at, theirs.begin() + at + address_bytes));
    } catch (const gloo::IoException& e) {
      throw gloo::IoException(absl::StrCat(e.what(), transport->Notes(r)));
    }
  }
  auto context = std::make_shared<MeshContext>(o.rank, o.world_size, device, std::move(transport));
  context->setTimeout(o.timeout);
  return context;
}

}  // namespace kiln::distributed
