//===- PyNames.h - Names between C++ and Python -----------------*- C++ -*-===//
//
// Contract: the bindings' one conversion of names (tensor names, contexts,
// IR function names) whose bytes need not be UTF-8. decodeName: bytes ->
// str with surrogate escapes (undecodable bytes become U+DC80..U+DCFF, as
// os.fsdecode does), never UnicodeDecodeError. nameBytes: a str (encoded
// back with surrogateescape, so such names round-trip) or a bytes-like
// object -> the raw bytes; anything else is a TypeError.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_PYTHON_PYNAMES_H
#define MLOPT_PYTHON_PYNAMES_H

#include <nanobind/nanobind.h>

#include <string>
#include <utility>
#include <vector>

namespace mlopt {

inline nanobind::str decodeName(const std::string &S) {
  PyObject *O = PyUnicode_DecodeUTF8(S.data(), Py_ssize_t(S.size()), "surrogateescape");
  if (!O)
    throw nanobind::python_error();
  return nanobind::steal<nanobind::str>(O);
}

inline nanobind::list decodeNames(const std::vector<std::string> &Names) {
  nanobind::list L;
  for (const std::string &S : Names)
    L.append(decodeName(S));
  return L;
}

inline std::string nameBytes(nanobind::handle H) {
  if (PyUnicode_Check(H.ptr())) {
    PyObject *B = PyUnicode_AsEncodedString(H.ptr(), "utf-8", "surrogateescape");
    if (!B)
      throw nanobind::python_error();
    nanobind::bytes Bytes = nanobind::steal<nanobind::bytes>(B);
    return std::string(Bytes.c_str(), Bytes.size());
  }
  if (nanobind::isinstance<nanobind::bytes>(H)) {
    nanobind::bytes Bytes = nanobind::borrow<nanobind::bytes>(H);
    return std::string(Bytes.c_str(), Bytes.size());
  }
  throw nanobind::type_error("expected str or bytes");
}

} // namespace mlopt

#endif
