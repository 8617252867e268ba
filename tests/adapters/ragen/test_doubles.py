"""
The verl ``DataProto`` double behaves as verl's (v0.6.1) on what RAGEN's filter path uses.

Each test runs on the double; where the real verl is importable, the same checks run on
``verl.DataProto`` too, so the double cannot drift from it unnoticed.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from . import verl_types
from .verl_types import DataProtoDouble, DataProtoItem

CLASSES = [DataProtoDouble] + ([verl_types.DataProto] if verl_types.REAL_VERL else [])


def _proto(cls, rows=4):
    return cls(
        batch=TensorDict({"x": torch.arange(rows, dtype=torch.float32)}, batch_size=[rows]),
        non_tensor_batch={
            "g": np.arange(rows) // 2,
            "m": np.array([[{"r": i}] for i in range(rows)], dtype=object),
        },
        meta_info={"k": 1},
    )


@pytest.mark.parametrize("cls", CLASSES)
class TestDataProto:
    def test_len_is_the_batch_size(self, cls):
        """len() is the TensorDict's batch size, even after masking to zero rows."""
        proto = _proto(cls)
        proto.batch = proto.batch[torch.zeros(4, dtype=torch.bool)]

        assert 4 == len(_proto(cls))
        assert 0 == len(proto)

    def test_len_without_tensors_uses_numpy_columns(self, cls):
        """With no TensorDict, len() reads the first numpy column."""
        assert 3 == len(cls(batch=None, non_tensor_batch={"g": np.arange(3)}))
        assert 0 == len(cls())

    def test_boolean_mask_indexing(self, cls):
        """Indexing with a bool tensor selects rows of every column and shares meta_info."""
        proto = _proto(cls)

        picked = proto[torch.tensor([True, False, True, False])]

        assert [0.0, 2.0] == picked.batch["x"].tolist()
        assert [0, 1] == picked.non_tensor_batch["g"].tolist()
        assert picked.meta_info is proto.meta_info

    def test_slice_and_integer(self, cls):
        """A slice gives a DataProto; an integer gives one item."""
        proto = _proto(cls)

        assert [2.0, 3.0] == proto[2:].batch["x"].tolist()
        assert 1.0 == float(proto[1].batch["x"])
        assert type(proto[1]).__name__ == DataProtoItem.__name__

    def test_consistency_is_checked_on_construction(self, cls):
        """A numpy column of the wrong length is refused when the DataProto is built."""
        with pytest.raises(AssertionError):
            cls(
                batch=TensorDict({"x": torch.zeros(4)}, batch_size=[4]),
                non_tensor_batch={"g": np.arange(3)},
            )

    def test_from_dict_wraps_lists_as_object_arrays(self, cls):
        """from_dict builds the TensorDict and turns plain lists into numpy object arrays."""
        proto = cls.from_dict(tensors={"x": torch.zeros(2, 3)}, non_tensors={"g": [1, 2]})

        assert (2,) == tuple(proto.batch.batch_size)
        assert isinstance(proto.non_tensor_batch["g"], np.ndarray)
