// libFuzzer harness: JSON and TensorSpec parsing (log headers, output_spec.json
// entries). Only JsonError and SpecError escape; a spec that parses prints
// LLVM's JSON form, which is a fixed point (printing what it parses back to
// gives the same bytes; invalid UTF-8 in a name is repaired as LLVM does).
#include "Json.h"
#include "TensorSpec.h"

#include <cstdlib>
#include <string>

using namespace mlopt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  std::string Text(reinterpret_cast<const char *>(Data), Size);
  json::Value V;
  try {
    V = json::parse(Text);
  } catch (const json::JsonError &E) {
    if (E.offset() > Size)
      std::abort();
    return 0;
  }
  try {
    TensorSpec S = TensorSpec::fromJSON(V);
    std::string Printed = S.toJSON();
    if (TensorSpec::fromJSON(json::parse(Printed)).toJSON() != Printed)
      std::abort();
  } catch (const SpecError &) {
  }
  return 0;
}
