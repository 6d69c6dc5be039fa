// RendezvousDirOwner (tools/launch_rendezvous_dir.h) on any folder name found in TMPDIR: a pid
// only for exactly the names launch gives its folders, which the pid and suffix write back to
// the same name; nothing else is ever taken for a stale folder.
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tools/launch_rendezvous_dir.h"

namespace {

void Require(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view name(reinterpret_cast<const char*>(data), size);
  const auto owner = kiln::launch::RendezvousDirOwner(name);
  if (!owner) return 0;
  Require(*owner > 1 && name.size() >= 6);
  const std::string_view suffix = name.substr(name.size() - 6);
  for (const char c : suffix) Require(std::isalnum(static_cast<unsigned char>(c)) != 0);
  Require(name == "kiln-launch-" + std::to_string(*owner) + "-" + std::string(suffix));
  return 0;
}
