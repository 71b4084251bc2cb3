#include "CompiledPolicy.h"
#include "PolicyModel.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

namespace mlopt {

namespace {
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
    M.Type = Type.value_or(TensorType::Float);
    size_t Count = 1;
    for (const json::Value &D : Sh->asArray()) {
      if (!D.isInt() || D.asInt() < 0)
        throw PolicyError(Path + ": tensor '" + M.TensorName + "' has a bad dimension");
      M.Shape.push_back(D.asInt());
      Count *= size_t(D.asInt());
    }
    M.ByteSize = Count * (M.KnownType ? tensorTypeSize(M.Type) : 1);
    Out.push_back(std::move(M));
  }
  return Out;
}

} // namespace

std::unique_ptr<CompiledPolicy> CompiledPolicy::load(const std::string &Path) {
  std::unique_ptr<CompiledPolicy> P(new CompiledPolicy());
  P->Path = Path;
  // A path without '/' would be searched for in the library path.
  std::string Open = Path.find('/') == std::string::npos ? "./" + Path : Path;
  P->Handle = dlopen(Open.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!P->Handle) {
    const char *Err = dlerror();
    throw PolicyError(Path + ": cannot load the compiled policy: " + (Err ? Err : "dlopen failed"));
  }
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
  json::Value Sig;
  try {
    const char *Text = Signature();
    Sig = json::parse(Text ? Text : "");
  } catch (const json::JsonError &E) {
    throw PolicyError(Path + ": compiled policy signature: byte " + std::to_string(E.offset()) +
                      ": " + E.what());
  }
  if (!Sig.isObject())
    throw PolicyError(Path + ": compiled policy signature is not a JSON object");
  P->Inputs = readTensors(Sig, "inputs", Path);
  P->Outputs = readTensors(Sig, "outputs", Path);
  if (const json::Value *Spec = Sig.get("output_spec"))
    P->OutputSpec = *Spec;
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
