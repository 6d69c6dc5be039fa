#include "distributed/process/run_token.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>

#include <cerrno>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace kiln::distributed {

Mac Hmac(absl::string_view key, absl::string_view message) {
  Mac out{};
  unsigned int length = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(message.data()),
       message.size(), out.data(), &length);
  return out;
}

bool SameMac(const Mac& a, const Mac& b) { return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0; }

bool RandomBytes(void* out, size_t n) {
  auto* p = static_cast<unsigned char*>(out);
  while (n > 0) {
    const ssize_t got = getrandom(p, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

std::string DefaultRunToken(absl::string_view run_id, absl::string_view rendezvous) {
  const Mac mac = Hmac("kiln default run token v1", absl::StrCat(run_id, "\n", rendezvous));
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(mac.data()), mac.size()));
}

}  // namespace kiln::distributed
