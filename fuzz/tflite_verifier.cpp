// libFuzzer harness: the structural .tflite verifier on arbitrary bytes
// (it never throws and never reads outside the buffer: ASan checks the
// latter on an exactly-sized heap copy).
#include "TfliteVerifier.h"

#include <cstring>
#include <memory>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  std::unique_ptr<uint8_t[]> Copy(new uint8_t[Size]);
  std::memcpy(Copy.get(), Data, Size);
  (void)mlopt::tfliteModelProblem(Copy.get(), Size);
  return 0;
}
