"""``VIPTransform`` and ``VIPRewardTransform``: VIP's pretrained ResNet-50 (Ma et al., 2023)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import torch
from tensordict import NestedKey, TensorDictBase

from rl_envs_core.extension import get_entry as read
from rl_specs import Composite
from rl_transforms._encoders._architectures import ResNetEncoder
from rl_transforms._encoders._base import EncoderTransform
from rl_transforms._encoders._r3m import check_download, embedding_keys, load_resnet_weights

_VIP_WEIGHTS = {"resnet50": "vip_50"}
VIP_EMBEDDING = 1024


class VIPTransform(EncoderTransform):
    """VIP Transform class.

    VIP ("VIP: Towards Universal Visual Reward and Representation via
    Value-Implicit Pre-Training", Ma, Sodhani, Jayaraman, Bastani, Kumar, Zhang,
    2023, https://arxiv.org/abs/2210.00030) is a ResNet-50 with a linear head of
    1024 outputs, trained on Ego4D. Images ``(*batch, H, W, 3)`` are scaled to
    ``[0, 1]``, resized to ``size`` x ``size``, normalised with the ImageNet mean and
    std and embedded into 1024 floats. Needs ``pip install 'rl-transforms[vision]'``.

    Args:
        model_name (str): ``"resnet50"``.
        in_keys (sequence of NestedKey, optional): the images. Defaults to ``["pixels"]``.
        out_keys (sequence of NestedKey, optional): the embeddings. Defaults to
            ``["vip_vec"]`` (``["vip_vec_0", ...]`` when ``stack_images=False``).
        size (int, optional): the side of the images fed to the network. Defaults to ``244``.
        stack_images (bool, optional): with several ``in_keys``, write one
            concatenated embedding. Defaults to ``True``.
        download (bool, optional): download the published VIP weights. Defaults to ``False``.
        download_path (str, optional): the weights cache. Defaults to ``None``
            (``<torch hub dir>/checkpoints``).
        tensor_pixels_keys (sequence of NestedKey, optional): keep the input images
            under these keys. Defaults to ``None``.

    Raises:
        ValueError: for an unknown ``model_name`` or mismatched keys; at call time
            for images that are not ``(*batch, H, W, 3)``.
        TypeError: for images that are neither ``uint8`` nor floating point.
        ImportError: if ``transformers`` (extra ``vision``) is not installed.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> vip = VIPTransform("resnet50", size=32)
        >>> frames = torch.randint(0, 256, (1, 32, 32, 3), dtype=torch.uint8)
        >>> vip(TensorDict(pixels=frames, batch_size=[1]))["vip_vec"].shape
        torch.Size([1, 1024])
    """

    def __init__(
        self,
        model_name: str = "resnet50",
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        size: int = 244,
        stack_images: bool = True,
        download: bool = False,
        download_path: str | os.PathLike | None = None,
        tensor_pixels_keys: Sequence[NestedKey] | None = None,
    ) -> None:
        owner = type(self).__name__
        download = check_download(owner, download)
        if model_name not in _VIP_WEIGHTS:
            raise ValueError(f"{owner} expected model_name='resnet50', got {model_name!r}.")
        in_keys = list(in_keys) if in_keys else ["pixels"]
        out_keys = out_keys or embedding_keys("vip", in_keys, stack_images)
        network = ResNetEncoder(model_name, head=VIP_EMBEDDING, owner=owner)
        super().__init__(
            network,
            in_keys=in_keys,
            out_keys=out_keys,
            size=size,
            stack_images=stack_images,
            tensor_pixels_keys=tensor_pixels_keys,
        )
        self.model_name = model_name
        self.download_path = download_path
        if download:
            self.load_weights(download_path)

    def load_weights(self, dir_prefix: str | os.PathLike | None = None) -> None:
        """Download (once, into ``dir_prefix``) and load the published VIP weights."""
        load_resnet_weights(
            self.network, _VIP_WEIGHTS[self.model_name], dir_prefix, type(self).__name__
        )


class VIPRewardTransform(VIPTransform):
    """A VIP transform to compute rewards based on embedded similarity.

    At reset, the ``"goal_image"`` entry of the tensordict given to ``env.reset``
    (a frame shaped like the observed images) is embedded into ``"goal_embedding"``.
    At each step the reward becomes the decrease of the distance to the goal in
    the embedding space:
    ``||e(o_t) - e(g)|| - ||e(o_{t+1}) - e(g)||``. Takes the arguments of
    :class:`VIPTransform`; one image key.

    Raises:
        KeyError: at reset, if neither ``"goal_image"`` nor ``"goal_embedding"`` is given.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> vip = VIPRewardTransform("resnet50", size=32)
        >>> goal = torch.randint(0, 256, (32, 32, 3), dtype=torch.uint8)
        >>> start = vip._reset(TensorDict(goal_image=goal), TensorDict(pixels=goal.clone()))
        >>> start["goal_embedding"].shape, start["vip_vec"].shape
        (torch.Size([1024]), torch.Size([1024]))
        >>> step = vip._step(start, TensorDict(pixels=goal.clone(), reward=torch.zeros(1)))
        >>> step["reward"]  # same frame as the goal, before and after: no progress
        tensor([0.])
    """

    GOAL_IMAGE = "goal_image"
    GOAL_EMBEDDING = "goal_embedding"

    def _goal_embedding(self, tensordict: TensorDictBase | None) -> torch.Tensor:
        if tensordict is not None:
            embedding = read(tensordict, self.GOAL_EMBEDDING)
            if embedding is not None:
                return embedding
            image = read(tensordict, self.GOAL_IMAGE)
            if image is not None:
                self._check(self.GOAL_IMAGE, image)
                return self.embed(image)
        keys = sorted(map(str, tensordict.keys(True, True))) if tensordict is not None else []
        raise KeyError(
            f"{type(self).__name__} expected a {self.GOAL_IMAGE!r} entry (the goal frame, "
            f"shaped like {self.in_keys[0]!r}) in the tensordict given to env.reset(), found "
            f"keys {keys}. Reset with env.reset(TensorDict(goal_image=frame, batch_size=...))."
        )

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        goal = self._goal_embedding(tensordict)
        tensordict_reset = super()._reset(tensordict, tensordict_reset)
        tensordict_reset.set(self.GOAL_EMBEDDING, goal)
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        goal = self._goal_embedding(tensordict)
        previous = read(tensordict, self.out_keys[0])
        next_tensordict = self._call(next_tensordict)
        current = read(next_tensordict, self.out_keys[0])
        next_tensordict.set(self.GOAL_EMBEDDING, goal)
        if previous is not None:
            progress = torch.linalg.vector_norm(previous - goal, dim=-1) - torch.linalg.vector_norm(
                current - goal, dim=-1
            )
            reward = read(next_tensordict, "reward")
            shape = reward.shape if reward is not None else (*progress.shape, 1)
            next_tensordict.set("reward", progress.reshape(shape).to(torch.float32))
        return next_tensordict

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        observation_spec = super().transform_observation_spec(observation_spec)
        key = self.out_keys[0]
        if observation_spec.get(key) is not None:
            observation_spec[self.GOAL_EMBEDDING] = observation_spec[key].clone()
        return observation_spec

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        input_spec = super().transform_input_spec(input_spec)
        parent = self.parent
        if parent is not None:
            image = parent.full_observation_spec.get(self.in_keys[0])
            if image is not None:
                input_spec["full_state_spec"][self.GOAL_IMAGE] = image.clone()
        return input_spec
