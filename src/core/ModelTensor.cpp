#include "ModelTensor.h"

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

} // namespace mlopt
