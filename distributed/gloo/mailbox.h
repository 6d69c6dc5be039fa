// The credit-windowed mailbox of a Gloo process group: every rank keeps, for each other, a
// window of kWindow places that the other writes into directly with Gloo's registered buffers
// (one socket write per message, no notices), and hands a place back with an 8-byte credit
// once it has read it. A place holds a claim (its first kHeaderBytes), a segment (the rest),
// or both; the agreement (agreement.cc) and the direct reduce (direct_reduce.cc) talk through it.
#ifndef KILN_DISTRIBUTED_GLOO_MAILBOX_H_
#define KILN_DISTRIBUTED_GLOO_MAILBOX_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace gloo {
class Context;
namespace transport {
class Buffer;
}  // namespace transport
}  // namespace gloo

namespace kiln::distributed {

class Mailbox {
 public:
  // The segments in flight towards a rank at once (kWindow per sender) are at most
  // kWindow * kSegmentBytes.
  static constexpr int64_t kSegmentBytes = int64_t{1} << 20;
  static constexpr int kWindow = 2;
  static constexpr int64_t kHeaderBytes = 64;

  // Takes two slots of `context` (every rank takes its slots in the same order, so they match
  // across ranks) and registers the windows, claims and credits on every connection. For
  // worlds of two or more; `context` outlives the mailbox. Throws like Gloo.
  Mailbox(gloo::Context& context, int rank, int size);
  ~Mailbox();
  Mailbox(const Mailbox&) = delete;
  Mailbox& operator=(const Mailbox&) = delete;

  // Gives each connection's send buffer a fixed size at once (see the .cc). Takes a slot, so
  // every rank calls it at the same point; throws like Gloo.
  void SizeSendBuffers();

  // Bytes of a segment at most: kSegmentBytes shared among the senders, in whole headers.
  int64_t segment_bytes() const { return segment_bytes_; }

  // Sender side; every call may throw like Gloo.
  // Sends `bytes` (at most kHeaderBytes) at `claim` into the next free place in `to`'s window,
  // waiting for a credit while all are taken; a segment may fill the rest of that place
  // (SendSegment with `in_claim`).
  void SendClaim(int to, const void* claim, size_t bytes);
  // Waits until every claim sent has left (before the next one changes its buffer).
  void WaitClaims();
  // Registers `bytes` of the caller's memory at `data` as a source of segments towards `to`,
  // for one call.
  std::unique_ptr<gloo::transport::Buffer> Source(int to, const void* data, int64_t bytes);
  // Sends source[offset, offset + bytes) (at most segment_bytes()) into `to`'s window: into
  // the place that the last claim towards `to` opened (`in_claim`), or the next free one.
  void SendSegment(gloo::transport::Buffer& source, int to, int64_t offset, int64_t bytes, bool in_claim);

  // Receiver side.
  // Waits for the next message from `from` (a claim, a segment, or the segment that follows a
  // claim into its place) and returns its place: a claim at the start, a segment
  // kHeaderBytes in.
  const char* NextMessage(int from);
  const char* NextSegment(int from) { return NextMessage(from) + kHeaderBytes; }
  // Hands the place read last from `from` back to it (a credit); without `credit`, only moves
  // on (the closing agreement, after which `from` sends nothing).
  void Release(int from, bool credit = true);
  // Waits until every credit sent has left (before the next one changes its buffer).
  void WaitCredits();

 private:
  int64_t PlaceBytes() const { return kHeaderBytes + segment_bytes_; }
  // The next free place in `to`'s window (waits for a credit while all are taken), as a byte
  // offset there.
  int64_t AcquirePlace(int to);

  gloo::Context& context_;
  const int rank_, size_;
  // Gloo slots: a rank receives on base + its rank and sends on base + the receiver's (Gloo
  // unregisters a slot on a connection when any buffer of that slot goes, sends included).
  uint64_t window_slot_ = 0, credit_slot_ = 0;
  int64_t segment_bytes_ = 0;
  std::vector<char> windows_;                           // by sender: kWindow places
  std::vector<std::array<char, kHeaderBytes>> claims_;  // by receiver: this rank's claim
  std::vector<uint64_t> credit_mem_;                    // a credit's 8 bytes
  std::vector<std::unique_ptr<gloo::transport::Buffer>> window_in_, claim_out_, credit_in_, credit_out_;
  std::vector<uint64_t> used_, credits_, read_;  // places taken in / credits from / messages read from, by rank
  std::vector<int> credit_sends_;                // credits not yet waited for, by rank
};

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_GLOO_MAILBOX_H_
