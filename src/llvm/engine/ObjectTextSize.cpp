#include "ObjectTextSize.h"
#include "InProcessCompiler.h"

#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace llvm;

namespace mlopt {

bool isTextSectionName(StringRef Name) {
  return Name == ".text" || Name.starts_with(".text.") || Name.starts_with(".text$") ||
         Name == "__text";
}

uint64_t objectTextSize(StringRef Object, const std::string &Name) {
  Expected<std::unique_ptr<object::ObjectFile>> File =
      object::ObjectFile::createObjectFile(MemoryBufferRef(Object, Name));
  if (!File)
    throw CompileError(Name + ": cannot read the object code: " + toString(File.takeError()));
  uint64_t Size = 0;
  for (const object::SectionRef &Section : (*File)->sections()) {
    Expected<StringRef> SectionName = Section.getName();
    if (!SectionName) {
      consumeError(SectionName.takeError());
      continue;
    }
    if (isTextSectionName(*SectionName))
      Size += Section.getSize();
  }
  return Size;
}

} // namespace mlopt
