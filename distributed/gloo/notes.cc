// The process group's side channel for diagnostics (ExchangeNotes): the rendezvous store the
// ranks met at, which needs none of the group's connections, so it works after a failure that
// closed them. Keys are fresh per exchange (the caller numbers them), as a FileStore key cannot
// be written twice.
#include <thread>

#include "absl/strings/str_cat.h"
#include "distributed/gloo/gloo_process_group.h"
#include "distributed/process/rendezvous_store.h"

namespace kiln::distributed {

std::vector<std::optional<std::string>> GlooProcessGroup::ExchangeNotes(const std::string& key, const std::string& note,
                                                                        std::chrono::milliseconds wait) {
  std::lock_guard lock(notes_mu_);
  std::vector<std::optional<std::string>> notes(size_);
  notes[rank_] = note;
  if (size_ == 1) return notes;
  const auto at = [&](int r) { return absl::StrCat("notes/", key, "/", r); };
  try {
    store_->Set(at(rank_), std::vector<char>(note.begin(), note.end()));
  } catch (const std::exception&) {
    // Best effort: the others will not see this rank's note; it can still read theirs.
  }
  const auto deadline = std::chrono::steady_clock::now() + wait;
  int missing = size_ - 1;
  while (missing > 0) {
    for (int r = 0; r < size_; ++r) {
      if (notes[r].has_value()) continue;
      try {
        if (store_->Has(at(r))) {
          const std::vector<char> got = store_->Get(at(r));
          notes[r] = std::string(got.begin(), got.end());
          --missing;
        }
      } catch (const std::exception&) {
        // A store that fails now is as good as a silent peer.
      }
    }
    if (missing == 0 || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return notes;
}

}  // namespace kiln::distributed
