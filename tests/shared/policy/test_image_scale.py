"""The CNN reads every image in [0, 1]: camera frames are divided by 255, 0/1 images (MinAtar's booleans) by 1."""

from __future__ import annotations

import torch

from rlfleet.shared.config.base import NetConfig
from rlfleet.shared.payloads.spaces import ObsSpace
from rlfleet.shared.policy.manifest import default_encoder
from rlfleet.shared.policy.nets import Network


def test_a_0_1_image_reaches_the_cnn_as_a_255_frame_does() -> None:
    binary = ObsSpace(shape=(10, 10, 4), dtype="uint8", image_max=1)
    frames = binary.model_copy(update={"image_max": 255})
    torch.manual_seed(0)
    net = Network(binary, default_encoder(binary), NetConfig(hidden=(8,)), 3)
    same = Network(frames, default_encoder(frames), NetConfig(hidden=(8,)), 3)
    same.load_state_dict(net.state_dict())
    ones = torch.ones((2, 10, 10, 4), dtype=torch.uint8)
    with torch.no_grad():
        assert torch.allclose(net(ones), same(ones * 255))
        assert not torch.allclose(net(ones), same(ones))  # a 0/1 image divided by 255 would be all but black
