// libFuzzer harness: the JSON signature a compiled policy .so reports
// (mlopt_policy_signature). Only PolicyError escapes; accepted tensors have
// byte sizes within the policy limit.
#include "CompiledPolicy.h"
#include "PolicyModel.h"

#include <cstdlib>
#include <string>

using namespace mlopt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  std::string Text(reinterpret_cast<const char *>(Data), Size);
  try {
    CompiledPolicySignature S = parseCompiledPolicySignature(Text.c_str(), "fuzz.so");
    for (const auto *List : {&S.Inputs, &S.Outputs})
      for (const ModelTensor &T : *List)
        if (T.ByteSize > (size_t(64) << 20))
          std::abort();
  } catch (const PolicyError &) {
  }
  return 0;
}
