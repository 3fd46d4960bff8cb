// Reading and writing the safetensors format:
//   8 bytes   little-endian u64 H, the header length
//   H bytes   a JSON object {"NAME": {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}, ...,
//             optionally "__metadata__": {"key": "value", ...}}, padded with spaces
//   the rest  the data: tensor NAME is bytes [b, e) of it, row-major, little-endian; every
//             byte belongs to exactly one tensor
// Supported dtypes: F32, F16, BF16, F64, I32, I64. A bad file is rejected whole with a
// safetensors_error naming the file and the problem.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "gdn/gdn.h"
#include "harness/harness.h"

namespace gdn::tool {

class safetensors_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The contents of one safetensors file.
// Tensors are contiguous, row-major harness::HostTensors.
struct TensorFile {
  std::map<std::string, harness::HostTensor> tensors;
  std::map<std::string, std::string> metadata;  // "__metadata__"
};

// "F32" etc. for the supported dtypes.
const char* safetensors_dtype_name(gdn_dtype dtype);

TensorFile read_safetensors(const std::string& path);

// Writes `file` to `path` atomically (every tensor must be contiguous): into a temporary file beside it, renamed over `path` only
// once everything is written. On failure `path` is untouched and the temporary file removed.
void write_safetensors(const std::string& path, const TensorFile& file);

}  // namespace gdn::tool
