// The C API's plumbing: status strings, version, defaults, the per-thread message, backends and
// devices, the C++ layer's exceptions.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>

#include "core/valid_call.h"
#include "gdn/gdn.hpp"

namespace {

TEST(CoreApi, StatusStrings) {
  EXPECT_STREQ(gdn_status_string(GDN_STATUS_SUCCESS), "success");
  EXPECT_STREQ(gdn_status_string(GDN_STATUS_INVALID_ARGUMENT), "invalid argument");
  EXPECT_STREQ(gdn_status_string(GDN_STATUS_UNSUPPORTED), "unsupported");
  EXPECT_STREQ(gdn_status_string(GDN_STATUS_BACKEND_UNAVAILABLE), "backend unavailable");
  EXPECT_STREQ(gdn_status_string(GDN_STATUS_WORKSPACE_TOO_SMALL), "workspace too small");
  EXPECT_STREQ(gdn_status_string(GDN_STATUS_DEVICE_ERROR), "device error");
  EXPECT_STREQ(gdn_status_string(GDN_STATUS_INTERNAL_ERROR), "internal error");
  EXPECT_STREQ(gdn_status_string(gdn_status(7)), "unknown status");  // 7: the first unused value
}

TEST(CoreApi, Version) {
  EXPECT_EQ(gdn_version(), GDN_VERSION_MAJOR * 10000 + GDN_VERSION_MINOR * 100 + GDN_VERSION_PATCH);
  const std::string expected = std::to_string(GDN_VERSION_MAJOR) + "." +
                               std::to_string(GDN_VERSION_MINOR) + "." +
                               std::to_string(GDN_VERSION_PATCH);
  EXPECT_EQ(gdn_version_string(), expected);
  EXPECT_EQ(gdn::version(), expected);
}

TEST(CoreApi, ArgsInitZeroesEverythingAndSetsTheDefaults) {
  gdn_forward_args args;
  std::memset(&args, 0x5A, sizeof args);
  gdn_forward_args_init(&args);
  gdn_forward_args zero;
  std::memset(&zero, 0, sizeof zero);
  EXPECT_EQ(std::memcmp(&args, &zero, sizeof args), 0);
  EXPECT_EQ(args.gate, GDN_GATE_LOG_DECAY);
  EXPECT_EQ(args.beta_mode, GDN_BETA_PROB);
  EXPECT_EQ(args.head_map, GDN_HEAD_MAP_BLOCK);
  EXPECT_EQ(args.state_layout, GDN_STATE_VK);
  EXPECT_EQ(args.backend, GDN_BACKEND_AUTO);
  EXPECT_EQ(args.path, GDN_PATH_AUTO);
  EXPECT_EQ(args.scale, 0.f);
  gdn_forward_args_init(nullptr);  // a no-op, not a crash

  gdn::ForwardArgs cpp;
  EXPECT_EQ(std::memcmp(static_cast<gdn_forward_args*>(&cpp), &zero, sizeof zero), 0);
}

TEST(CoreApi, SuccessClearsTheMessage) {
  valid::Call call;
  call.args.q.data = nullptr;
  ASSERT_EQ(gdn_forward(&call.args), GDN_STATUS_INVALID_ARGUMENT);
  EXPECT_STRNE(gdn_last_error(), "");
  valid::Call good;
  ASSERT_EQ(gdn_forward_can_implement(&good.args), GDN_STATUS_SUCCESS);
  EXPECT_STREQ(gdn_last_error(), "");
}

TEST(CoreApi, MessageIsPerThread) {
  valid::Call call;
  call.args.q.data = nullptr;
  ASSERT_EQ(gdn_forward(&call.args), GDN_STATUS_INVALID_ARGUMENT);
  std::string other;
  std::thread([&] { other = gdn_last_error(); }).join();
  EXPECT_EQ(other, "");
  EXPECT_TRUE(valid::contains(gdn_last_error(), "q: "));
}

TEST(CoreApi, WorkspaceIsZeroOnHostBackends) {
  for (gdn_backend backend : {GDN_BACKEND_REFERENCE, GDN_BACKEND_CPU}) {
    valid::Config c;
    c.backend = backend;
    valid::Call call(c);
    size_t bytes = 123;
    EXPECT_EQ(gdn_forward_workspace_size(&call.args, &bytes), GDN_STATUS_SUCCESS)
        << gdn_last_error();
    EXPECT_EQ(bytes, 0u);
  }
}

TEST(CoreApi, BackendAvailability) {
  EXPECT_TRUE(gdn_backend_available(GDN_BACKEND_AUTO));
  EXPECT_TRUE(gdn_backend_available(GDN_BACKEND_CPU));
  EXPECT_TRUE(gdn_backend_available(GDN_BACKEND_REFERENCE));
  EXPECT_EQ(gdn_backend_available(GDN_BACKEND_CUDA) != 0, gdn_cuda_device_count() > 0);
}

TEST(CoreApi, CudaDeviceInfo) {
  char line[256];
  EXPECT_EQ(gdn_cuda_device_info(0, nullptr, 16), GDN_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(valid::contains(gdn_last_error(), "buf"));
  if (gdn_cuda_device_count() > 0) {
    EXPECT_EQ(gdn_cuda_device_info(0, line, sizeof line), GDN_STATUS_SUCCESS) << gdn_last_error();
    EXPECT_GT(std::strlen(line), 0u);
    EXPECT_EQ(gdn_cuda_device_info(gdn_cuda_device_count(), line, sizeof line),
              GDN_STATUS_INVALID_ARGUMENT);
  } else {
    EXPECT_EQ(gdn_cuda_device_info(0, line, sizeof line), GDN_STATUS_BACKEND_UNAVAILABLE);
    EXPECT_TRUE(valid::contains(gdn_last_error(), "cuda") ||
                valid::contains(gdn_last_error(), "CUDA"));
  }
}

TEST(CoreApi, CpuSimdTarget) {
  const char* target = gdn_cpu_simd_target();
  ASSERT_NE(target, nullptr);
  EXPECT_GT(std::strlen(target), 0u);
}

TEST(CoreApi, CppLayerThrowsTheMessage) {
  valid::Call call;
  call.args.v.shape[1] = 7;
  for (int entry = 0; entry < 3; ++entry) {
    try {
      if (entry == 0) gdn::forward(call.args);
      if (entry == 1) gdn::can_implement(call.args);
      if (entry == 2) gdn::workspace_size(call.args);
      ADD_FAILURE() << "no exception from entry " << entry;
    } catch (const gdn::error& e) {
      EXPECT_EQ(e.status(), GDN_STATUS_INVALID_ARGUMENT);
      EXPECT_TRUE(valid::contains(e.what(), "v: T=7, but q has T=3")) << e.what();
    }
  }
  valid::Call good;
  EXPECT_NO_THROW(gdn::forward(good.args));
  EXPECT_EQ(gdn::workspace_size(good.args), 0u);
}

}  // namespace
