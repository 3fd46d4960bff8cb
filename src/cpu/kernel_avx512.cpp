// The kernel compiled for AVX-512 (F, VL, BW, DQ) + FMA + F16C; flags in CMakeLists.txt.
#define GDN_CPU_TARGET avx512
#include "cpu/kernel_impl.h"
