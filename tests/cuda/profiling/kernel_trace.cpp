// A CUDA injection library that writes every kernel's device start and end time (CUPTI activity
// records, kernels running concurrently as they do in a replayed graph with PDL) to a CSV file.
// Nothing in striker changes: the driver loads it at cuInit when
//   CUDA_INJECTION64_PATH=libstriker_kernel_trace.so STRIKER_KERNEL_TRACE=out.csv striker bench latency ...
// scripts/step_timeline.py turns the CSV into each kernel's share of a decode step: the time from
// its predecessor's end to its own end, which is what it costs on the step's dependent chain
// (ncu replays each kernel alone and cannot say that).
#include <cupti.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct KernelRecord {
  uint64_t start, end, queued;
  uint32_t graph_id, stream_id, correlation;
  int32_t grid_x, grid_y, grid_z, block_x, smem;
  std::string name;
};

std::mutex g_mu;
std::vector<KernelRecord> g_records;
const char* g_path = nullptr;
constexpr size_t kBufferBytes = 8u << 20;

void check(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* msg = nullptr;
  cuptiGetResultString(r, &msg);
  std::fprintf(stderr, "kernel_trace: %s failed: %s\n", what, msg ? msg : "?");
}

// Template arguments make the names long; the function name without its arguments is the family.
std::string short_name(const char* mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string s = status == 0 && d ? d : mangled;
  std::free(d);
  // "(anonymous namespace)" holds the first '(' of most names: drop it before cutting the arguments,
  // and the return type of a template's name ("void ").
  for (std::string anon = "(anonymous namespace)::"; ;) {
    const auto a = s.find(anon);
    if (a == std::string::npos) break;
    s.erase(a, anon.size());
  }
  if (const auto p = s.find('('); p != std::string::npos) s.resize(p);
  if (s.rfind("void ", 0) == 0) s.erase(0, 5);
  for (auto& c : s)
    if (c == ',') c = ';';  // the CSV's separator
  return s;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  std::vector<KernelRecord> got;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
    got.push_back({k->start, k->end, k->queued, k->graphId, k->streamId, k->correlationId, k->gridX, k->gridY,
                   k->gridZ, k->blockX, k->dynamicSharedMemory + k->staticSharedMemory, short_name(k->name)});
  }
  std::free(buffer);
  std::lock_guard lock(g_mu);
  g_records.insert(g_records.end(), got.begin(), got.end());
}

void write_csv() {
  check(cuptiActivityFlushAll(1), "cuptiActivityFlushAll");
  std::lock_guard lock(g_mu);
  FILE* f = std::fopen(g_path, "w");
  if (!f) {
    std::fprintf(stderr, "kernel_trace: cannot write %s\n", g_path);
    return;
  }
  std::fprintf(f, "start_ns,end_ns,graph_id,stream_id,correlation,grid_x,grid_y,grid_z,block_x,smem,name\n");
  for (const auto& r : g_records)
    std::fprintf(f, "%llu,%llu,%u,%u,%u,%d,%d,%d,%d,%d,%s\n", (unsigned long long)r.start,
                 (unsigned long long)r.end, r.graph_id, r.stream_id, r.correlation, r.grid_x, r.grid_y, r.grid_z,
                 r.block_x, r.smem, r.name.c_str());
  std::fclose(f);
  std::fprintf(stderr, "kernel_trace: %zu kernels -> %s\n", g_records.size(), g_path);
}

}  // namespace

// Called by the CUDA driver when CUDA_INJECTION64_PATH names this library.
extern "C" int InitializeInjection() {
  g_path = std::getenv("STRIKER_KERNEL_TRACE");
  if (!g_path || !*g_path) g_path = "kernel_trace.csv";
  check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "cuptiActivityEnable(CONCURRENT_KERNEL)");
  std::atexit(write_csv);
  return 1;
}
