#include "ModelTensor.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <sstream>

namespace mlopt {

std::string ModelTensor::describe() const {
  std::ostringstream OS;
  OS << (KnownType ? tensorTypeName(Type) : "unsupported type") << " [";
  for (size_t I = 0; I < Shape.size(); ++I)
    OS << (I ? "," : "") << Shape[I];
  OS << "]";
  return OS.str();
}

void *allocateTensorMemory(size_t ByteSize, size_t *Allocated) {
  size_t Size = ByteSize ? (ByteSize + 63) / 64 * 64 : 64;
  void *P = std::aligned_alloc(64, Size);
  if (!P)
    throw std::bad_alloc();
  std::memset(P, 0, Size);
  if (Allocated)
    *Allocated = Size;
  return P;
}

} // namespace mlopt
