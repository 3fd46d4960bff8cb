// SPEC.md's numerical targets (relative L2 error against the f64 oracle on the same rounded
// inputs), per backend, path and dtype.
#include <algorithm>

#include "harness.h"

namespace gdn::harness {
namespace {

// bf16's unit roundoff 2^-8: rounding to nearest changes each element by at most 2^-8 of its
// magnitude, so rounding a whole tensor changes it by at most 2^-8 in relative L2. A state
// stored in bf16 is rounded once at the end of the call (and each snapshot once): its error is
// that rounding on top of the f32 path's own. Measured on the built-in cases: 1.7e-3.
constexpr double kBf16Rounding = 0x1.0p-8;

Tolerance recurrent(bool half_inputs) {
  // f32 math on the same inputs: the state is f32-accurate either way; half inputs add only
  // the rounding of o to its dtype (bf16: 2^-8)
  return half_inputs ? Tolerance{4e-3, 1e-5} : Tolerance{1e-5, 1e-5};
}

Tolerance chunked(bool half_inputs) {
  return half_inputs ? Tolerance{3e-3, 2.5e-3} : Tolerance{1e-4, 1e-4};
}

}  // namespace

Tolerance tolerance(const Case& c, gdn_backend backend, gdn_path path) {
  const bool half = c.dtype != GDN_DTYPE_F32;
  Tolerance t;
  if (backend == GDN_BACKEND_REFERENCE) {
    // the oracle against itself, writing its outputs in the case's dtypes: only that rounding
    t = recurrent(half);
  } else if (backend == GDN_BACKEND_CUDA && path == GDN_PATH_AUTO) {
    // the cuda backend picks the path itself: either must pass
    const Tolerance r = recurrent(half), k = chunked(half);
    t = {std::max(r.o, k.o), std::max(r.state, k.state)};
  } else if (path == GDN_PATH_CHUNKED) {
    t = chunked(half);
  } else {
    t = recurrent(half);  // recurrent, or auto on the cpu backend (its only path)
  }
  if (c.state_dtype == GDN_DTYPE_BF16) t.state += kBf16Rounding;
  return t;
}

}  // namespace gdn::harness
