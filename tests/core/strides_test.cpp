// Strided views: every tensor of a call placed in a padded buffer (as views into a fused qkv
// projection or an interleaved state pool) gives bit for bit what the contiguous call gives, and
// leaves the padding alone.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gdn/gdn.hpp"

namespace {

constexpr int64_t N = 2, T = 5, Hk = 2, Hv = 4, K = 3, V = 5, P = 3;

// A row-major tensor of floats, dense or laid out in a padded buffer.
struct Tensor {
  std::vector<int64_t> shape, strides;  // strides in elements
  std::vector<float> buf;

  // Dense: strides of a contiguous layout.
  explicit Tensor(std::vector<int64_t> s) : shape(std::move(s)), strides(shape.size()) {
    int64_t stride = 1;
    for (size_t i = shape.size(); i-- > 0;) {
      strides[i] = stride;
      stride *= shape[i];
    }
    buf.assign(size_t(stride), 0.f);
  }

  // `dense`'s values placed with `pad[i]` extra elements after every run of dimension i
  // (the last dimension keeps stride 1); the padding holds NaN.
  Tensor(const Tensor& dense, const std::vector<int64_t>& pad)
      : shape(dense.shape), strides(shape.size()) {
    int64_t stride = 1, extent = 1;
    for (size_t i = shape.size(); i-- > 0;) {
      strides[i] = stride;
      extent = stride * shape[i] + pad[i];
      stride = extent;
    }
    buf.assign(size_t(extent), NAN);
    for (int64_t e = 0; e < dense.count(); ++e)
      buf[size_t(offset(e))] = dense.buf[size_t(dense.offset(e))];
  }

  int64_t count() const {
    int64_t c = 1;
    for (int64_t s : shape) c *= s;
    return c;
  }

  // Offset of the e-th element in row-major order.
  int64_t offset(int64_t e) const {
    int64_t off = 0;
    for (size_t i = shape.size(); i-- > 0;) {
      off += (e % shape[i]) * strides[i];
      e /= shape[i];
    }
    return off;
  }

  gdn_tensor view() {
    gdn_tensor t{};
    t.data = buf.data();
    t.dtype = GDN_DTYPE_F32;
    t.ndim = int32_t(shape.size());
    for (size_t i = 0; i < shape.size(); ++i) {
      t.shape[i] = shape[i];
      t.strides[i] = strides[i];
    }
    t.device_type = GDN_DEVICE_CPU;
    return t;
  }
};

struct Tensors {
  Tensor q{{N, T, Hk, K}}, k{{N, T, Hk, K}}, v{{N, T, Hv, V}}, g{{N, T, Hv}}, beta{{N, T, Hv}};
  Tensor h0{{P, Hv, V, K}}, o{{N, T, Hv, V}}, ht{{P, Hv, V, K}}, snapshots{{N, T, Hv, V, K}};
};

void run(Tensors& t) {
  std::vector<int32_t> state_indices = {2, 0};
  gdn::ForwardArgs args;
  args.q = t.q.view();
  args.k = t.k.view();
  args.v = t.v.view();
  args.g = t.g.view();
  args.beta = t.beta.view();
  args.initial_state = t.h0.view();
  args.state_indices = gdn::tensor(state_indices.data(), GDN_DTYPE_I32, {N});
  args.o = t.o.view();
  args.final_state = t.ht.view();
  args.state_snapshots = t.snapshots.view();
  args.backend = GDN_BACKEND_REFERENCE;
  gdn::forward(args);
}

// b holds a's values at its own strides.
void expect_same_values(const Tensor& a, const Tensor& b) {
  for (int64_t e = 0; e < a.count(); ++e)
    ASSERT_EQ(std::memcmp(&a.buf[size_t(a.offset(e))], &b.buf[size_t(b.offset(e))], 4), 0)
        << "element " << e << ": " << a.buf[size_t(a.offset(e))] << " vs "
        << b.buf[size_t(b.offset(e))];
}

// Every element of b's buffer that is not one of its tensor's elements is still NaN.
void expect_padding_untouched(const Tensor& b) {
  std::vector<bool> used(b.buf.size());
  for (int64_t e = 0; e < b.count(); ++e) used[size_t(b.offset(e))] = true;
  for (size_t i = 0; i < b.buf.size(); ++i) {
    if (used[i]) continue;
    ASSERT_TRUE(std::isnan(b.buf[i])) << "padding at " << i << " was written";
  }
}

TEST(CoreApi, StridedViewsMatchContiguous) {
  Tensors dense;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1), unit(0, 1);
  for (Tensor* x : {&dense.q, &dense.k, &dense.v, &dense.h0})
    for (float& e : x->buf) e = u(rng);
  for (float& e : dense.g.buf) e = -unit(rng);
  for (float& e : dense.beta.buf) e = unit(rng);
  Tensors strided{Tensor(dense.q, {5, 3, 2, 0}),           Tensor(dense.k, {1, 7, 1, 0}),
                  Tensor(dense.v, {0, 2, 3, 0}),           Tensor(dense.g, {4, 1, 0}),
                  Tensor(dense.beta, {2, 2, 0}),           Tensor(dense.h0, {6, 1, 2, 0}),
                  Tensor(dense.o, {1, 1, 1, 0}),           Tensor(dense.ht, {3, 5, 1, 0}),
                  Tensor(dense.snapshots, {1, 2, 3, 1, 0})};
  run(dense);
  run(strided);
  for (auto member : {&Tensors::o, &Tensors::ht, &Tensors::snapshots}) {
    expect_same_values(dense.*member, strided.*member);
    expect_padding_untouched(strided.*member);
  }
}

}  // namespace
