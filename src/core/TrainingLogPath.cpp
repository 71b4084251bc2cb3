#include "TrainingLogPath.h"
#include "ByteSink.h" // FileError

#include <cerrno>
#include <sys/stat.h>
#include <unistd.h>

namespace mlopt {

std::string trainingLogModuleName(const std::string &SourceFile, const std::string &ModuleId) {
  std::string Name = SourceFile.empty() ? ModuleId : SourceFile;
  size_t Start = 0;
  while (true) {
    if (Name.compare(Start, 2, "./") == 0)
      Start += 2;
    else if (Start < Name.size() && Name[Start] == '/')
      ++Start;
    else
      break;
  }
  Name.erase(0, Start);
  for (char &C : Name)
    if (C == '/')
      C = '_';
  return Name.empty() ? std::string("module") : Name;
}

std::string linkTimeModuleName(const std::string &Output, bool ThinLTOBackend,
                               const std::string &SourceFile, const std::string &ModuleId) {
  std::string Link = trainingLogModuleName(Output.empty() ? std::string("a.out") : Output, "");
  if (!ThinLTOBackend)
    return Link + ".lto";
  return Link + ".thinlto/" + trainingLogModuleName(SourceFile, ModuleId);
}

std::string expandTrainingLogPath(const std::string &Pattern, const std::string &ModuleName) {
  std::string P = Pattern;
  if (!P.empty() && P.back() == '/')
    P += "%m.log";
  std::string Out;
  for (size_t I = 0; I < P.size(); ++I) {
    if (P[I] != '%' || I + 1 == P.size()) {
      Out += P[I];
      continue;
    }
    char C = P[I + 1];
    if (C == 'm')
      Out += ModuleName;
    else if (C == 'p')
      Out += std::to_string(::getpid());
    else if (C == '%')
      Out += '%';
    else {
      Out += '%';
      continue;
    }
    ++I;
  }
  return Out;
}

void makeParentDirectory(const std::string &Path) {
  size_t Slash = Path.rfind('/');
  if (Slash == std::string::npos || Slash == 0)
    return;
  for (size_t I = 1; I <= Slash; ++I) {
    if (Path[I] != '/')
      continue;
    std::string Dir = Path.substr(0, I);
    if (::mkdir(Dir.c_str(), 0755) != 0 && errno != EEXIST)
      throw FileError(errno, "cannot create directory '" + Dir + "'", Dir);
  }
}

} // namespace mlopt
