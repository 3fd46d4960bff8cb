// gdn info: what this build and this machine offer.
#include <sched.h>

#include <iostream>
#include <thread>

#include "commands.h"
#include "device.h"

namespace gdn::tool {
namespace {

int cores_available() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : int(std::thread::hardware_concurrency());
}

const char* availability(gdn_backend backend) {
  return gdn_backend_available(backend) ? "available" : "not available";
}

}  // namespace

int info_command() {
  std::cout << "gdn " << gdn_version_string() << " (tool built against " << GDN_VERSION_MAJOR << "."
            << GDN_VERSION_MINOR << "." << GDN_VERSION_PATCH << ")\n";
  std::cout << "backends:\n";
  std::cout << "  reference  " << availability(GDN_BACKEND_REFERENCE) << " (f64 oracle)\n";
  std::cout << "  cpu        " << availability(GDN_BACKEND_CPU) << " (SIMD target " << gdn_cpu_simd_target() << ")\n";
  std::cout << "  cuda       " << availability(GDN_BACKEND_CUDA)
            << (tool_has_cuda() ? " (compiled in)" : " (not compiled in: built with GDN_CUDA=OFF)") << "\n";

  const int devices = gdn_cuda_device_count();
  std::cout << "CUDA devices: " << devices << "\n";
  for (int i = 0; i < devices; ++i) {
    char line[256] = "";
    gdn_cuda_device_info(i, line, sizeof line);
    std::cout << "  " << i << ": " << line << "\n";
  }
  if (const std::string driver = cuda_driver_version(); !driver.empty())
    std::cout << "CUDA driver: " << driver << "\n";
  std::cout << "cores: " << cores_available() << " available to this process, "
            << std::thread::hardware_concurrency() << " in the machine\n";
  return 0;
}

}  // namespace gdn::tool
