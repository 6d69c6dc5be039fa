#include "distributed/gloo/mailbox.h"

#include <cstring>

#include "gloo/context.h"
#include "gloo/transport/buffer.h"
#include "gloo/transport/pair.h"

namespace kiln::distributed {

Mailbox::Mailbox(gloo::Context& context, int rank, int size) : context_(context), rank_(rank), size_(size) {
  window_slot_ = context_.nextSlot(size_);
  credit_slot_ = context_.nextSlot(size_);
  segment_bytes_ = kSegmentBytes / (size_ - 1) / kHeaderBytes * kHeaderBytes;
  windows_.resize(size_ * kWindow * PlaceBytes());
  claims_.resize(size_);
  credit_mem_.assign(2 * size_, 0);
  window_in_.resize(size_);
  claim_out_.resize(size_);
  credit_in_.resize(size_);
  credit_out_.resize(size_);
  used_.assign(size_, 0);
  credits_.assign(size_, 0);
  read_.assign(size_, 0);
  credit_sends_.assign(size_, 0);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    auto& pair = context_.getPair(r);
    window_in_[r] = pair->createRecvBuffer(window_slot_ + rank_, windows_.data() + r * kWindow * PlaceBytes(),
                                           kWindow * PlaceBytes());
    claim_out_[r] = pair->createSendBuffer(window_slot_ + r, claims_[r].data(), kHeaderBytes);
    credit_in_[r] = pair->createRecvBuffer(credit_slot_ + rank_, &credit_mem_[2 * r], sizeof(uint64_t));
    credit_out_[r] = pair->createSendBuffer(credit_slot_ + r, &credit_mem_[2 * r + 1], sizeof(uint64_t));
  }
}

Mailbox::~Mailbox() = default;

// Gloo sets a connection's SO_SNDBUF to the largest message sent through a registered buffer
// so far (which ends the kernel's autotuning of it), and unbound sends never raise it. Left to
// the first claim (64 bytes), every socket would stay at the kernel's minimum, ~4.6 KiB, and
// a large broadcast or all-gather (Gloo's algorithms, on unbound buffers), made before any
// all-reduce has sent a segment, would wait on delayed acks: 16 MiB took ~10 s. So each rank
// first sends every other one message of kSegmentBytes (the kernel doubles it, within
// net.core.wmem_max), into a buffer kept for just that.
void Mailbox::SizeSendBuffers() {
  std::vector<char> out(kSegmentBytes), in(kSegmentBytes);  // `in` takes every peer's, in turn
  std::vector<std::unique_ptr<gloo::transport::Buffer>> sends(size_), receives(size_);
  const uint64_t slot = context_.nextSlot(size_);
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) receives[r] = context_.getPair(r)->createRecvBuffer(slot + rank_, in.data(), in.size());
  }
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    sends[r] = context_.getPair(r)->createSendBuffer(slot + r, out.data(), out.size());
    sends[r]->send(0, out.size(), 0);
  }
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    receives[r]->waitRecv();
    sends[r]->waitSend();
  }
}

int64_t Mailbox::AcquirePlace(int to) {
  while (used_[to] - credits_[to] >= kWindow) {
    credit_in_[to]->waitRecv();
    ++credits_[to];
  }
  return static_cast<int64_t>(used_[to]++ % kWindow) * PlaceBytes();
}

void Mailbox::SendClaim(int to, const void* claim, size_t bytes) {
  std::memcpy(claims_[to].data(), claim, bytes);
  claim_out_[to]->send(0, kHeaderBytes, AcquirePlace(to));
}

void Mailbox::WaitClaims() {
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) claim_out_[r]->waitSend();
  }
}

std::unique_ptr<gloo::transport::Buffer> Mailbox::Source(int to, const void* data, int64_t bytes) {
  return context_.getPair(to)->createSendBuffer(window_slot_ + to, const_cast<void*>(data), bytes);
}

void Mailbox::SendSegment(gloo::transport::Buffer& source, int to, int64_t offset, int64_t bytes, bool in_claim) {
  const int64_t place = in_claim ? static_cast<int64_t>((used_[to] - 1) % kWindow) * PlaceBytes() : AcquirePlace(to);
  source.send(offset, bytes, place + kHeaderBytes);
}

const char* Mailbox::NextMessage(int from) {
  window_in_[from]->waitRecv();
  return windows_.data() + (from * kWindow + static_cast<int64_t>(read_[from] % kWindow)) * PlaceBytes();
}

void Mailbox::Release(int from, bool credit) {
  ++read_[from];
  if (!credit) return;
  credit_out_[from]->send(0, sizeof(uint64_t), 0);
  ++credit_sends_[from];
}

void Mailbox::WaitCredits() {
  for (int r = 0; r < size_; ++r) {
    for (; r != rank_ && credit_sends_[r] > 0; --credit_sends_[r]) credit_out_[r]->waitSend();
  }
}

}  // namespace kiln::distributed
