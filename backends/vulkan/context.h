// Context: one kiln Vulkan device (a logical device and its queue) and everything that runs on
// it. Kernels are recorded into a command buffer that is submitted in batches, with a barrier
// between dependent dispatches, not submitted and waited for one at a time; the host waits
// only when it reads a result. Memory comes from two pools (memory_pool.h): device memory, and
// host-visible staging memory for a device that does not share memory with the host.
#ifndef KILN_BACKENDS_VULKAN_CONTEXT_H_
#define KILN_BACKENDS_VULKAN_CONTEXT_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backends/vulkan/memory_pool.h"
#include "backends/vulkan/vk.h"
#include "backends/vulkan/vulkan_device.h"

namespace kiln::vulkan {

// Workgroup counts for `items` invocations in groups of `per_group`, spilling into y past the
// device's x limit (kernels rebuild the linear index; see common.glsl).
struct Groups {
  uint32_t x = 1, y = 1, z = 1;
};

class Context {
 public:
  // The context of an existing device; throws kiln::Error (with CheckDevice's status).
  static Context& Of(const VulkanDevice& device);

  const std::string& name() const { return name_; }
  bool has_f64() const { return has_f64_; }
  bool has_int64_atomics() const { return has_int64_atomics_; }
  // storageBuffer16BitAccess (Vulkan 1.1): what bf16 and f16 tensors need.
  bool has_16bit_storage() const { return has_16bit_storage_; }
  // Tests pretend the device lacks 16-bit storage, to see the error such a device gives.
  void set_has_16bit_storage_for_testing(bool on) { has_16bit_storage_ = on && has_16bit_storage_real_; }
  // Device memory held in blocks (in use or cached for reuse).
  int64_t reserved_bytes();

  // Uninitialised device memory for a tensor of `bytes` (>= 0), counted in tensor_memory().
  std::shared_ptr<Chunk> Allocate(int64_t bytes);
  // The bytes the device's tensors hold (what they asked for, not the pool's size classes).
  MemoryCounter& tensor_memory() { return tensor_memory_; }

  // Records kernel `kernel` (a name from compile_shaders.sh) with push constants `params`.
  void Launch(int kernel, const void* params, uint32_t params_size, Groups groups);
  // Workgroups of 256 for a kernel that loops over `items` (see Stride() in common.glsl):
  // enough to fill the device, no more. `Exact` gives one workgroup per `per_group` items,
  // for kernels whose workgroups each own a piece of the output.
  Groups Linear(int64_t items) const;
  Groups Exact(int64_t items, int64_t per_group) const;

  // Host <-> device. Upload targets a chunk no queued work uses (a fresh one); Download
  // waits for the queued work, then copies.
  void Upload(const Chunk& dst, const void* src, int64_t bytes);
  void Download(const Chunk& src, int64_t offset, void* dst, int64_t bytes);
  // Submits what is recorded and waits for all of it.
  void Finish();

  // Called by ~Chunk.
  void Release(Block* block, int64_t offset, int64_t bytes);

  // A logical device with one compute queue on `physical`; Unavailable when it lacks what
  // kiln needs (Vulkan 1.2 buffer device addresses, 64-bit integers in shaders).
  // KILN_VULKAN_MEMORY_LIMIT_MB=N caps the device memory this context holds (say, to share a
  // GPU between processes); past it allocations behave as if the device were full.
  static absl::StatusOr<std::unique_ptr<Context>> Create(VkPhysicalDevice physical, bool force_staging);
  Context() = default;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

 private:
  struct Submission {
    uint64_t seq;
    VkCommandBuffer commands;
    VkFence fence;
  };

  // From `pool`, waiting for queued work and giving cached blocks back when it is full; throws
  // ResourceExhausted when that does not help. Here, not in the pool: only the context can wait.
  std::shared_ptr<Chunk> AllocateFrom(MemoryPool& pool, int64_t bytes);
  VkCommandBuffer Open();
  void Barrier(VkCommandBuffer commands, bool to_host);
  void Submit();
  void Poll();
  void WaitFor(uint64_t seq);
  VkPipeline Pipeline(int kernel);

  std::recursive_mutex mu_;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkCommandPool command_pool_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  std::vector<VkPipeline> pipelines_;  // by kernel id, created on first use
  std::string name_;
  bool has_f64_ = false, has_int64_atomics_ = false;
  bool has_16bit_storage_ = false, has_16bit_storage_real_ = false;
  uint32_t max_groups_x_ = 65535, max_groups_y_ = 65535;
  int64_t fill_groups_ = 1024;  // workgroups that keep every core of the device busy
  bool mapped_ = false;         // device memory is host-visible: transfers are plain copies
  MemoryPool device_pool_, staging_pool_;
  MemoryCounter tensor_memory_;

  VkCommandBuffer open_ = VK_NULL_HANDLE;
  int open_ops_ = 0;
  uint64_t next_seq_ = 1, completed_ = 0;
  std::deque<Submission> in_flight_;
  std::vector<VkCommandBuffer> spare_commands_;
  std::vector<VkFence> spare_fences_;
};

// The id of a compiled kernel variant, e.g. KernelId("unary_f32"); throws Internal if absent.
int KernelId(absl::string_view name);

}  // namespace kiln::vulkan

#endif  // KILN_BACKENDS_VULKAN_CONTEXT_H_
