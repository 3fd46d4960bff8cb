// gdn_host_cost_lab: where the host time of one plain decode call goes (issue 3's budget: a plain
// launch from C++ at most 8 us of host time). Decode B = 1 (Hk 16, Hv 32, K = V = 128, bf16
// inputs, f32 state in place), timed two ways:
//   idle:  the stream synchronised before each timed call, as `gdn bench` times decode-B1-vk-plain
//          (an event recorded, the call, an event, a synchronise);
//   busy:  calls back to back, a synchronise every 100 (as the HostCost.PlainLaunch test).
// The same call over 256 input sets in turn (each buffer its own allocation), as gdn bench's
// decode-B1-vk-plain rotates them, and on sets no call took before. Beside the whole call: its
// parts (the pointer-kind query through the runtime and through the driver, the device query, an
// empty kernel's launch with and without the early-launch attribute, through the runtime and
// through the driver with the kernel's handle, gdn_forward_can_implement). Prints one line a
// measurement (median and 90th percentile, us); with --json FILE also writes them as JSON.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gdn/gdn.h"

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

__global__ void empty_kernel() {}

struct Figure {
  std::string name;
  double median_us, p90_us;
};

// `call` timed `calls` times; idle: the stream drained (an event before, one after) around each.
Figure time_host(const std::string& name, const std::function<void()>& call, cudaStream_t stream, bool idle,
                 int calls = 2000, int warmup = 50) {
  cudaEvent_t before, after;
  check(cudaEventCreate(&before), "cudaEventCreate");
  check(cudaEventCreate(&after), "cudaEventCreate");
  for (int i = 0; i < warmup; ++i) call();
  check(cudaStreamSynchronize(stream), "warm-up");
  std::vector<double> us;
  for (int i = 0; i < calls; ++i) {
    if (idle) cudaEventRecord(before, stream);
    const auto start = std::chrono::steady_clock::now();
    call();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    if (idle) {
      cudaEventRecord(after, stream);
      cudaEventSynchronize(after);
    } else if (i % 100 == 99) {
      cudaStreamSynchronize(stream);
    }
  }
  check(cudaStreamSynchronize(stream), name.c_str());
  cudaEventDestroy(before);
  cudaEventDestroy(after);
  std::sort(us.begin(), us.end());
  return {name + (idle ? " (idle)" : " (busy)"), us[us.size() / 2], us[us.size() * 9 / 10]};
}

void* device_random(size_t count, size_t elem, std::mt19937& rng) {
  std::vector<unsigned char> host(count * elem);
  std::normal_distribution<float> nd(0.f, 0.3f);
  for (size_t i = 0; i < count; ++i) {
    const float x = nd(rng);
    if (elem == 4) {
      std::memcpy(&host[i * 4], &x, 4);
    } else {  // bf16: the float's upper half
      uint32_t b;
      std::memcpy(&b, &x, 4);
      const uint16_t h = uint16_t(b >> 16);
      std::memcpy(&host[i * 2], &h, 2);
    }
  }
  void* d = nullptr;
  check(cudaMalloc(&d, host.size()), "cudaMalloc");
  check(cudaMemcpy(d, host.data(), host.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  return d;
}

gdn_tensor tensor(void* p, gdn_dtype dtype, std::initializer_list<int64_t> shape) {
  gdn_tensor t;
  std::memset(&t, 0, sizeof t);
  t.data = p;
  t.dtype = dtype;
  t.ndim = int32_t(shape.size());
  int i = 0;
  for (int64_t s : shape) t.shape[i++] = s;
  t.device_type = GDN_DEVICE_CUDA;
  return t;
}

}  // namespace

// One plain B = 1 call's buffers, each its own allocation (as gdn bench's input sets).
struct InputSet {
  void *q, *k, *v, *o, *g, *beta, *state;
};

InputSet make_set(std::mt19937& rng, int64_t Hk, int64_t Hv, int64_t K, int64_t V) {
  InputSet s;
  // q, k [1, 1, Hk, K]; v, o [1, 1, Hv, V] bf16; g, beta [1, 1, Hv] f32; state [1, Hv, V, K] f32
  s.q = device_random(Hk * K, 2, rng);
  s.k = device_random(Hk * K, 2, rng);
  s.v = device_random(Hv * V, 2, rng);
  s.o = device_random(Hv * V, 2, rng);
  std::vector<float> gates(Hv, -0.05f), betas(Hv, 0.5f);
  check(cudaMalloc(&s.g, Hv * 4), "cudaMalloc");
  check(cudaMalloc(&s.beta, Hv * 4), "cudaMalloc");
  check(cudaMemcpy(s.g, gates.data(), Hv * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemcpy(s.beta, betas.data(), Hv * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  s.state = device_random(Hv * V * K, 4, rng);
  return s;
}

int main(int argc, char** argv) {
  const char* json = nullptr;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--json") == 0) json = argv[i + 1];
  constexpr int64_t Hk = 16, Hv = 32, K = 128, V = 128;
  std::mt19937 rng(7);
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  const InputSet one = make_set(rng, Hk, Hv, K, V);
  void *q = one.q, *k = one.k, *v = one.v, *o = one.o, *g = one.g, *beta = one.beta, *state = one.state;
  const auto args_of = [&](const InputSet& set) {
    gdn_forward_args a;
    gdn_forward_args_init(&a);
    a.q = tensor(set.q, GDN_DTYPE_BF16, {1, 1, Hk, K});
    a.k = tensor(set.k, GDN_DTYPE_BF16, {1, 1, Hk, K});
    a.v = tensor(set.v, GDN_DTYPE_BF16, {1, 1, Hv, V});
    a.o = tensor(set.o, GDN_DTYPE_BF16, {1, 1, Hv, V});
    a.g = tensor(set.g, GDN_DTYPE_F32, {1, 1, Hv});
    a.beta = tensor(set.beta, GDN_DTYPE_F32, {1, 1, Hv});
    a.initial_state = a.final_state = tensor(set.state, GDN_DTYPE_F32, {1, Hv, V, K});
    a.backend = GDN_BACKEND_CUDA;
    a.path = GDN_PATH_RECURRENT;
    a.stream = stream;
    return a;
  };
  gdn_forward_args a = args_of(one);
  if (gdn_forward(&a) != GDN_STATUS_SUCCESS) {
    std::fprintf(stderr, "gdn_forward: %s\n", gdn_last_error());
    return 1;
  }
  // kSets input sets in turn, each buffer its own allocation, as gdn bench's plain decode case
  // takes them (it rotates sets so that the device's timings start from a cold L2)
  constexpr int kSets = 256;
  std::vector<InputSet> sets;
  std::vector<gdn_forward_args> set_args;
  for (int i = 0; i < kSets; ++i) {
    sets.push_back(make_set(rng, Hk, Hv, K, V));
    set_args.push_back(args_of(sets.back()));
  }
  int turn = 0;
  // and kSets more, each taken by one call only (idle), as gdn bench's few timed calls take theirs
  std::vector<gdn_forward_args> fresh_args[2];
  for (auto& fresh : fresh_args)
    for (int i = 0; i < kSets; ++i) fresh.push_back(args_of(make_set(rng, Hk, Hv, K, V)));
  int fresh_turn = 0;

  void* const pointers[] = {q, k, v, o, g, beta, state};
  using GetAttrs = CUresult (*)(unsigned, CUpointer_attribute*, void**, CUdeviceptr);
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found{};
  check(cudaGetDriverEntryPointByVersion("cuPointerGetAttributes", &entry, 12000, cudaEnableDefault, &found),
        "cuPointerGetAttributes entry point");
  const auto get_attrs = reinterpret_cast<GetAttrs>(entry);
  // the library's pointer check: the driver asked for three attributes of one pointer
  const auto driver_kind = [get_attrs](void* p) {
    CUpointer_attribute which[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                    CU_POINTER_ATTRIBUTE_IS_MANAGED};
    unsigned type = 0, managed = 0;
    int ordinal = -1;
    void* out[3] = {&type, &ordinal, &managed};
    get_attrs(3, which, out, CUdeviceptr(p));
  };
  using LaunchEx = CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**);
  check(cudaGetDriverEntryPointByVersion("cuLaunchKernelEx", &entry, 12000, cudaEnableDefault, &found),
        "cuLaunchKernelEx entry point");
  const auto driver_launch = reinterpret_cast<LaunchEx>(entry);
  cudaKernel_t empty_kernel_handle = nullptr;
  check(cudaGetKernel(&empty_kernel_handle, reinterpret_cast<const void*>(empty_kernel)), "cudaGetKernel");
  const auto empty_handle = reinterpret_cast<CUfunction>(empty_kernel_handle);

  std::vector<Figure> figures;
  for (bool idle : {true, false}) {
    figures.push_back(time_host("gdn_forward", [&] { gdn_forward(&a); }, stream, idle));
    figures.push_back(time_host("gdn_forward_can_implement", [&] { gdn_forward_can_implement(&a); }, stream, idle));
    figures.push_back(time_host(
        "gdn_forward, 256 input sets in turn", [&] { gdn_forward(&set_args[turn++ % kSets]); }, stream, idle));
    figures.push_back(time_host(
        "gdn_forward, each call on a set no call took before",
        [&, idle] { gdn_forward(&fresh_args[idle ? 0 : 1][fresh_turn++ % kSets]); }, stream, idle, kSets, 0));
    figures.push_back(time_host(
        "gdn_forward_can_implement, 256 input sets in turn",
        [&] { gdn_forward_can_implement(&set_args[turn++ % kSets]); }, stream, idle));
    figures.push_back(time_host(
        "cuPointerGetAttributes (type, ordinal, managed) x7, 256 input sets in turn",
        [&] {
          const InputSet& set = sets[turn++ % kSets];
          for (void* p : {set.q, set.k, set.v, set.o, set.g, set.beta, set.state}) {
            driver_kind(p);
          }
        },
        stream, idle));
    figures.push_back(time_host(
        "cudaPointerGetAttributes x7",
        [&] {
          for (void* p : pointers) {
            cudaPointerAttributes attr{};
            cudaPointerGetAttributes(&attr, p);
          }
        },
        stream, idle));
    figures.push_back(time_host(
        "cuPointerGetAttributes (type, ordinal, managed) x7",
        [&] {
          for (void* p : pointers) {
            driver_kind(p);
          }
        },
        stream, idle));
    figures.push_back(time_host(
        "cudaGetDevice", [&] { int d; cudaGetDevice(&d); }, stream, idle));
    figures.push_back(time_host(
        "empty kernel, cudaLaunchKernel", [&] { empty_kernel<<<1, 32, 0, stream>>>(); }, stream, idle));
    figures.push_back(time_host(
        "empty kernel, cudaLaunchKernelEx + programmatic serialisation",
        [&] {
          cudaLaunchConfig_t cfg{};
          cfg.gridDim = dim3(1024);
          cfg.blockDim = dim3(32);
          cfg.stream = stream;
          cudaLaunchAttribute attr[1];
          attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
          attr[0].val.programmaticStreamSerializationAllowed = 1;
          cfg.attrs = attr;
          cfg.numAttrs = 1;
          cudaLaunchKernelEx(&cfg, empty_kernel);
        },
        stream, idle));
    figures.push_back(time_host(
        "empty kernel, cuLaunchKernelEx (driver, kernel handle) + programmatic serialisation",
        [&] {
          CUlaunchAttribute attr[1] = {};
          attr[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
          attr[0].value.programmaticStreamSerializationAllowed = 1;
          CUlaunchConfig cfg{};
          cfg.gridDimX = 1024;
          cfg.gridDimY = cfg.gridDimZ = 1;
          cfg.blockDimX = 32;
          cfg.blockDimY = cfg.blockDimZ = 1;
          cfg.hStream = reinterpret_cast<CUstream>(stream);
          cfg.attrs = attr;
          cfg.numAttrs = 1;
          driver_launch(&cfg, empty_handle, nullptr, nullptr);
        },
        stream, idle));
  }
  for (const Figure& f : figures)
    std::printf("%-70s median %6.2f us  p90 %6.2f us\n", f.name.c_str(), f.median_us, f.p90_us);
  if (json) {
    FILE* out = std::fopen(json, "w");
    if (!out) return 1;
    std::fprintf(out, "[\n");
    for (size_t i = 0; i < figures.size(); ++i)
      std::fprintf(out, "  {\"name\": \"%s\", \"median_us\": %.3f, \"p90_us\": %.3f}%s\n", figures[i].name.c_str(),
                   figures[i].median_us, figures[i].p90_us, i + 1 < figures.size() ? "," : "");
    std::fprintf(out, "]\n");
    std::fclose(out);
  }
  return 0;
}
