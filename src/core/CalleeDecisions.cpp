#include "CalleeDecisions.h"

#include "FileBytes.h"

namespace mlopt {

std::map<std::string, bool> readCalleeDecisions(const std::string &Path) {
  const std::string Bytes = readFileBytes(Path, size_t(64) << 20);
  std::map<std::string, bool> Decisions;
  size_t Line = 0;
  for (size_t Start = 0; Start < Bytes.size();) {
    size_t End = Bytes.find('\n', Start);
    if (End == std::string::npos)
      End = Bytes.size();
    ++Line;
    std::string Text = Bytes.substr(Start, End - Start);
    if (!Text.empty() && Text.back() == '\r')
      Text.pop_back();
    const size_t At = Start;
    Start = End + 1;
    if (Text.empty() || Text[0] == '#')
      continue;
    if (Text.size() < 3 || (Text[0] != '0' && Text[0] != '1') || Text[1] != ' ' ||
        Text.find_first_of(" \t", 2) != std::string::npos)
      throw CalleeDecisionsError(Path + ": line " + std::to_string(Line) + " (byte " +
                                 std::to_string(At) + ") is not \"<0|1> <callee name>\"");
    Decisions[Text.substr(2)] = Text[0] == '1';
  }
  return Decisions;
}

} // namespace mlopt
