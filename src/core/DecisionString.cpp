#include "DecisionString.h"

#include "FileBytes.h"

namespace mlopt {

std::string readDecisionString(const std::string &Path) {
  const std::string Bytes = readFileBytes(Path, size_t(64) << 20);
  std::string Decisions;
  Decisions.reserve(Bytes.size());
  for (size_t I = 0; I < Bytes.size(); ++I) {
    const char C = Bytes[I];
    if (C == '0' || C == '1')
      Decisions += C;
    else if (C != ' ' && C != '\n' && C != '\r' && C != '\t')
      throw DecisionStringError(Path + ": byte " + std::to_string(I) +
                                " is not a decision ('0' or '1') nor whitespace");
  }
  return Decisions;
}

} // namespace mlopt
