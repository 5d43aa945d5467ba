"""R3MTransform, VIPTransform, VIPRewardTransform, VC1Transform: the real download + load + forward.

Checkpoints with random weights are written in the published layouts (torchvision
names under ``module.convnet.`` for R3M/VIP, timm/MAE names under ``model`` for
VC-1), served from a local HTTP server, downloaded into a cache and loaded. The
outputs are compared with a functional re-statement of the published networks.
"""

from __future__ import annotations

import functools
import http.server
import threading

import pytest
import torch
import torch.nn.functional as F
from tensordict import TensorDict

pytest.importorskip("transformers")

from rl_envs_core.testing import CountingEnv
from rl_specs import Bounded, Composite
from rl_transforms import (
    R3MTransform,
    TransformedEnv,
    VC1Transform,
    VIPRewardTransform,
    VIPTransform,
)
from rl_transforms._encoders import _weights

MEAN = torch.tensor([0.485, 0.456, 0.406]).reshape(1, 3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).reshape(1, 3, 1, 1)
RESNET = {"resnet18": ("basic", [2, 2, 2, 2]), "resnet50": ("bottleneck", [3, 4, 6, 3])}


# ---------------------------------------------------------------------- published layouts
def _bn(prefix, n, gen):
    return {
        f"{prefix}.weight": torch.rand(n, generator=gen) + 0.5,
        f"{prefix}.bias": torch.randn(n, generator=gen) * 0.1,
        f"{prefix}.running_mean": torch.randn(n, generator=gen) * 0.1,
        f"{prefix}.running_var": torch.rand(n, generator=gen) + 0.5,
        f"{prefix}.num_batches_tracked": torch.tensor(0),
    }


def _conv(out, inp, k, gen):
    return torch.randn(out, inp, k, k, generator=gen) * (2.0 / (inp * k * k)) ** 0.5


def torchvision_resnet(name, seed=0, fc=None):
    """A torchvision-named ResNet state dict with random weights."""
    gen = torch.Generator().manual_seed(seed)
    kind, depths = RESNET[name]
    sd = {"conv1.weight": _conv(64, 3, 7, gen), **_bn("bn1", 64, gen)}
    inplanes = 64
    for stage, blocks in enumerate(depths, 1):
        planes = 64 * 2 ** (stage - 1)
        out = planes * (4 if kind == "bottleneck" else 1)
        for i in range(blocks):
            p = f"layer{stage}.{i}"
            if kind == "basic":
                convs = [(planes, inplanes, 3), (planes, planes, 3)]
            else:
                convs = [(planes, inplanes, 1), (planes, planes, 3), (out, planes, 1)]
            for j, (o, c, k) in enumerate(convs, 1):
                sd[f"{p}.conv{j}.weight"] = _conv(o, c, k, gen)
                sd.update(_bn(f"{p}.bn{j}", o, gen))
            if i == 0 and (stage > 1 or inplanes != out):
                sd[f"{p}.downsample.0.weight"] = _conv(out, inplanes, 1, gen)
                sd.update(_bn(f"{p}.downsample.1", out, gen))
            inplanes = out
    if fc is not None:
        sd["fc.weight"] = torch.randn(fc, inplanes, generator=gen) * 0.01
        sd["fc.bias"] = torch.randn(fc, generator=gen) * 0.01
    return sd


def reference_resnet(sd, name, x):
    """The published torchvision ResNet (v1.5) forward, written with functional ops."""
    kind, depths = RESNET[name]

    def bn(p, y):
        return F.batch_norm(
            y,
            sd[f"{p}.running_mean"],
            sd[f"{p}.running_var"],
            sd[f"{p}.weight"],
            sd[f"{p}.bias"],
            False,
            0.0,
            1e-5,
        )

    y = F.relu(bn("bn1", F.conv2d(x, sd["conv1.weight"], stride=2, padding=3)))
    y = F.max_pool2d(y, 3, 2, 1)
    for stage, blocks in enumerate(depths, 1):
        for i in range(blocks):
            p = f"layer{stage}.{i}"
            stride = 2 if (i == 0 and stage > 1) else 1
            if kind == "basic":
                h = F.relu(
                    bn(f"{p}.bn1", F.conv2d(y, sd[f"{p}.conv1.weight"], stride=stride, padding=1))
                )
                h = bn(f"{p}.bn2", F.conv2d(h, sd[f"{p}.conv2.weight"], padding=1))
            else:
                h = F.relu(bn(f"{p}.bn1", F.conv2d(y, sd[f"{p}.conv1.weight"])))
                h = F.relu(
                    bn(f"{p}.bn2", F.conv2d(h, sd[f"{p}.conv2.weight"], stride=stride, padding=1))
                )
                h = bn(f"{p}.bn3", F.conv2d(h, sd[f"{p}.conv3.weight"]))
            if f"{p}.downsample.0.weight" in sd:
                y = bn(
                    f"{p}.downsample.1", F.conv2d(y, sd[f"{p}.downsample.0.weight"], stride=stride)
                )
            y = F.relu(h + y)
    y = y.mean((-2, -1))
    if "fc.weight" in sd:
        y = F.linear(y, sd["fc.weight"], sd["fc.bias"])
    return y


def timm_vit_base(seed=0):
    """An MAE/timm-named ViT-B/16 state dict (with MAE decoder entries) with random weights."""
    gen = torch.Generator().manual_seed(seed)
    d = 768

    def w(*shape, scale=0.02):
        return torch.randn(*shape, generator=gen) * scale

    sd = {
        "cls_token": w(1, 1, d),
        "pos_embed": w(1, 197, d),
        "patch_embed.proj.weight": w(d, 3, 16, 16),
        "patch_embed.proj.bias": w(d),
        "norm.weight": 1 + w(d),
        "norm.bias": w(d),
        "mask_token": w(1, 1, 512),
        "decoder_embed.weight": w(512, d),
    }
    for i in range(12):
        p = f"blocks.{i}"
        sd.update(
            {
                f"{p}.norm1.weight": 1 + w(d),
                f"{p}.norm1.bias": w(d),
                f"{p}.attn.qkv.weight": w(3 * d, d),
                f"{p}.attn.qkv.bias": w(3 * d),
                f"{p}.attn.proj.weight": w(d, d),
                f"{p}.attn.proj.bias": w(d),
                f"{p}.norm2.weight": 1 + w(d),
                f"{p}.norm2.bias": w(d),
                f"{p}.mlp.fc1.weight": w(4 * d, d),
                f"{p}.mlp.fc1.bias": w(4 * d),
                f"{p}.mlp.fc2.weight": w(d, 4 * d),
                f"{p}.mlp.fc2.bias": w(d),
            }
        )
    return sd


def reference_vit(sd, x, heads=12):
    """The MAE ViT encoder (class token after the final norm), with functional ops."""
    y = F.conv2d(x, sd["patch_embed.proj.weight"], sd["patch_embed.proj.bias"], stride=16)
    y = y.flatten(2).transpose(1, 2)
    y = torch.cat([sd["cls_token"].expand(len(y), -1, -1), y], 1) + sd["pos_embed"]
    n, t, d = y.shape
    for i in range(12):
        p = f"blocks.{i}"
        h = F.layer_norm(y, (d,), sd[f"{p}.norm1.weight"], sd[f"{p}.norm1.bias"], 1e-6)
        q, k, v = F.linear(h, sd[f"{p}.attn.qkv.weight"], sd[f"{p}.attn.qkv.bias"]).chunk(3, -1)
        q, k, v = (z.reshape(n, t, heads, d // heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(n, t, d)
        y = y + F.linear(a, sd[f"{p}.attn.proj.weight"], sd[f"{p}.attn.proj.bias"])
        h = F.layer_norm(y, (d,), sd[f"{p}.norm2.weight"], sd[f"{p}.norm2.bias"], 1e-6)
        h = F.linear(
            F.gelu(F.linear(h, sd[f"{p}.mlp.fc1.weight"], sd[f"{p}.mlp.fc1.bias"])),
            sd[f"{p}.mlp.fc2.weight"],
            sd[f"{p}.mlp.fc2.bias"],
        )
        y = y + h
    return F.layer_norm(y, (d,), sd["norm.weight"], sd["norm.bias"], 1e-6)[:, 0]


# ---------------------------------------------------------------------- local server
class _Server:
    def __init__(self, root):
        self.requests = []
        log = self.requests

        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):
                log.append(self.path)

        self.httpd = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(Handler, directory=str(root))
        )
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, name):
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/{name}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def published(tmp_path, monkeypatch):
    """Serve checkpoints in the published layouts; returns (cache dir, server, state dicts)."""
    served = tmp_path / "served"
    served.mkdir()
    states = {
        "r3m_18": torchvision_resnet("resnet18", seed=1),
        "r3m_50": torchvision_resnet("resnet50", seed=2),
        "vip_50": torchvision_resnet("resnet50", seed=3, fc=1024),
        "vc1_base": timm_vit_base(seed=4),
    }
    torch.save(
        {
            "r3m": {
                **{f"module.convnet.{k}": v for k, v in states["r3m_18"].items()},
                "module.lang_enc.weight": torch.zeros(2),
            }
        },
        served / "r3m_18.pt",
    )
    torch.save(
        {"r3m": {f"module.convnet.{k}": v for k, v in states["r3m_50"].items()}},
        served / "r3m_50.pt",
    )
    torch.save(
        {"vip": {f"module.convnet.{k}": v for k, v in states["vip_50"].items()}},
        served / "model.pt",
    )
    torch.save({"model": states["vc1_base"]}, served / "vc1_vitb.pth")
    server = _Server(served)
    for name, file in [
        ("r3m_18", "r3m_18.pt"),
        ("r3m_50", "r3m_50.pt"),
        ("vip_50", "model.pt"),
        ("vc1_base", "vc1_vitb.pth"),
    ]:
        _, cached, entry = _weights.WEIGHT_URLS[name]
        monkeypatch.setitem(_weights.WEIGHT_URLS, name, (server.url(file), cached, entry))
    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path / "hub"))
    yield tmp_path / "cache", server, states
    server.close()


def _frames(n, size, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (n, size, size, 3), dtype=torch.uint8, generator=gen)


def _normalised(frames):
    return (frames.permute(0, 3, 1, 2).float() / 255 - MEAN) / STD


# ---------------------------------------------------------------------- tests
class PixelEnv(CountingEnv):
    """A counting env that also renders a 16x16 frame filled with the count."""

    def __init__(self):
        super().__init__(max_steps=3)
        self.observation_spec = Composite(
            observation=self.observation_spec["observation"],
            pixels=Bounded(0, 255, shape=(16, 16, 3), dtype=torch.uint8),
        )

    def _output(self, done):
        out = super()._output(done)
        out["pixels"] = torch.full((16, 16, 3), int(self.count.item()), dtype=torch.uint8)
        return out


class TestR3MTransform:
    @pytest.mark.parametrize("model_name", ["resnet18", "resnet50"])
    def test_download_load_forward_matches_the_published_network(self, published, model_name):
        cache, _server, states = published
        r3m = R3MTransform(
            model_name, in_keys=["pixels"], size=64, download=True, download_path=cache
        )
        frames = _frames(3, 64)
        out = r3m(TensorDict(pixels=frames, batch_size=[3]))["r3m_vec"]
        expected = reference_resnet(
            states[f"r3m_{model_name[-2:]}"], model_name, _normalised(frames)
        )
        assert out.dtype == torch.float32
        assert out.shape == (3, 512 if model_name == "resnet18" else 2048)
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
        assert (cache / f"r3m_{model_name[-2:]}.pt").exists()

    def test_weights_are_downloaded_once_then_read_from_the_cache(self, published):
        cache, server, _ = published
        first = R3MTransform("resnet18", size=32, download=True, download_path=cache)
        second = R3MTransform("resnet18", size=32, download=True, download_path=cache)
        assert len([r for r in server.requests if "r3m_18" in r]) == 1
        frames = TensorDict(pixels=_frames(2, 32), batch_size=[2])
        torch.testing.assert_close(
            first(frames.clone())["r3m_vec"], second(frames.clone())["r3m_vec"]
        )

    def test_default_hub_cache(self, published, tmp_path):
        R3MTransform("resnet18", size=32, download=True)
        assert (tmp_path / "hub" / "checkpoints" / "r3m_18.pt").exists()

    def test_deterministic_and_batch_dims_restored(self, published):
        r3m = R3MTransform("resnet18", size=32)
        frames = _frames(6, 40).reshape(2, 3, 40, 40, 3)
        a = r3m(TensorDict(pixels=frames, batch_size=[2, 3]))["r3m_vec"]
        b = r3m(TensorDict(pixels=frames, batch_size=[2, 3]))["r3m_vec"]
        assert a.shape == (2, 3, 512)
        assert torch.equal(a, b)

    def test_float_images_in_unit_range_match_uint8(self):
        r3m = R3MTransform("resnet18", size=32)
        frames = _frames(2, 32)
        a = r3m(TensorDict(pixels=frames, batch_size=[2]))["r3m_vec"]
        b = r3m(TensorDict(pixels=frames.float() / 255, batch_size=[2]))["r3m_vec"]
        torch.testing.assert_close(a, b)

    def test_several_images_stacked_or_not(self):
        td = TensorDict(a=_frames(2, 32), b=_frames(2, 32, seed=1), batch_size=[2])
        stacked = R3MTransform("resnet18", in_keys=["a", "b"], size=32)(td.clone())
        assert stacked["r3m_vec"].shape == (2, 1024)
        apart = R3MTransform("resnet18", in_keys=["a", "b"], size=32, stack_images=False)(
            td.clone()
        )
        assert apart["r3m_vec_0"].shape == apart["r3m_vec_1"].shape == (2, 512)

    def test_in_an_env_updates_the_specs(self):
        env = TransformedEnv(
            PixelEnv(), R3MTransform("resnet18", size=32, tensor_pixels_keys=["raw"])
        )
        spec = env.observation_spec
        assert "pixels" not in spec.keys() and spec["r3m_vec"].shape == (512,)
        assert spec["raw"].dtype == torch.uint8
        data = env.rollout(3)
        assert data["next", "r3m_vec"].shape == (3, 512)
        assert data["raw"].shape == (3, 16, 16, 3)

    @pytest.mark.parametrize(
        "image, error, match",
        [
            (
                torch.zeros(2, 3, 32, 32, dtype=torch.uint8),
                ValueError,
                r"'pixels'.*\(\*batch, H, W, 3\).*found shape \(2, 3, 32, 32\)",
            ),
            (torch.zeros(32, 3), ValueError, r"found shape \(32, 3\)"),
            (
                torch.zeros(2, 32, 32, 3, dtype=torch.int32),
                TypeError,
                r"'pixels'.*uint8.*found torch.int32",
            ),
        ],
    )
    def test_bad_image_layout_or_dtype(self, image, error, match):
        r3m = R3MTransform("resnet18", size=32)
        with pytest.raises(error, match=match):
            r3m(TensorDict(pixels=image))

    def test_unknown_model_and_bad_download(self):
        with pytest.raises(ValueError, match=r"model_name in"):
            R3MTransform("resnet101")
        with pytest.raises(TypeError, match=r"download=True"):
            R3MTransform("resnet18", download="IMAGENET1K_V1")

    def test_download_failure_names_url_and_cache(self, published, monkeypatch):
        cache, server, _ = published
        monkeypatch.setitem(
            _weights.WEIGHT_URLS, "r3m_34", (server.url("absent.pt"), "r3m_34.pt", "r3m")
        )
        with pytest.raises(RuntimeError, match=r"absent.pt.*into"):
            R3MTransform("resnet34", download=True, download_path=cache)

    def test_checkpoint_without_the_published_entry(self, published, tmp_path):
        cache, _, _ = published
        cache.mkdir(parents=True, exist_ok=True)
        torch.save({"state_dict": {}}, cache / "r3m_18.pt")
        with pytest.raises(KeyError, match=r"'r3m' entry"):
            R3MTransform("resnet18", download=True, download_path=cache)

    def test_pickled_code_in_a_checkpoint_is_not_executed(self, published):
        cache, _, _ = published
        cache.mkdir(parents=True, exist_ok=True)
        torch.save({"r3m": {"x": torch.zeros(1)}, "evil": _Evil()}, cache / "r3m_18.pt")
        with pytest.raises(Exception, match=r"(?i)weights_only|unsupported|global"):
            R3MTransform("resnet18", download=True, download_path=cache)
        assert not _Evil.ran


class _Evil:
    ran = False

    def __reduce__(self):
        return (setattr, (_Evil, "ran", True))


class TestVIPTransform:
    def test_download_load_forward_matches_the_published_network(self, published):
        cache, _, states = published
        vip = VIPTransform("resnet50", size=64, download=True, download_path=cache)
        frames = _frames(2, 64)
        out = vip(TensorDict(pixels=frames, batch_size=[2]))["vip_vec"]
        assert out.shape == (2, 1024)
        expected = reference_resnet(states["vip_50"], "resnet50", _normalised(frames))
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)

    def test_only_resnet50(self):
        with pytest.raises(ValueError, match=r"model_name='resnet50'"):
            VIPTransform("resnet18")


class TestVIPRewardTransform:
    def test_reward_is_progress_towards_the_goal(self):
        vip = VIPRewardTransform("resnet50", size=32)
        goal, far = _frames(1, 32, seed=1)[0], _frames(1, 32, seed=2)[0]
        start = vip._reset(TensorDict(goal_image=goal), TensorDict(pixels=far.clone()))
        step = vip._step(start, TensorDict(pixels=goal.clone(), reward=torch.zeros(1)))
        e_goal = start["goal_embedding"]
        expected = torch.linalg.vector_norm(start["vip_vec"] - e_goal)
        torch.testing.assert_close(step["reward"], expected.reshape(1))
        assert step["reward"].item() > 0

    def test_in_an_env_the_goal_is_given_at_reset(self):
        env = TransformedEnv(PixelEnv(), VIPRewardTransform("resnet50", size=32))
        assert env.full_state_spec["goal_image"].shape == (16, 16, 3)
        assert env.observation_spec["goal_embedding"].shape == (1024,)
        goal = torch.full((16, 16, 3), 3, dtype=torch.uint8)
        td = env.reset(TensorDict(goal_image=goal))
        data = env.rollout(3, auto_reset=False, tensordict=td)
        assert data["next", "reward"].shape == (3, 1)
        assert data["next", "goal_embedding"].shape == (3, 1024)

    def test_reset_without_goal_raises(self):
        vip = VIPRewardTransform("resnet50", size=32)
        with pytest.raises(KeyError, match=r"'goal_image'"):
            vip._reset(TensorDict(), TensorDict(pixels=_frames(1, 32)[0]))


class TestVC1Transform:
    def test_download_load_forward_matches_the_published_network(self, published):
        _, server, states = published
        vc1 = VC1Transform(["pixels"], ["VC1_vec"], "base")
        frames = _frames(2, 224)
        out = vc1(TensorDict(pixels=frames, batch_size=[2]))["VC1_vec"]
        assert out.shape == (2, 768) and out.dtype == torch.float32
        expected = reference_vit(states["vc1_base"], _normalised(frames))
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
        assert any("vc1_vitb" in r for r in server.requests)

    def test_resize_then_center_crop_as_published(self):
        vc1 = VC1Transform(["pixels"], None, "default")
        frames = _frames(1, 448)  # 448 -> 224: the crop is the whole resized frame
        x = vc1.preprocess(frames)
        assert x.shape == (1, 3, 224, 224)
        wide = torch.zeros(1, 224, 300, 3, dtype=torch.uint8)
        assert vc1.preprocess(wide).shape == (1, 3, 224, 224)

    def test_del_keys_false_keeps_the_images(self):
        vc1 = VC1Transform(None, None, "default", del_keys=False)
        out = vc1(TensorDict(pixels=_frames(1, 224), batch_size=[1]))
        assert "pixels" in out.keys() and out["VC1_vec"].shape == (1, 768)
        assert vc1.embd_size == 768

    def test_unknown_model_raises(self):
        with pytest.raises(ValueError, match=r"model_name in"):
            VC1Transform(["pixels"], ["v"], "huge")


class _RawServer:
    """One-connection-at-a-time TCP server on 127.0.0.1 answering with ``reply(conn)``."""

    def __init__(self, reply):
        import socket

        self.sock = socket.create_server(("127.0.0.1", 0))
        self.reply = reply
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.recv(65536)  # the request
                self.reply(conn, self.stop)

    def url(self, name):
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/{name}"

    def close(self):
        self.stop.set()
        self.thread.join(5)
        self.sock.close()


def _stall(conn, stop):
    stop.wait(30)  # says nothing until the test ends


def _truncate(conn, stop):
    conn.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n" + b"x" * 10
    )


@pytest.mark.parametrize(
    "reply, match", [(_stall, r"(?i)timed out"), (_truncate, r"10 of 1000 bytes")]
)
def test_a_stalled_or_cut_download_fails_and_leaves_no_file(reply, match, tmp_path, monkeypatch):
    import time

    server = _RawServer(reply)
    monkeypatch.setenv(_weights.TIMEOUT_ENV, "1")
    monkeypatch.setitem(
        _weights.WEIGHT_URLS, "r3m_18", (server.url("r3m_18.pt"), "r3m_18.pt", "r3m")
    )
    start = time.monotonic()
    try:
        with pytest.raises(RuntimeError, match=match):
            R3MTransform("resnet18", download=True, download_path=tmp_path)
    finally:
        server.close()
    assert time.monotonic() - start < 15
    assert list(tmp_path.iterdir()) == []  # neither a checkpoint nor a .part is left
