// DLPack arrays to gdn_tensor views, through nanobind's nb::ndarray (no framework headers).
// Nothing is copied: the data pointer, shape and element strides reach the library as they are,
// and the library validates them.
#pragma once

#include <string>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "gdn/gdn.h"

namespace gdn_py {

namespace nb = nanobind;

// Holds one call's imported arrays (and so the memory they view) until the call returns.
struct Imported {
  nb::ndarray<nb::ro> input;
  nb::ndarray<> output;
};

// Describes `obj` as a gdn_tensor. None leaves `*t` absent (data == NULL). `writable` asks for
// an array the library may write into. `bf16_bits` reads a 16-bit unsigned integer array as
// bfloat16: NumPy's bfloat16 (ml_dtypes) cannot cross DLPack, so the package hands over its bits.
// Returns "" on success, else a message that names the argument `name`.
std::string view(nb::handle obj, const char* name, bool writable, bool bf16_bits, Imported* keep,
                 gdn_tensor* t);

// The data pointer of a writable 32-bit integer array (error_flags), or a message.
std::string flag_word(nb::handle obj, const char* name, Imported* keep, uint32_t** word);

}  // namespace gdn_py
