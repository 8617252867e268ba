"""
A faithful double of verl's ``DataProto``, the batch type RAGEN's rollout filter receives.

Mirrors ``verl/protocol.py`` at volcengine/verl ``d62da4950573d7a4b7ef2362337952e7ab59e78d``
(v0.6.1, the verl submodule RAGEN ``20daedc`` pins): a dataclass of a 1-D ``TensorDict``
(``batch``), a dict of numpy arrays with one entry per row (``non_tensor_batch``) and a
``meta_info`` dict; the consistency check runs on construction (``AssertionError``, as in
verl); ``len()`` is the TensorDict batch size, else the first numpy column's length;
indexing with a slice, list, numpy array or tensor returns a new ``DataProto`` sharing
``meta_info``, an integer returns a ``DataProtoItem``.

When the real verl is importable (``pip install verl==0.9.1`` in a separate environment),
``DataProto`` below *is* ``verl.DataProto`` and the tests run against it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict

VERL_COMMIT = "d62da4950573d7a4b7ef2362337952e7ab59e78d"


@dataclass
class DataProtoItem:
    """One row of a ``DataProto`` (what integer indexing returns)."""

    batch: Any = None
    non_tensor_batch: dict[str, Any] = field(default_factory=dict)
    meta_info: dict[str, Any] = field(default_factory=dict)


@dataclass
class DataProtoDouble:
    """verl's ``DataProto`` (v0.6.1), limited to what RAGEN's trainer and filters use."""

    batch: Any = None
    non_tensor_batch: dict[str, Any] = field(default_factory=dict)
    meta_info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.check_consistency()

    def check_consistency(self) -> None:
        if self.batch is not None:
            assert len(self.batch.batch_size) == 1, "only support num_batch_dims=1"
        for key, value in (self.non_tensor_batch or {}).items():
            assert isinstance(value, np.ndarray), f"non_tensor_batch[{key!r}] must be a numpy array"
            if self.batch is not None:
                assert value.shape[0] == self.batch.batch_size[0], (
                    f"key {key} length {len(value)} is not equal to batch size {self.batch.batch_size[0]}"
                )

    def __len__(self) -> int:
        if self.batch is not None:
            return int(self.batch.batch_size[0])
        if self.non_tensor_batch:
            return int(next(iter(self.non_tensor_batch.values())).shape[0])
        return 0

    def __getitem__(self, item: Any) -> Any:
        if isinstance(item, slice):
            return self.slice(item.start, item.stop, item.step)
        if isinstance(item, (list, np.ndarray, torch.Tensor)):
            return self.select_idxs(item)
        if isinstance(item, (int, np.integer)):
            return DataProtoItem(
                batch=None if self.batch is None else self.batch[item],
                non_tensor_batch={key: value[item] for key, value in self.non_tensor_batch.items()},
                meta_info=self.meta_info,
            )
        msg = f"Indexing with {type(item)} is not supported"
        raise TypeError(msg)

    def select_idxs(self, idxs: Any) -> DataProtoDouble:
        if isinstance(idxs, list):
            idxs = torch.tensor(idxs)
            if idxs.dtype != torch.bool:
                idxs = idxs.type(torch.int32)
        if isinstance(idxs, np.ndarray):
            as_numpy, as_torch = idxs, torch.from_numpy(idxs)
        else:
            as_torch, as_numpy = idxs, idxs.detach().cpu().numpy()
        size = int(as_numpy.sum()) if as_numpy.dtype == bool else as_numpy.shape[0]
        batch = None
        if self.batch is not None:
            batch = TensorDict(
                {key: tensor[as_torch] for key, tensor in self.batch.items()},
                batch_size=(size,),
                device=self.batch.device,
            )
        columns = {key: value[as_numpy] for key, value in self.non_tensor_batch.items()}
        return type(self)(batch=batch, non_tensor_batch=columns, meta_info=self.meta_info)

    def slice(
        self, start: int | None = None, end: int | None = None, step: int | None = None
    ) -> DataProtoDouble:
        window = slice(start, end, step)
        batch = None if self.batch is None else self.batch[window]
        columns = {key: value[window] for key, value in self.non_tensor_batch.items()}
        return type(self)(batch=batch, non_tensor_batch=columns, meta_info=self.meta_info)

    @classmethod
    def from_dict(
        cls,
        tensors: dict[str, torch.Tensor] | None = None,
        non_tensors: dict[str, Any] | None = None,
        meta_info: dict[str, Any] | None = None,
    ) -> DataProtoDouble:
        tensors = tensors or {}
        non_tensors = {
            key: value if isinstance(value, np.ndarray) else np.array(value, dtype=object)
            for key, value in (non_tensors or {}).items()
        }
        sizes = {tensor.shape[:1] for tensor in tensors.values()}
        assert len(sizes) <= 1, f"Not all the tensor in tensors have the same batch size: {sizes}"
        batch = TensorDict(tensors, batch_size=next(iter(sizes))) if tensors else None
        return cls(batch=batch, non_tensor_batch=non_tensors, meta_info=meta_info or {})


try:
    from verl import DataProto  # the real one, when this environment has verl
except ImportError:
    DataProto = DataProtoDouble  # type: ignore[misc,assignment]

REAL_VERL = DataProto is not DataProtoDouble
