import json
import pickle

import numpy as np
import pytest

import mlopt
from mlopt import TensorSpec

TYPES = [
    ("float", np.float32, 4), ("double", np.float64, 8),
    ("int8_t", np.int8, 1), ("uint8_t", np.uint8, 1),
    ("int16_t", np.int16, 2), ("uint16_t", np.uint16, 2),
    ("int32_t", np.int32, 4), ("uint32_t", np.uint32, 4),
    ("int64_t", np.int64, 8), ("uint64_t", np.uint64, 8),
]


@pytest.mark.parametrize("name,dtype,size", TYPES)
def test_types_sizes_and_dtypes(name, dtype, size):
    s = TensorSpec("x", name, [2, 3])
    assert s.type == name
    assert s.dtype == np.dtype(dtype)
    assert s.element_size == size
    assert s.element_count == 6
    assert s.byte_size == 6 * size
    # numpy dtypes are accepted and map to the same LLVM type
    assert TensorSpec("x", dtype, [2, 3]) == s


def test_llvm_json_form_and_key_order():
    s = TensorSpec("mask", "int64_t", [1, 33])
    assert s.to_json() == '{"name":"mask","type":"int64_t","port":0,"shape":[1,33]}'
    assert TensorSpec("t", "float", [2], port=1).to_json() == (
        '{"name":"t","type":"float","port":1,"shape":[2]}'
    )


def test_scalar_shape_has_one_element():
    s = TensorSpec("s", "double", [])
    assert s.element_count == 1 and s.byte_size == 8
    assert s.to_json() == '{"name":"s","type":"double","port":0,"shape":[]}'


def test_name_escaping_matches_llvm_rules():
    s = TensorSpec('a"b\\c\td\n\x01\x7f', "int8_t", [1])
    assert s.to_json() == '{"name":"a\\"b\\\\c\\td\\n\\u0001\x7f","type":"int8_t","port":0,"shape":[1]}'
    assert TensorSpec.from_json(s.to_json()) == s


def test_from_json_any_key_order_and_dict():
    s = TensorSpec.from_json('{"shape":[4],"port":2,"type":"uint16_t","name":"n"}')
    assert (s.name, s.type, s.shape, s.port) == ("n", "uint16_t", (4,), 2)
    assert TensorSpec.from_json(json.loads(s.to_json())) == s


@pytest.mark.parametrize(
    "text,message",
    [
        ('{"name":"x","type":"int128_t","port":0,"shape":[1]}', "unknown tensor type 'int128_t'"),
        ('{"name":"x","type":"float","shape":[1]}', "needs an integer 'port'"),
        ('{"type":"float","port":0,"shape":[1]}', "needs a string 'name'"),
        ('{"name":"x","type":"float","port":0,"shape":[-1]}', "negative dimension"),
        ('{"name":"x","type":"float","port":0,"shape":[1.5]}', "'shape' must hold integers"),
        ('[1]', "not a JSON object"),
        ('{"name":', "bad tensor spec JSON"),
    ],
)
def test_from_json_errors(text, message):
    with pytest.raises(ValueError, match=message):
        TensorSpec.from_json(text)


def test_bad_types_rejected():
    with pytest.raises(ValueError, match="unknown tensor type"):
        TensorSpec("x", "int128", [1])
    with pytest.raises(ValueError, match="no MLGO tensor type"):
        TensorSpec("x", np.complex64, [1])


def test_equality_hash_pickle_rename():
    a = TensorSpec("a", "float", [2])
    assert a == TensorSpec("a", "float", [2])
    assert a != TensorSpec("a", "float", [2], port=1)
    assert a != TensorSpec("a", "double", [2])
    assert len({a, TensorSpec("a", "float", [2])}) == 1
    assert pickle.loads(pickle.dumps(a)) == a
    b = a.renamed("b")
    assert (b.name, b.type, b.shape) == ("b", "float", (2,))
    assert repr(TensorSpec("p", "int32_t", [1], port=3)) == "TensorSpec('p', 'int32_t', [1], port=3)"
    assert mlopt.TensorSpec is TensorSpec
