// Which Case field combinations can be generated.
#include "case_rules.h"

#include <stdexcept>

namespace gdn::harness {

void check_case(const Case& c) {
  auto bad = [](const std::string& why) { throw std::invalid_argument("case: " + why); };
  if (c.N < 1 || c.T < 1 || c.Hk < 1 || c.Hv < 1 || c.K < 1 || c.V < 1)
    bad("N, T, Hk, Hv, K and V must be >= 1");
  if (c.Hv % c.Hk != 0)
    bad("Hv=" + std::to_string(c.Hv) + " is not a multiple of Hk=" + std::to_string(c.Hk));
  if (!c.seqlens.empty() && (int64_t(c.seqlens.size()) != c.N || !c.packed))
    bad("seqlens gives " + std::to_string(c.seqlens.size()) +
        " lengths for N=" + std::to_string(c.N) + " (and implies packed=1)");
  if (c.pad > c.N) bad("pad=" + std::to_string(c.pad) + " exceeds N=" + std::to_string(c.N));
  if (c.pad > 0 && c.pool == 0) bad("pad needs a state pool (pool=P)");
  if (c.pool > 0 && c.pool < c.N - c.pad)
    bad("pool=" + std::to_string(c.pool) + " has fewer slots than the " +
        std::to_string(c.N - c.pad) + " live sequences");
  if (c.pool > 0 && !c.initial_state && !c.final_state) bad("pool needs h0=1 or ht=1");
  if (c.in_place && !(c.initial_state && c.final_state)) bad("inplace=1 needs h0=1 and ht=1");
  if (c.snapshots && c.snapshot_pool) bad("snap is either 1 or pool");
  if (c.ckpt > 0 && !c.snapshots && !c.snapshot_pool) bad("ckpt needs snap=1 or snap=pool");
}

}  // namespace gdn::harness
