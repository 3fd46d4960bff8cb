// Internal to the harness: which Case field combinations can be generated.
#pragma once

#include "harness.h"

namespace gdn::harness {

// Throws std::invalid_argument naming the key when the case cannot be generated (Hv not a
// multiple of Hk, more padding than sequences, a pool without states or too small for the
// live sequences, an in-place update without both states, seqlens disagreeing with N).
void check_case(const Case& c);

}  // namespace gdn::harness
