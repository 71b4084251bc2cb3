#include "ObjectTextSize.h"
#include "InProcessCompiler.h"

#include "llvm/BinaryFormat/ELF.h"
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/xxhash.h"

using namespace llvm;

namespace mlopt {

bool isTextSectionName(StringRef Name) {
  return Name == ".text" || Name.starts_with(".text.") || Name.starts_with(".text$") ||
         Name == "__text";
}

ObjectCodeSize objectCodeSize(StringRef Object, const std::string &Name, bool Grouped) {
  Expected<std::unique_ptr<object::ObjectFile>> File =
      object::ObjectFile::createObjectFile(MemoryBufferRef(Object, Name));
  if (!File)
    throw CompileError(Name + ": cannot read the object code: " + toString(File.takeError()));
  bool IsELF = isa<object::ELFObjectFileBase>(File->get());
  ObjectCodeSize Out;
  for (const object::SectionRef &Section : (*File)->sections()) {
    Expected<StringRef> SectionName = Section.getName();
    if (!SectionName) {
      consumeError(SectionName.takeError());
      continue;
    }
    if (!isTextSectionName(*SectionName))
      continue;
    Out.Text += Section.getSize();
    if (Grouped && IsELF && (object::ELFSectionRef(Section).getFlags() & ELF::SHF_GROUP))
      Out.Grouped.push_back({xxh3_64bits(*SectionName), Section.getSize()});
  }
  return Out;
}

uint64_t objectTextSize(StringRef Object, const std::string &Name) {
  return objectCodeSize(Object, Name, /*Grouped=*/false).Text;
}

} // namespace mlopt
