// TMA tensor maps of per-token tensors (tensor_map.h), encoded through the driver's
// cuTensorMapEncodeTiled, reached through the runtime (driver_entry.h: no link against the
// driver library). Host arithmetic only: nothing is launched or synchronised.
#include "cuda/tensor_map.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstring>

#include "cuda/driver_entry.h"
#include "gdn/gdn.h"

namespace gdn::cuda {
namespace {

static_assert(sizeof(TokenTensorMap) == sizeof(CUtensorMap) && alignof(TokenTensorMap) >= alignof(CUtensorMap),
              "TokenTensorMap holds a CUtensorMap");

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiled encoder() {
  static const EncodeTiled fn = reinterpret_cast<EncodeTiled>(driver_entry_point("cuTensorMapEncodeTiled"));
  return fn;
}

}  // namespace

bool encode_token_map(TokenTensorMap& map, const TokenView& view, int64_t sequences, int64_t tokens, int64_t heads) {
  constexpr int64_t kColumns = 128, kBytes = 2;  // K = V = 128 half-precision columns
  const EncodeTiled encode = encoder();
  if (!encode || !view.p || sequences < 1 || tokens < 1 || heads < 1) return false;
  if (reinterpret_cast<uintptr_t>(view.p) % 16 != 0) return false;
  // dims and byte strides innermost first, in memory order for the [N, T, H, 128] views the API
  // takes: (columns, heads, tokens, sequences); a dimension of extent 1 gets a stride past the
  // one below it
  const cuuint64_t dims[4] = {cuuint64_t(kColumns), cuuint64_t(heads), cuuint64_t(tokens), cuuint64_t(sequences)};
  const int64_t head_bytes = heads > 1 ? view.head * kBytes : kColumns * kBytes;
  const int64_t tok_bytes = tokens > 1 ? view.tok * kBytes : head_bytes * heads;
  const int64_t seq_bytes = sequences > 1 ? view.seq * kBytes : tok_bytes * tokens;
  const int64_t strides[3] = {head_bytes, tok_bytes, seq_bytes};
  cuuint64_t byte_strides[3];
  for (int d = 0; d < 3; ++d) {
    if (strides[d] <= 0 || strides[d] % 16 != 0 || strides[d] >= (int64_t(1) << 40)) return false;
    byte_strides[d] = cuuint64_t(strides[d]);
  }
  const cuuint32_t box[4] = {64, 1, 64, 1};  // 64 columns (128 bytes) x 64 tokens of one head
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  CUtensorMap m;
  std::memset(&m, 0, sizeof m);
  const CUtensorMapDataType type =
      view.dtype == GDN_DTYPE_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  if (encode(&m, type, 4, view.p, dims, byte_strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
             CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
    return false;
  std::memcpy(map.bytes, &m, sizeof m);
  return true;
}

}  // namespace gdn::cuda
