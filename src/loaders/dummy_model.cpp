#include "loaders/dummy_model.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "core/bf16.h"
#include "core/error.h"
#include "loaders/flint_tensors.h"
#include "loaders/make_model.h"
#include "model/nvfp4.h"

namespace striker {

namespace {

// The tensors that are NVFP4 in a quantised checkpoint (FLINT.md §3): every linear weight,
// i.e. attention, dense MLP, experts, shared expert and lm_head; not the router or embedding.
bool is_linear(const TensorSpec& s) {
  return s.role == TensorRole::InputProjection || s.role == TensorRole::ResidualProjection;
}

int64_t numel(const TensorSpec& s) {
  int64_t n = 1;
  for (int64_t d : s.shape) n *= d;
  return n;
}

int64_t host_bytes(const TensorSpec& s, LinearFormat format) {
  const int64_t n = numel(s);
  if (format == LinearFormat::nvfp4 && is_linear(s)) return n / 2 + n / nvfp4::kGroup;
  return n * int64_t(dtype_size(s.dtypes.front()));
}

int64_t read_meminfo_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kib * 1024;
  }
  return std::numeric_limits<int64_t>::max();
}

// cgroup v2: memory.max ("max" = unlimited) less memory.current.
int64_t read_cgroup_available() {
  std::ifstream max_in("/sys/fs/cgroup/memory.max"), cur_in("/sys/fs/cgroup/memory.current");
  std::string max_text;
  int64_t current = 0;
  if (!(max_in >> max_text) || max_text == "max" || !(cur_in >> current)) return std::numeric_limits<int64_t>::max();
  try {
    return std::stoll(max_text) - current;
  } catch (const std::exception&) {
    return std::numeric_limits<int64_t>::max();
  }
}

int64_t read_address_space_available() {
  rlimit lim{};
  if (getrlimit(RLIMIT_AS, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return std::numeric_limits<int64_t>::max();
  // Virtual size already mapped (code, heap, thread stacks): /proc/self/statm's first field, in pages.
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0;
  statm >> pages;
  return int64_t(lim.rlim_cur) - pages * int64_t(sysconf(_SC_PAGESIZE));
}

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / double(int64_t(1) << 30));
  return buf;
}

// One linear matrix as NVFP4: make-model's BF16 values, global scale amax/(6·448), each row
// quantised (ggml's rounding, as `striker quantize`) and repacked into the split layout.
void make_nvfp4(const TensorSpec& s, uint64_t seed, WeightView& v, std::vector<std::shared_ptr<void>>& keep,
                std::vector<uint16_t>& values, std::vector<float>& row, std::vector<uint8_t>& blocks) {
  const int64_t rows = s.shape[0], in = s.shape[1], n = rows * in;
  if (in % nvfp4::kBlockWeights != 0)
    throw Error("--load-format dummy --quantization nvfp4: tensor " + s.name + " has " + std::to_string(in) +
                " inputs, not a multiple of 64 (FLINT.md §3)");
  values.resize(size_t(n));
  fill_random_tensor(s, seed, 0, uint64_t(n), reinterpret_cast<std::byte*>(values.data()));
  float amax = 0.0f;
  for (uint16_t b : values) amax = std::fmax(amax, std::fabs(bf16_to_float(bf16{b})));
  const float scale2 = nvfp4::global_scale_for_amax(amax);
  std::shared_ptr<std::byte[]> buf(new std::byte[size_t(n / 2 + n / nvfp4::kGroup)]);
  auto* codes = reinterpret_cast<uint8_t*>(buf.get());
  uint8_t* scales = codes + n / 2;
  row.resize(size_t(in));
  blocks.resize(size_t(nvfp4::ggml_row_bytes(in)));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < in; ++i) row[size_t(i)] = bf16_to_float(bf16{values[size_t(r * in + i)]}) / scale2;
    nvfp4::quantize_row_to_ggml(row.data(), in, blocks.data());
    nvfp4::ggml_row_to_split(blocks.data(), in, codes + r * in / 2, scales + r * in / nvfp4::kGroup);
  }
  v.dtype = DType::NVFP4;
  v.data = buf.get();
  v.nbytes = size_t(n / 2);
  v.nvfp4_scales = buf.get() + n / 2;
  v.scale2 = scale2;
  keep.push_back(buf);
}

void make_plain(const TensorSpec& s, uint64_t seed, WeightView& v, std::vector<std::shared_ptr<void>>& keep) {
  const int64_t n = numel(s);
  v.dtype = s.dtypes.front();
  v.nbytes = size_t(n) * dtype_size(v.dtype);
  std::shared_ptr<std::byte[]> buf(new std::byte[v.nbytes]);
  fill_random_tensor(s, seed, 0, uint64_t(n), buf.get());
  v.data = buf.get();
  keep.push_back(buf);
}

}  // namespace

int64_t dummy_host_bytes(const FlintConfig& config, LinearFormat format) {
  int64_t total = 0;
  for (const auto& s : flint_tensor_specs(config)) total += host_bytes(s, format);
  return total;
}

int64_t host_memory_available() {
  return std::min({read_meminfo_available(), read_cgroup_available(), read_address_space_available()});
}

LoadedModel make_dummy_model(const FlintConfig& config, uint64_t seed, LinearFormat format) {
  const int64_t need = dummy_host_bytes(config, format);
  const int64_t have = host_memory_available();
  const int64_t spare = int64_t(1) << 30;
  if (need > have - spare)
    throw Error("--load-format dummy: random " + linear_format_name(format) + " weights for this config (" +
                std::to_string(config.num_hidden_layers) + " layers, hidden " + std::to_string(config.hidden_size) +
                ", " + std::to_string(config.n_routed_experts) + " experts) need " + gib(double(need)) +
                " of host memory, but only " + gib(double(have)) +
                " is available (1 GiB kept spare); use --device cuda or a smaller config");

  LoadedModel m;
  m.config = config;
  m.source = "dummy";
  const auto specs = flint_tensor_specs(config, &m.weights);
  // One slot of storage per tensor, so workers can fill them in parallel without locking.
  std::vector<std::vector<std::shared_ptr<void>>> owned(specs.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::string failure;
  auto worker = [&] {
    std::vector<uint16_t> values;
    std::vector<float> row;
    std::vector<uint8_t> blocks;
    for (size_t i; !failed && (i = next.fetch_add(1)) < specs.size();) {
      const TensorSpec& s = specs[i];
      WeightView& v = *s.slot;
      v.name = s.name;
      v.shape = s.shape;
      try {
        if (format == LinearFormat::nvfp4 && is_linear(s)) make_nvfp4(s, seed, v, owned[i], values, row, blocks);
        else make_plain(s, seed, v, owned[i]);
      } catch (const std::exception& e) {
        if (!failed.exchange(true)) failure = e.what();
      }
    }
  };
  const unsigned n_threads = std::clamp(std::thread::hardware_concurrency(), 1u, 16u);
  std::vector<std::thread> threads;
  for (unsigned t = 1; t < n_threads; ++t) threads.emplace_back(worker);
  worker();
  for (auto& th : threads) th.join();
  if (failed) throw Error(failure);
  for (auto& o : owned)
    for (auto& p : o) m.storage.push_back(std::move(p));
  return m;
}

}  // namespace striker
