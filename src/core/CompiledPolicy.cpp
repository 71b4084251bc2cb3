#include "CompiledPolicy.h"
#include "ByteSink.h"
#include "FileBytes.h"
#include "PolicyModel.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include <cstdlib>
#include <cstring>

namespace mlopt {

namespace {
constexpr size_t MaxPolicyTensorBytes = size_t(64) << 20; // as TfliteVerifier
constexpr size_t MaxPolicyFileBytes = size_t(256) << 20;

std::vector<ModelTensor> readTensors(const json::Value &Sig, const char *Key,
                                     const std::string &Path) {
  const json::Value *List = Sig.get(Key);
  if (!List || !List->isArray())
    throw PolicyError(Path + ": compiled policy signature has no \"" + Key + "\" array");
  std::vector<ModelTensor> Out;
  for (const json::Value &T : List->asArray()) {
    const json::Value *SN = T.isObject() ? T.get("signature_name") : nullptr;
    const json::Value *TN = T.isObject() ? T.get("tensor_name") : nullptr;
    const json::Value *Ty = T.isObject() ? T.get("type") : nullptr;
    const json::Value *Sh = T.isObject() ? T.get("shape") : nullptr;
    if (!SN || !SN->isString() || !TN || !TN->isString() || !Ty || !Ty->isString() || !Sh ||
        !Sh->isArray())
      throw PolicyError(Path + ": malformed tensor in the compiled policy signature");
    ModelTensor M;
    M.SignatureName = SN->asString();
    M.TensorName = TN->asString();
    std::optional<TensorType> Type = tensorTypeFromName(Ty->asString());
    M.KnownType = Type.has_value();
    M.Type = Type.value_or(TensorType::UInt8); // unknown: counted in bytes
    for (const json::Value &D : Sh->asArray()) {
      if (!D.isInt() || D.asInt() < 0)
        throw PolicyError(Path + ": tensor '" + M.TensorName + "' has a bad dimension");
      M.Shape.push_back(D.asInt());
    }
    try { // the same rank and size limits as every tensor spec
      M.ByteSize = TensorSpec(M.TensorName, M.Type, M.Shape).byteSize();
    } catch (const SpecError &E) {
      throw PolicyError(Path + ": compiled policy signature: " + E.what());
    }
    if (M.ByteSize > MaxPolicyTensorBytes)
      throw PolicyError(Path + ": tensor '" + M.TensorName + "' of " + std::to_string(M.ByteSize) +
                        " bytes is too large for a policy");
    Out.push_back(std::move(M));
  }
  return Out;
}

} // namespace

CompiledPolicySignature parseCompiledPolicySignature(const char *Text, const std::string &Path) {
  json::Value Sig;
  try {
    Sig = json::parse(Text ? Text : "");
  } catch (const json::JsonError &E) {
    throw PolicyError(Path + ": compiled policy signature: byte " + std::to_string(E.offset()) +
                      ": " + E.what());
  }
  if (!Sig.isObject())
    throw PolicyError(Path + ": compiled policy signature is not a JSON object");
  CompiledPolicySignature S;
  S.Inputs = readTensors(Sig, "inputs", Path);
  S.Outputs = readTensors(Sig, "outputs", Path);
  if (const json::Value *Spec = Sig.get("output_spec"))
    S.OutputSpec = *Spec;
  return S;
}

namespace {
/// Why the dynamic loader must not be given these bytes, or "" when they are
/// an ELF shared object whose headers and loaded segments lie inside them.
/// glibc's dlopen maps segments without checking them against the file's
/// size: a truncated library (a half-written copy) is a SIGBUS, not an error.
std::string elfProblem(const std::string &Bytes) {
  if (Bytes.size() < sizeof(Elf64_Ehdr) || std::memcmp(Bytes.data(), ELFMAG, SELFMAG) != 0)
    return "not an ELF file";
  if (Bytes[EI_CLASS] != ELFCLASS64)
    return "not a 64-bit ELF file";
  Elf64_Ehdr H;
  std::memcpy(&H, Bytes.data(), sizeof H);
  if (H.e_type != ET_DYN)
    return "not an ELF shared object";
  uint64_t Size = Bytes.size();
  if (H.e_phentsize != sizeof(Elf64_Phdr) || H.e_phoff > Size ||
      uint64_t(H.e_phnum) * sizeof(Elf64_Phdr) > Size - H.e_phoff)
    return "truncated or corrupt ELF file (program headers outside the file)";
  for (uint16_t I = 0; I < H.e_phnum; ++I) {
    Elf64_Phdr Ph;
    std::memcpy(&Ph, Bytes.data() + H.e_phoff + uint64_t(I) * sizeof Ph, sizeof Ph);
    if ((Ph.p_type == PT_LOAD || Ph.p_type == PT_DYNAMIC) &&
        (Ph.p_offset > Size || Ph.p_filesz > Size - Ph.p_offset))
      return "truncated or corrupt ELF file (a segment ends after the file's " +
             std::to_string(Size) + " bytes)";
  }
  return "";
}

/// dlopen()s a private copy of the file, so that the policy in use cannot
/// change or vanish under the compiler (a .so truncated in place while
/// mapped would otherwise be a SIGBUS). The copy has a unique name (the
/// dynamic loader reuses a loaded library of the same name) and is unlinked
/// at once: its mapping lives on. Without a writable temporary directory
/// the file itself is opened.
void *openPrivateCopy(const std::string &Path, std::string &Error) {
  std::string Bytes;
  try {
    Bytes = readFileBytes(Path, MaxPolicyFileBytes);
  } catch (const FileError &E) {
    Error = E.code().value() == EFBIG ? "larger than 256 MiB" : E.code().message();
    return nullptr;
  }
  if (std::string Problem = elfProblem(Bytes); !Problem.empty()) {
    Error = Problem;
    return nullptr;
  }
  const char *Tmp = std::getenv("TMPDIR");
  std::string Dir = std::string(Tmp && *Tmp ? Tmp : "/tmp") + "/mlopt-policy-XXXXXX";
  std::string Copy;
  if (::mkdtemp(Dir.data())) {
    Copy = Dir + "/policy.so";
    try {
      std::unique_ptr<FdSink> Out = FdSink::create(Copy, /*Overwrite=*/false);
      Out->write(Bytes.data(), Bytes.size());
      Out->flush();
    } catch (const FileError &) { // no room for the copy: open the file itself
      ::unlink(Copy.c_str());
      ::rmdir(Dir.c_str());
      Copy.clear();
    }
  }
  void *Handle = dlopen(
      (Copy.empty() ? (Path.find('/') == std::string::npos ? "./" + Path : Path) : Copy).c_str(),
      RTLD_NOW | RTLD_LOCAL);
  if (!Handle) {
    const char *Err = dlerror();
    Error = Err ? Err : "dlopen failed";
    // dlerror names the private copy; name the user's file instead.
    if (size_t At = Copy.empty() ? std::string::npos : Error.find(Copy); At != std::string::npos)
      Error.replace(At, Copy.size(), Path);
  }
  if (!Copy.empty()) {
    ::unlink(Copy.c_str());
    ::rmdir(Dir.c_str());
  }
  return Handle;
}
} // namespace

std::unique_ptr<CompiledPolicy> CompiledPolicy::load(const std::string &Path) {
  std::unique_ptr<CompiledPolicy> P(new CompiledPolicy());
  P->Path = Path;
  std::string Error;
  P->Handle = openPrivateCopy(Path, Error);
  if (!P->Handle)
    throw PolicyError(Path + ": cannot load the compiled policy: " + Error);
  auto Version = reinterpret_cast<int (*)()>(dlsym(P->Handle, "mlopt_policy_abi_version"));
  auto Signature = reinterpret_cast<const char *(*)()>(dlsym(P->Handle, "mlopt_policy_signature"));
  P->Evaluate = reinterpret_cast<int (*)(const void *const *, void *const *)>(
      dlsym(P->Handle, "mlopt_policy_evaluate"));
  if (!Version || !Signature || !P->Evaluate)
    throw PolicyError(Path + ": not an mlopt compiled policy (missing mlopt_policy_* symbols)");
  if (int V = Version(); V != CompiledPolicyABIVersion)
    throw PolicyError(Path + ": compiled policy ABI version " + std::to_string(V) +
                      ", this mlopt reads version " + std::to_string(CompiledPolicyABIVersion) +
                      " (recompile it with `mlopt policy compile`)");
  CompiledPolicySignature Sig = parseCompiledPolicySignature(Signature(), Path);
  P->Inputs = std::move(Sig.Inputs);
  P->Outputs = std::move(Sig.Outputs);
  P->OutputSpec = std::move(Sig.OutputSpec);
  for (const ModelTensor &T : P->Inputs)
    P->InputMemory.push_back(allocateTensorMemory(T.ByteSize));
  for (const ModelTensor &T : P->Outputs)
    P->OutputMemory.push_back(allocateTensorMemory(T.ByteSize));
  P->run(); // as LiteRtModel: a policy that cannot run fails at load
  for (size_t I = 0; I < P->Outputs.size(); ++I)
    std::memset(P->OutputMemory[I], 0, P->Outputs[I].ByteSize);
  return P;
}

CompiledPolicy::~CompiledPolicy() {
  for (void *M : InputMemory)
    std::free(M);
  for (void *M : OutputMemory)
    std::free(M);
  // The handle stays open: code from it may still be referenced by callers
  // holding function-local statics; unloading buys nothing in a compiler.
}

void CompiledPolicy::run() {
  if (int S = Evaluate(InputMemory.data(), OutputMemory.data()); S != 0)
    throw PolicyError(Path + ": compiled policy evaluation failed (status " + std::to_string(S) +
                      ")");
}

} // namespace mlopt
