#include "PolicyModelPool.h"

namespace mlopt {

PolicyModelPool::PolicyModelPool(std::string PathIn, std::vector<TensorSpec> FeaturesIn,
                                 PolicyLoadOptions OptionsIn)
    : Path(std::move(PathIn)), Features(std::move(FeaturesIn)), Options(std::move(OptionsIn)) {}

std::shared_ptr<PolicyModelPool> PolicyModelPool::load(std::string Path,
                                                       std::vector<TensorSpec> Features,
                                                       PolicyLoadOptions Options) {
  std::shared_ptr<PolicyModelPool> Pool(
      new PolicyModelPool(std::move(Path), std::move(Features), std::move(Options)));
  std::unique_ptr<PolicyModel> First = loadPolicyModel(Pool->Path, Pool->Features, Pool->Options);
  Pool->Kind = First->kind();
  Pool->Decision = First->decisionSpec();
  Pool->Extras = First->extraOutputs();
  for (size_t I = 0; I < Pool->Features.size(); ++I)
    if (First->featureBound(I))
      Pool->Inputs.push_back(Pool->Features[I]);
  Pool->Idle.push_back(std::move(First));
  Pool->Loaded = 1;
  return Pool;
}

std::shared_ptr<PolicyModel> PolicyModelPool::acquire() {
  std::unique_ptr<PolicyModel> Model;
  {
    std::lock_guard<std::mutex> Guard(Lock);
    if (!Idle.empty()) {
      Model = std::move(Idle.back());
      Idle.pop_back();
    }
  }
  if (!Model) {
    Model = loadPolicyModel(Path, Features, Options);
    std::lock_guard<std::mutex> Guard(Lock);
    ++Loaded;
  }
  std::weak_ptr<PolicyModelPool> Owner = weak_from_this();
  return std::shared_ptr<PolicyModel>(Model.release(), [Owner](PolicyModel *P) {
    std::unique_ptr<PolicyModel> Returned(P);
    if (std::shared_ptr<PolicyModelPool> Pool = Owner.lock()) {
      std::lock_guard<std::mutex> Guard(Pool->Lock);
      Pool->Idle.push_back(std::move(Returned));
    }
  });
}

size_t PolicyModelPool::loadedInstances() const {
  std::lock_guard<std::mutex> Guard(Lock);
  return Loaded;
}

} // namespace mlopt
