// The backend names a message lists, built from backends/registry.h rather than written out,
// so that a test expecting them holds when a backend is added: "cpu, vulkan and cuda" (every
// backend kiln knows) and "cpu, vulkan" (those compiled into this build, in registry order).
#ifndef KILN_TESTS_BACKEND_NAMES_H_
#define KILN_TESTS_BACKEND_NAMES_H_

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backends/registry.h"

namespace kiln::testing {

// "a, b and c": the names joined as a sentence does.
inline std::string AsSentence(const std::vector<std::string>& names) {
  if (names.size() < 2) return absl::StrJoin(names, "");
  const std::vector<std::string> head(names.begin(), names.end() - 1);
  return absl::StrCat(absl::StrJoin(head, ", "), " and ", names.back());
}

// Every backend kiln knows, compiled in or not.
inline std::vector<std::string> KnownBackendNames() {
  std::vector<std::string> out;
  for (const KnownBackend& b : kKnownBackends) out.push_back(b.name);
  return out;
}

// The backends compiled into this build, the CPU one first.
inline std::vector<std::string> CompiledBackendNames() {
  std::vector<std::string> out;
  CompiledBackends::AnyOf([&]<class B>() {
    out.push_back(B::Name());
    return false;
  });
  return out;
}

// The known backends that this build lacks, with the --config that compiles each in.
inline std::vector<KnownBackend> MissingBackends() {
  std::vector<KnownBackend> out;
  for (const KnownBackend& b : kKnownBackends) {
    if (!CompiledBackends::Has(b.name)) out.push_back(b);
  }
  return out;
}

}  // namespace kiln::testing

#endif  // KILN_TESTS_BACKEND_NAMES_H_
