#include "EvictionDecider.h"

#include <cstring>
#include <stdexcept>

namespace mlopt {

std::vector<TensorSpec> evictionFeatureSpecs() {
  static const std::pair<const char *, TensorType> Columns[] = {
      {"mask", TensorType::Int64},
      {"is_free", TensorType::Int64},
      {"nr_urgent", TensorType::Float},
      {"nr_broken_hints", TensorType::Float},
      {"is_hint", TensorType::Int64},
      {"is_local", TensorType::Int64},
      {"nr_rematerializable", TensorType::Float},
      {"nr_defs_and_uses", TensorType::Float},
      {"weighed_reads_by_max", TensorType::Float},
      {"weighed_writes_by_max", TensorType::Float},
      {"weighed_read_writes_by_max", TensorType::Float},
      {"weighed_indvars_by_max", TensorType::Float},
      {"hint_weights_by_max", TensorType::Float},
      {"start_bb_freq_by_max", TensorType::Float},
      {"end_bb_freq_by_max", TensorType::Float},
      {"hottest_bb_freq_by_max", TensorType::Float},
      {"liverange_size", TensorType::Float},
      {"use_def_density", TensorType::Float},
      {"max_stage", TensorType::Int64},
      {"min_stage", TensorType::Int64},
  };
  std::vector<TensorSpec> Specs;
  for (const auto &[Name, Type] : Columns)
    Specs.emplace_back(Name, Type, std::vector<int64_t>{1, 33});
  Specs.emplace_back("progress", TensorType::Float, std::vector<int64_t>{1});
  return Specs;
}

std::optional<int64_t> PolicyEvictionDecider::decide(const EvictionQuestion &Q, std::string &Raw) {
  const std::vector<TensorSpec> &Want = Model->features();
  if (Offsets.empty()) {
    for (const TensorSpec &S : Want) {
      size_t I = 0;
      while (I < Q.Header.Features.size() && Q.Header.Features[I].name() != S.name())
        ++I;
      if (I == Q.Header.Features.size() || !(Q.Header.Features[I] == S))
        throw PolicyError("the policy's input '" + S.name() + "' (" + S.typeAndShape() +
                          ") is not among LLVM's eviction features");
      Offsets.push_back(Q.Header.FeatureOffsets[I]);
    }
  }
  for (size_t I = 0; I < Want.size(); ++I)
    std::memcpy(Model->featureBuffer(I), Q.Payload + Offsets[I], Want[I].byteSize());
  Model->evaluate();
  std::optional<int64_t> Index = Model->decisionIndex();
  if (!Index)
    Raw = Model->rawDecision();
  return Index;
}

} // namespace mlopt
