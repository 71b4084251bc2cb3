//===- ErrorTranslator.h - mlopt's C++ errors as Python exceptions -*- C++ -*-===//
//
// Contract: registerErrorTranslator() installs, for the calling extension
// module, the one translation of every mlopt C++ error into its class in
// mlopt.errors (all derive from MloptError): LogFormatError keeps its
// reason and byte offset, FileError becomes OutputExistsError for an output
// that exists, else an OSError with errno and path (FileNotFoundError, ...). Both extension modules
// (_core and _engine) register it, so an error means the same whichever
// module raised it. Messages quote input: every byte of them that is not
// UTF-8 becomes \xNN (json::escapeNonUTF8), so that no message can turn
// into a UnicodeDecodeError; a path keeps its bytes (os.fsdecode's
// surrogateescape).
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_PYTHON_ERRORTRANSLATOR_H
#define MLOPT_PYTHON_ERRORTRANSLATOR_H

#include "ByteSink.h"
#include "Errors.h"
#include "Json.h"
#include "LiteRtModel.h"
#include "PolicyModel.h"
#include "TensorSpec.h"
#include "TrainingLogParser.h"
#include "TrainingLogWriter.h"

#include <nanobind/nanobind.h>

#include <cerrno>

namespace mlopt {

/// The exception type mlopt.errors.<Name>.
inline nanobind::object errorClass(const char *Name) {
  return nanobind::module_::import_("mlopt.errors").attr(Name);
}

inline void raisePythonError(nanobind::object Instance) {
  PyErr_SetObject(reinterpret_cast<PyObject *>(Py_TYPE(Instance.ptr())), Instance.ptr());
}

/// A message as a Python str: bytes that are not UTF-8 shown as \xNN.
inline nanobind::str messageText(const std::string &S) {
  std::string T = json::escapeNonUTF8(S);
  return nanobind::str(T.data(), T.size());
}

/// A path as os.fsdecode gives it (undecodable bytes as surrogates).
inline nanobind::object pathText(const std::string &S) {
  PyObject *O = PyUnicode_DecodeFSDefaultAndSize(S.data(), Py_ssize_t(S.size()));
  if (!O)
    throw nanobind::python_error();
  return nanobind::steal(O);
}

inline void translateError(const std::exception_ptr &P, void *) {
  try {
    std::rethrow_exception(P);
  } catch (const LogFormatError &E) {
    raisePythonError(errorClass("LogFormatError")(messageText(E.reason()), E.offset()));
  } catch (const LogUsageError &E) {
    raisePythonError(errorClass("LogUsageError")(messageText(E.what())));
  } catch (const PolicyError &E) {
    raisePythonError(errorClass("PolicyError")(messageText(E.what())));
  } catch (const LiteRtError &E) {
    raisePythonError(errorClass("PolicyError")(messageText(E.what())));
  } catch (const SpecError &E) {
    raisePythonError(errorClass("SpecError")(messageText(E.what())));
  } catch (const json::JsonError &E) {
    raisePythonError(errorClass("SpecError")(
        messageText(std::string("byte ") + std::to_string(E.offset()) + ": " + E.what())));
  } catch (const ModuleError &E) {
    raisePythonError(errorClass("ModuleError")(messageText(E.what())));
  } catch (const IR2VecVocabError &E) {
    raisePythonError(errorClass("IR2VecVocabError")(messageText(E.what())));
  } catch (const CompileError &E) {
    raisePythonError(errorClass("CompileError")(messageText(E.what())));
  } catch (const FileError &E) {
    if (E.code().value() == EEXIST) // an output mlopt would not replace
      raisePythonError(errorClass("OutputExistsError")(pathText(E.path())));
    else
      raisePythonError(nanobind::handle(PyExc_OSError)(E.code().value(), E.code().message(),
                                                       pathText(E.path())));
  }
}

inline void registerErrorTranslator() { nanobind::register_exception_translator(translateError); }

} // namespace mlopt

#endif
