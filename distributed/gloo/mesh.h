// Connects the ranks of a run into Gloo's full mesh of TCP connections, each of which must
// prove the run token before Gloo reads a byte from it. Gloo's own connectFullMesh takes the
// first connection to arrive at a rank's listening port as the peer, and a peer that sends
// malformed frames can end the process from Gloo's event loop, so a stranger on the network
// must never become one: here a connection counts only after an HMAC challenge-response
// (distributed/process/run_token.h) naming the run's world size and both ranks. A connection that fails it is
// logged and closed, and the port keeps listening for the real peer until the deadline.
//
// Builds on the transport of Debian's libgloo (0.0~git20220518): the listening and connecting
// steps of gloo::transport::tcp::Pair are taken over through its protected members.
#ifndef KILN_DISTRIBUTED_GLOO_MESH_H_
#define KILN_DISTRIBUTED_GLOO_MESH_H_

#include <chrono>
#include <memory>
#include <string>

#include "distributed/process/rendezvous_store.h"
#include "gloo/context.h"
#include "gloo/transport/device.h"

namespace kiln::distributed {

struct MeshOptions {
  int rank = 0;
  int world_size = 1;
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  std::string token;  // the run's secret; every rank must hold the same
  // Where ignored connections are reported (one line each, at most a few per port); null:
  // nowhere.
  FILE* log = stderr;
};

// Throws like Gloo's connectFullMesh (gloo::IoException and friends) on a failure; a timeout's
// message says what this rank saw at the ports still waiting (e.g. a connection claiming to
// be the missing rank that held another token).
std::shared_ptr<gloo::Context> ConnectMesh(RendezvousStore& store,
                                           const std::shared_ptr<gloo::transport::Device>& device,
                                           const MeshOptions& options);

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_GLOO_MESH_H_
