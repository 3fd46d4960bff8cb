// The kernel compiled for AVX-512 (F, VL, BW, DQ) + BF16 + FMA + F16C (Zen 4, Sapphire Rapids
// and later): the avx512 kernel with f32 -> bf16 conversions in one instruction; flags in
// CMakeLists.txt.
#define GDN_CPU_TARGET avx512bf16
#include "cpu/kernel_impl.h"
