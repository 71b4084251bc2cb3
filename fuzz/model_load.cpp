// libFuzzer harness: model loading as the plugin does it (verification,
// then LiteRT on the verified copy, then binding to the 38 inliner
// features), on truncations and byte flips of real models (the seeds).
// Only PolicyError escapes; a model that loads evaluates once.
#include "PolicyModel.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

using namespace mlopt;

namespace {
std::vector<TensorSpec> inlinerFeatures() {
  static const char *Names[] = {"sroa_savings",
                                "sroa_losses",
                                "load_elimination",
                                "call_penalty",
                                "call_argument_setup",
                                "load_relative_intrinsic",
                                "lowered_call_arg_setup",
                                "indirect_call_penalty",
                                "jump_table_penalty",
                                "case_cluster_penalty",
                                "switch_default_dest_penalty",
                                "switch_penalty",
                                "unsimplified_common_instructions",
                                "num_loops",
                                "dead_blocks",
                                "simplified_instructions",
                                "constant_args",
                                "constant_offset_ptr_args",
                                "callsite_cost",
                                "cold_cc_penalty",
                                "last_call_to_static_bonus",
                                "is_multiple_blocks",
                                "nested_inlines",
                                "nested_inline_cost_estimate",
                                "threshold",
                                "callee_basic_block_count",
                                "callsite_height",
                                "node_count",
                                "nr_ctant_params",
                                "cost_estimate",
                                "edge_count",
                                "caller_users",
                                "caller_conditionally_executed_blocks",
                                "caller_basic_block_count",
                                "callee_conditionally_executed_blocks",
                                "callee_users",
                                "is_callee_avail_external",
                                "is_caller_avail_external"};
  std::vector<TensorSpec> Specs;
  for (const char *N : Names)
    Specs.emplace_back(N, TensorType::Int64, std::vector<int64_t>{1});
  return Specs;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  static const std::vector<TensorSpec> Features = inlinerFeatures();
  int Fd = memfd_create("fuzz-model", MFD_CLOEXEC);
  if (Fd < 0 || write(Fd, Data, Size) != ssize_t(Size))
    std::abort();
  std::string Path = "/proc/self/fd/" + std::to_string(Fd);
  try {
    std::unique_ptr<PolicyModel> M = loadPolicyModel(Path, Features);
    M->evaluate();
  } catch (const PolicyError &) {
  }
  close(Fd);
  return 0;
}
