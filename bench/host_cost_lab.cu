// gdn_host_cost_lab: where the host time of one plain decode call goes (issue 3's budget: a plain
// launch from C++ at most 8 us of host time). Decode B = 1 (Hk 16, Hv 32, K = V = 128, bf16
// inputs, f32 state in place), timed two ways:
//   idle:  the stream synchronised before each timed call, as `gdn bench` times decode-B1-vk-plain
//          (an event recorded, the call, an event, a synchronise);
//   busy:  calls back to back, a synchronise every 100 (as the HostCost.PlainLaunch test).
// Beside the whole call: its parts (the pointer-kind query through the runtime and through the
// driver, the device query, an empty kernel's launch with and without the early-launch
// attribute, gdn_forward_can_implement). Prints one line a measurement (median and 90th
// percentile, us); with --json FILE also writes them as JSON.
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
                 int calls = 2000) {
  cudaEvent_t before, after;
  check(cudaEventCreate(&before), "cudaEventCreate");
  check(cudaEventCreate(&after), "cudaEventCreate");
  for (int i = 0; i < 50; ++i) call();
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

int main(int argc, char** argv) {
  const char* json = nullptr;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--json") == 0) json = argv[i + 1];
  constexpr int64_t Hk = 16, Hv = 32, K = 128, V = 128;
  std::mt19937 rng(7);
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  // q, k [1, 1, Hk, K]; v, o [1, 1, Hv, V] bf16; g, beta [1, 1, Hv] f32; state [1, Hv, V, K] f32
  void* q = device_random(Hk * K, 2, rng);
  void* k = device_random(Hk * K, 2, rng);
  void* v = device_random(Hv * V, 2, rng);
  void* o = device_random(Hv * V, 2, rng);
  std::vector<float> gates(Hv, -0.05f), betas(Hv, 0.5f);
  void *g = nullptr, *beta = nullptr;
  check(cudaMalloc(&g, Hv * 4), "cudaMalloc");
  check(cudaMalloc(&beta, Hv * 4), "cudaMalloc");
  check(cudaMemcpy(g, gates.data(), Hv * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemcpy(beta, betas.data(), Hv * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  void* state = device_random(Hv * V * K, 4, rng);

  gdn_forward_args a;
  gdn_forward_args_init(&a);
  a.q = tensor(q, GDN_DTYPE_BF16, {1, 1, Hk, K});
  a.k = tensor(k, GDN_DTYPE_BF16, {1, 1, Hk, K});
  a.v = tensor(v, GDN_DTYPE_BF16, {1, 1, Hv, V});
  a.o = tensor(o, GDN_DTYPE_BF16, {1, 1, Hv, V});
  a.g = tensor(g, GDN_DTYPE_F32, {1, 1, Hv});
  a.beta = tensor(beta, GDN_DTYPE_F32, {1, 1, Hv});
  a.initial_state = a.final_state = tensor(state, GDN_DTYPE_F32, {1, Hv, V, K});
  a.backend = GDN_BACKEND_CUDA;
  a.path = GDN_PATH_RECURRENT;
  a.stream = stream;
  if (gdn_forward(&a) != GDN_STATUS_SUCCESS) {
    std::fprintf(stderr, "gdn_forward: %s\n", gdn_last_error());
    return 1;
  }

  void* const pointers[] = {q, k, v, o, g, beta, state};
  using GetAttrs = CUresult (*)(unsigned, CUpointer_attribute*, void**, CUdeviceptr);
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found{};
  check(cudaGetDriverEntryPointByVersion("cuPointerGetAttributes", &entry, 12000, cudaEnableDefault, &found),
        "cuPointerGetAttributes entry point");
  const auto get_attrs = reinterpret_cast<GetAttrs>(entry);

  std::vector<Figure> figures;
  for (bool idle : {true, false}) {
    figures.push_back(time_host("gdn_forward", [&] { gdn_forward(&a); }, stream, idle));
    figures.push_back(time_host("gdn_forward_can_implement", [&] { gdn_forward_can_implement(&a); }, stream, idle));
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
            CUpointer_attribute which[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                            CU_POINTER_ATTRIBUTE_IS_MANAGED};
            unsigned type = 0, managed = 0;
            int ordinal = -1;
            void* out[3] = {&type, &ordinal, &managed};
            get_attrs(3, which, out, CUdeviceptr(p));
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
