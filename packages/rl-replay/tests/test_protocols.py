"""The component contract a ReplayBuffer relies on: public methods of Storage, Sampler, Writer."""

from __future__ import annotations

import pytest
import torch

from rl_replay import LazyTensorStorage, ReplayBuffer, RoundRobinWriter, Sampler


class _EvenOnly(Sampler):
    """A user sampler written against the public hooks: refuses odd values, samples row 0."""

    def __init__(self) -> None:
        super().__init__()
        self.attached = None
        self.emptied = 0

    def attach_storage(self, storage) -> None:
        super().attach_storage(storage)
        self.attached = storage

    def check_write(self, data) -> None:
        if bool((torch.as_tensor(data) % 2 == 1).any()):
            raise ValueError("_EvenOnly expected even values, got an odd one.")

    def sample(self, storage, batch_size):
        return torch.zeros(batch_size, dtype=torch.long), {}

    def _empty(self) -> None:  # TorchRL's extension point
        self.emptied += 1


class _CountingWriter(RoundRobinWriter):
    def __init__(self) -> None:
        super().__init__()
        self.emptied = 0

    def _empty(self) -> None:
        super()._empty()
        self.emptied += 1


class TestComponentContract:
    def test_buffer_uses_the_public_sampler_hooks(self):
        sampler = _EvenOnly()
        rb = ReplayBuffer(storage=LazyTensorStorage(8), sampler=sampler)
        assert sampler.attached is rb.storage
        rb.extend(torch.tensor([2, 4]))
        with pytest.raises(ValueError, match="even values"):
            rb.extend(torch.tensor([6, 7]))
        assert len(rb) == 2  # the refused write changed nothing
        assert rb.sample(3).tolist() == [2, 2, 2]

    def test_empty_reaches_storage_writer_and_sampler(self):
        sampler, writer = _EvenOnly(), _CountingWriter()
        rb = ReplayBuffer(storage=LazyTensorStorage(8), sampler=sampler, writer=writer)
        rb.extend(torch.tensor([2, 4]))
        rb.empty()
        assert len(rb) == 0 and sampler.emptied == 1 and writer.emptied == 1
        assert rb.extend(torch.tensor([8])).tolist() == [0]  # the cursor restarted

    def test_underscore_spellings_still_work(self):
        sampler = _EvenOnly()
        storage = LazyTensorStorage(4)
        sampler._attach_storage(storage)
        assert sampler.attached is storage
        with pytest.raises(ValueError, match="even values"):
            sampler._check_write(torch.tensor([1]))
        sampler.empty()
        assert sampler.emptied == 1


class TestSharedBuffers:
    class _NeedsSharedState:
        requires_shared_write_state = True

        def __call__(self, data):
            return data

    class _Shareable(_NeedsSharedState):
        is_shared = False

        def share(self):
            self.is_shared = True

    @pytest.mark.parametrize("how", ["constructor", "append", "insert"])
    def test_shared_buffer_refuses_a_transform_that_cannot_share_its_write_state(self, how):
        transform = self._NeedsSharedState()
        with pytest.raises(RuntimeError, match="write state"):
            if how == "constructor":
                ReplayBuffer(transform=transform, shared=True)
            elif how == "append":
                ReplayBuffer(shared=True).append_transform(transform)
            else:
                ReplayBuffer(shared=True).insert_transform(0, transform)

    def test_shared_buffer_shares_a_shareable_transform(self):
        transform = self._Shareable()
        rb = ReplayBuffer(shared=True)
        rb.append_transform(transform)
        assert transform.is_shared and len(rb.transform) == 1
        ReplayBuffer().append_transform(self._NeedsSharedState())  # unshared: fine
