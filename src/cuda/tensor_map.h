// TMA tensor maps of per-token tensors (views.h's TokenView), for kernels that copy [64 tokens,
// 64 columns] boxes of one head into 128-byte swizzled shared memory (sm_90). A CUtensorMap is
// an opaque 128-byte block (128-byte aligned as the driver header declares it; TMA needs 64) that the kernel reads from its parameter block.
#pragma once

#include <cstdint>

#include "cuda/views.h"

namespace gdn::cuda {

struct alignas(128) TokenTensorMap {
  unsigned char bytes[128];
};

// Encodes `map` for the token rows of `view` ([N, T, H, 128] half-precision, element (n, t, h, i)
// at p + n seq + t tok + h head + i): a 4-d map (columns, heads, tokens, sequences) whose box is
// 64 columns x 64 tokens of one head and one sequence (coordinates: column, head, token, n), 128-byte swizzled, rows past `tokens`
// zero-filled. False when TMA cannot describe the view (a base not 16-byte aligned, a stride not
// a multiple of 16 bytes, the driver's encoder unavailable): the kernel then copies by cp.async.
bool encode_token_map(TokenTensorMap& map, const TokenView& view, int64_t sequences, int64_t tokens, int64_t heads);

}  // namespace gdn::cuda
