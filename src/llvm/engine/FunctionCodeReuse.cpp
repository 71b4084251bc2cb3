#include "FunctionCodeReuse.h"
#include "ObjectTextSize.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InlineAsm.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/Mangler.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCAsmInfo.h"
#include "llvm/MC/MCContext.h"
#include "llvm/MC/MCDisassembler/MCDisassembler.h"
#include "llvm/MC/MCInst.h"
#include "llvm/MC/MCInstrAnalysis.h"
#include "llvm/MC/MCInstrInfo.h"
#include "llvm/MC/MCRegisterInfo.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"
#include "llvm/Target/TargetMachine.h"

#include <algorithm>
#include <set>

using namespace llvm;

namespace mlopt {

std::optional<uint64_t> FunctionCodeCache::lookup(const Key &K) const {
  std::lock_guard<std::mutex> Guard(Lock);
  auto It = Sizes.find(K);
  if (It == Sizes.end())
    return std::nullopt;
  return It->second;
}

void FunctionCodeCache::insert(const Key &K, uint64_t Size) {
  std::lock_guard<std::mutex> Guard(Lock);
  Sizes.emplace(K, Size);
}

size_t FunctionCodeCache::size() const {
  std::lock_guard<std::mutex> Guard(Lock);
  return Sizes.size();
}
uint64_t FunctionCodeCache::reused() const {
  std::lock_guard<std::mutex> Guard(Lock);
  return Reused;
}
uint64_t FunctionCodeCache::compiled() const {
  std::lock_guard<std::mutex> Guard(Lock);
  return Compiled;
}
uint64_t FunctionCodeCache::redone() const {
  std::lock_guard<std::mutex> Guard(Lock);
  return Redone;
}
void FunctionCodeCache::count(uint64_t R, uint64_t C, bool Again) {
  std::lock_guard<std::mutex> Guard(Lock);
  Reused += R;
  Compiled += C;
  Redone += Again;
}

unsigned ReusePlan::stubs() const {
  return std::count_if(Functions.begin(), Functions.end(),
                       [](const Entry &E) { return E.StubSize.has_value(); });
}

namespace {

std::string digest(StringRef Text) {
  XXH128_hash_t H =
      xxh3_128bits(ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(Text.data()), Text.size()));
  return utohexstr(H.high64, false, 16) + utohexstr(H.low64, false, 16);
}

bool isNameChar(char C) { return isAlnum(C) || C == '$' || C == '.' || C == '_' || C == '-'; }

/// The token after a sigil at Pos ("@x", "%\"a b\"", "$c"): its length.
size_t tokenLength(StringRef Line, size_t Pos) {
  size_t I = Pos + 1;
  if (I < Line.size() && Line[I] == '"') {
    size_t End = Line.find('"', I + 1); // IR escapes '"' inside names as \22
    return End == StringRef::npos ? Line.size() - Pos : End + 1 - Pos;
  }
  while (I < Line.size() && isNameChar(Line[I]))
    ++I;
  return I - Pos;
}

/// The printed module, cut into what a function's key resolves.
struct ModuleText {
  std::string Text;
  std::map<StringRef, StringRef> AttributeGroups;   // "N" -> "{ ... }"
  std::map<StringRef, StringRef> Metadata;          // "N" -> the node after "= "
  std::map<StringRef, StringRef> Globals;           // "@x" -> its line (variables, aliases)
  std::map<StringRef, StringRef> FunctionHeaders;   // "@f" -> its declare / define line
  std::map<StringRef, StringRef> Types;             // "%T" -> its line
  std::map<StringRef, StringRef> Comdats;           // "$c" -> its line
  std::vector<std::pair<size_t, size_t>> Functions; // per Function: its lines [first, last]
  std::vector<StringRef> Lines;
  std::vector<StringRef> ContextLines; // target, named metadata
  bool Usable = true;

  explicit ModuleText(const Module &M) {
    raw_string_ostream OS(Text);
    M.print(OS, nullptr);
    OS.flush();
    StringRef Rest(Text);
    while (!Rest.empty()) {
      auto [Line, Next] = Rest.split('\n');
      Lines.push_back(Line);
      Rest = Next;
    }
    for (size_t I = 0; I < Lines.size(); ++I) {
      StringRef L = Lines[I];
      if (L.empty() || L[0] == ';' || L.starts_with("source_filename"))
        continue;
      if (L.starts_with("define ")) {
        size_t First = I;
        while (I < Lines.size() && Lines[I] != "}")
          ++I;
        Functions.emplace_back(First, I);
        FunctionHeaders[nameAfter(L)] = L;
      } else if (L.starts_with("declare ")) {
        Functions.emplace_back(I, I);
        FunctionHeaders[nameAfter(L)] = L;
      } else if (L.starts_with("attributes #")) {
        StringRef N = L.drop_front(12).take_while(isDigit);
        AttributeGroups[N] = L.drop_front(12 + N.size()).ltrim(" =");
      } else if (L.size() > 1 && L[0] == '!' && isDigit(L[1])) {
        StringRef N = L.drop_front(1).take_while(isDigit);
        Metadata[N] = L.drop_front(1 + N.size()).ltrim(" =");
      } else if (L[0] == '!') {
        if (L.starts_with("!llvm.dbg.cu"))
          Usable = false; // debug info: not keyed (see the header)
        ContextLines.push_back(L);
      } else if (L[0] == '@') {
        Globals[L.take_front(tokenLength(L, 0))] = L;
      } else if (L[0] == '%') {
        Types[L.take_front(tokenLength(L, 0))] = L;
      } else if (L[0] == '$') {
        Comdats[L.take_front(tokenLength(L, 0))] = L;
      } else if (L.starts_with("target ")) {
        ContextLines.push_back(L);
      } else if (L.starts_with("module asm")) {
        Usable = false;
      } else if (!L.starts_with("uselistorder")) {
        Usable = false; // something this reader does not know
      }
    }
  }

  /// "@f" in "define ... @f(...".
  static StringRef nameAfter(StringRef Header) {
    size_t At = Header.find('@');
    return At == StringRef::npos ? StringRef() : Header.substr(At, tokenLength(Header, At));
  }
};

/// A canonical text for a group of lines: attribute groups replaced by
/// their contents, metadata renumbered in order of first use and appended,
/// named types, comdats and (one level of) referenced globals appended.
class KeyText {
public:
  KeyText(const ModuleText &MT, std::map<StringRef, std::string> &GlobalDigests)
      : MT(MT), GlobalDigests(GlobalDigests) {}

  void addLine(StringRef Line) {
    bool InString = false;
    for (size_t I = 0; I < Line.size();) {
      char C = Line[I];
      if (C == '"') {
        InString = !InString;
        Out += C;
        ++I;
        continue;
      }
      if (InString) {
        Out += C;
        ++I;
        continue;
      }
      if ((C == '#' || C == '!') && I + 1 < Line.size() && isDigit(Line[I + 1])) {
        StringRef N = Line.substr(I + 1).take_while(isDigit);
        if (C == '#') {
          auto It = MT.AttributeGroups.find(N);
          Out += "#";
          Out += It == MT.AttributeGroups.end() ? "?" + N.str() : It->second.str();
        } else {
          auto [It, New] = LocalMetadata.emplace(N, LocalMetadata.size());
          if (New)
            MetadataQueue.push_back(N);
          Out += "!L" + std::to_string(It->second);
        }
        I += 1 + N.size();
        continue;
      }
      if (C == '@' || C == '%' || C == '$') {
        size_t Len = tokenLength(Line, I);
        StringRef Token = Line.substr(I, Len);
        if (C == '@' && Len > 1)
          GlobalRefs.insert(Token);
        else if (C == '%' && MT.Types.count(Token) && TypeRefs.insert(Token).second)
          TypeQueue.push_back(Token);
        else if (C == '$' && MT.Comdats.count(Token))
          ComdatRefs.insert(Token);
        Out += Token;
        I += Len;
        continue;
      }
      Out += C;
      ++I;
    }
    Out += '\n';
  }

  /// Appends what the lines referenced; FollowGlobals: the digests of the
  /// referenced globals' and functions' own lines.
  std::string finish(bool FollowGlobals) {
    for (size_t K = 0; K < MetadataQueue.size(); ++K) {
      Out += "!L" + std::to_string(K) + " = ";
      auto It = MT.Metadata.find(MetadataQueue[K]);
      addLine(It == MT.Metadata.end() ? StringRef("?") : It->second);
    }
    for (size_t K = 0; K < TypeQueue.size(); ++K) // type definitions name other types
      addLine(MT.Types.find(TypeQueue[K])->second);
    for (StringRef C : ComdatRefs)
      Out += MT.Comdats.find(C)->second.str() + "\n";
    if (FollowGlobals)
      for (StringRef G : GlobalRefs)
        Out += G.str() + " " + globalDigest(G) + "\n";
    return std::move(Out);
  }

private:
  std::string globalDigest(StringRef G) {
    auto Known = GlobalDigests.find(G);
    if (Known != GlobalDigests.end())
      return Known->second;
    StringRef Line;
    if (auto It = MT.Globals.find(G); It != MT.Globals.end())
      Line = It->second;
    else if (auto It = MT.FunctionHeaders.find(G); It != MT.FunctionHeaders.end())
      Line = It->second;
    KeyText Own(MT, GlobalDigests);
    Own.addLine(Line.empty() ? StringRef("?") : Line);
    std::string D = digest(Own.finish(/*FollowGlobals=*/false));
    GlobalDigests[G] = D;
    return D;
  }

  const ModuleText &MT;
  std::map<StringRef, std::string> &GlobalDigests;
  std::string Out;
  std::map<StringRef, unsigned> LocalMetadata;
  std::vector<StringRef> MetadataQueue, TypeQueue;
  std::set<StringRef> GlobalRefs, TypeRefs, ComdatRefs;
};

bool stubbable(const Function &F) {
  if (F.isDeclaration() || F.hasPrivateLinkage() || !F.hasMinSize() || F.hasPrefixData() ||
      F.hasPrologueData() || F.hasFnAttribute("patchable-function-entry") ||
      F.hasFnAttribute("patchable-function-prefix") || F.hasFnAttribute("patchable-function") ||
      F.hasMetadata(LLVMContext::MD_kcfi_type))
    return false;
  for (const BasicBlock &BB : F) {
    if (BB.hasAddressTaken())
      return false;
    // Inline asm may align (zstd's `.p2align 5` in its match loops) or
    // move the location counter: the function's size then depends on its
    // address.
    for (const Instruction &I : BB)
      if (const auto *Call = dyn_cast<CallBase>(&I); Call && Call->isInlineAsm())
        return false;
  }
  return true;
}

/// F's body becomes `.skip Size`, nothing else: no prologue (naked), the
/// attributes, linkage, section and alignment kept.
void stub(Function &F, uint64_t Size) {
  for (BasicBlock &BB : F)
    BB.dropAllReferences();
  while (!F.empty())
    F.begin()->eraseFromParent();
  F.addFnAttr(Attribute::Naked);
  LLVMContext &Ctx = F.getContext();
  IRBuilder<> B(BasicBlock::Create(Ctx, "", &F));
  FunctionType *Void = FunctionType::get(Type::getVoidTy(Ctx), false);
  B.CreateCall(InlineAsm::get(Void, ".skip " + std::to_string(Size), "", /*hasSideEffects=*/true));
  B.CreateUnreachable();
}

} // namespace

ReusePlan planReuse(Module &M, const TargetMachine &TM, const std::string &Options,
                    const FunctionCodeCache &Cache, bool Stub) {
  ReusePlan Plan;
  if (!TM.getTargetTriple().isOSBinFormatELF())
    return Plan;
  ModuleText MT(M);
  if (!MT.Usable || MT.Functions.size() != M.size())
    return Plan;
  std::map<StringRef, std::string> GlobalDigests;
  std::string Context;
  {
    KeyText K(MT, GlobalDigests);
    K.addLine(Options);
    K.addLine(TM.getTargetCPU());
    K.addLine(TM.getTargetFeatureString());
    K.addLine(std::to_string(static_cast<int>(TM.getRelocationModel())) + " " +
              std::to_string(static_cast<int>(TM.getCodeModel())) + " " +
              std::to_string(static_cast<int>(TM.getOptLevel())));
    for (StringRef L : MT.ContextLines)
      K.addLine(L);
    Context = digest(K.finish(/*FollowGlobals=*/true));
  }
  Mangler Mang;
  size_t Index = 0;
  std::vector<std::pair<Function *, uint64_t>> Stubs;
  for (Function &F : M) {
    auto [First, Last] = MT.Functions[Index++];
    if (!stubbable(F))
      continue;
    KeyText K(MT, GlobalDigests);
    K.addLine(Context);
    for (size_t L = First; L <= Last; ++L)
      K.addLine(MT.Lines[L]);
    std::string Text = K.finish(/*FollowGlobals=*/true);
    XXH128_hash_t H = xxh3_128bits(
        ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(Text.data()), Text.size()));
    ReusePlan::Entry E;
    SmallString<128> Symbol;
    Mang.getNameWithPrefix(Symbol, &F, /*CannotUsePrivateLabel=*/false);
    E.Symbol = Symbol.str().str();
    E.Key = {H.low64, H.high64};
    if (Stub)
      E.StubSize = Cache.lookup(E.Key);
    if (E.StubSize)
      Stubs.emplace_back(&F, *E.StubSize);
    Plan.Functions.push_back(std::move(E));
  }
  for (auto [F, Size] : Stubs)
    stub(*F, Size);
  Plan.Enabled = true;
  return Plan;
}

namespace {

/// Bytes the assembler put between functions to align the next one.
bool isPadding(ArrayRef<uint8_t> Bytes) {
  if (Bytes.size() >= 16)
    return false;
  for (uint8_t B : Bytes) // x86 NOPs of every length, int3, zeros
    if (B != 0x90 && B != 0x66 && B != 0x0f && B != 0x1f && B != 0x00 && B != 0x40 && B != 0x44 &&
        B != 0x80 && B != 0x84 && B != 0x2e && B != 0xcc)
      return false;
  return true;
}

struct FunctionSymbol {
  object::SectionRef Section;
  uint64_t Value = 0, Size = 0;
};

} // namespace

bool learnFromObject(StringRef Object, const ReusePlan &Plan, const TargetMachine &TM,
                     FunctionCodeCache &Cache) {
  if (!Plan.Enabled)
    return true;
  Expected<std::unique_ptr<object::ObjectFile>> File =
      object::ObjectFile::createObjectFile(MemoryBufferRef(Object, "object"));
  if (!File) {
    consumeError(File.takeError());
    return Plan.stubs() == 0;
  }
  auto *Elf = dyn_cast<object::ELFObjectFileBase>(File->get());
  if (!Elf)
    return Plan.stubs() == 0;
  std::map<std::string, FunctionSymbol> Symbols;
  std::map<uint64_t, std::vector<std::pair<uint64_t, uint64_t>>> Extents; // by section index
  for (const object::ELFSymbolRef &S : Elf->symbols()) {
    Expected<object::SymbolRef::Type> Type = S.getType();
    Expected<object::section_iterator> Section = S.getSection();
    Expected<StringRef> Name = S.getName();
    Expected<uint64_t> Value = S.getValue();
    if (!Type || !Section || !Name || !Value) {
      consumeError(Type.takeError());
      consumeError(Section.takeError());
      consumeError(Name.takeError());
      consumeError(Value.takeError());
      return Plan.stubs() == 0;
    }
    if (*Type != object::SymbolRef::ST_Function || *Section == Elf->section_end())
      continue;
    Symbols[Name->str()] = {**Section, *Value, S.getSize()};
    Extents[(*Section)->getIndex()].emplace_back(*Value, *Value + S.getSize());
  }
  for (const ReusePlan::Entry &E : Plan.Functions) {
    if (!E.StubSize)
      continue;
    auto It = Symbols.find(E.Symbol);
    if (It == Symbols.end() || It->second.Size != *E.StubSize)
      return false;
  }
  // Every byte of the code sections is some function's or padding: the
  // functions' sizes and alignments are the whole layout.
  std::map<uint64_t, std::vector<uint64_t>> Relocations; // by section index
  for (const object::SectionRef &S : Elf->sections()) {
    Expected<object::section_iterator> Target = S.getRelocatedSection();
    if (!Target) {
      consumeError(Target.takeError());
      return true;
    }
    if (*Target != Elf->section_end())
      for (const object::RelocationRef &R : S.relocations())
        Relocations[(*Target)->getIndex()].push_back(R.getOffset());
    Expected<StringRef> Name = S.getName();
    if (!Name) {
      consumeError(Name.takeError());
      return true;
    }
    if (!isTextSectionName(*Name) || S.getSize() == 0)
      continue;
    Expected<StringRef> Contents = S.getContents();
    if (!Contents) {
      consumeError(Contents.takeError());
      return true;
    }
    std::vector<std::pair<uint64_t, uint64_t>> &Ext = Extents[S.getIndex()];
    std::sort(Ext.begin(), Ext.end());
    uint64_t Cursor = 0;
    auto Bytes = arrayRefFromStringRef(*Contents);
    for (auto [Begin, End] : Ext) {
      if (Begin > Cursor && !isPadding(Bytes.slice(Cursor, Begin - Cursor)))
        return true;
      Cursor = std::max(Cursor, End);
    }
    if (Cursor < Bytes.size() && !isPadding(Bytes.slice(Cursor)))
      return true;
  }
  for (auto &[Section, Offsets] : Relocations)
    std::sort(Offsets.begin(), Offsets.end());

  MCContext Ctx(TM.getTargetTriple(), TM.getMCAsmInfo(), TM.getMCRegisterInfo(),
                TM.getMCSubtargetInfo());
  std::unique_ptr<MCDisassembler> Disassembler(
      TM.getTarget().createMCDisassembler(*TM.getMCSubtargetInfo(), Ctx));
  std::unique_ptr<MCInstrAnalysis> Analysis(
      TM.getTarget().createMCInstrAnalysis(TM.getMCInstrInfo()));
  if (!Disassembler || !Analysis)
    return true;
  // A function's size is its own when no jump leaves it unrelocated: the
  // assembler sized those jumps by the distance to another function.
  auto LayoutFree = [&](const FunctionSymbol &S) {
    Expected<StringRef> Contents = S.Section.getContents();
    if (!Contents) {
      consumeError(Contents.takeError());
      return false;
    }
    if (S.Value + S.Size > Contents->size())
      return false;
    ArrayRef<uint8_t> Bytes = arrayRefFromStringRef(*Contents).slice(S.Value, S.Size);
    const std::vector<uint64_t> &Relocs = Relocations[S.Section.getIndex()];
    for (uint64_t Off = 0; Off < S.Size;) {
      MCInst Inst;
      uint64_t Length = 0;
      uint64_t Address = S.Value + Off;
      if (Disassembler->getInstruction(Inst, Length, Bytes.slice(Off), Address, nulls()) !=
              MCDisassembler::Success ||
          Length == 0)
        return false;
      uint64_t Target = 0;
      if (Analysis->isBranch(Inst) && !Analysis->isCall(Inst) &&
          Analysis->evaluateBranch(Inst, Address, Length, Target) &&
          (Target < S.Value || Target >= S.Value + S.Size)) {
        auto R = std::lower_bound(Relocs.begin(), Relocs.end(), Address);
        if (R == Relocs.end() || *R >= Address + Length)
          return false;
      }
      Off += Length;
    }
    return true;
  };
  for (const ReusePlan::Entry &E : Plan.Functions) {
    if (E.StubSize)
      continue;
    auto It = Symbols.find(E.Symbol);
    if (It != Symbols.end() && LayoutFree(It->second))
      Cache.insert(E.Key, It->second.Size);
  }
  return true;
}

} // namespace mlopt
