"""What the network reads for a stored observation: its input encoding, in numpy (torch-free, for the actors).

Chunks and actors hold observations raw: a Box's values, the integers of Discrete and MultiDiscrete parts, the 0/1
values of MultiBinary ones and the pixels of images (`ObsSpace.parts`, shared/payloads/spaces.py). The network reads
them encoded as Stable-Baselines3's `preprocess_obs` does: each Discrete or MultiDiscrete integer x of a part
starting at `start` one-hot (n values, 1 at x - start), MultiBinary values as 0.0 / 1.0, Box values as they are,
normalised by the manifest's obs_norm when it has one (Box values only), all side by side in the parts' order.
Image parts are not encoded here: each has a convolutional encoder of its own (torch; shared/policy/nets.py), whose
features the network puts before these. Encoding inside the policy keeps chunks small (one byte for a Discrete(4)
observation, not four floats) and makes the encoding part of the published manifest, which is all a third-party
actor needs to reproduce it. The learner's torch networks encode the same way
(shared/policy/obs_encoding_torch.py), from the same `ObsLayout`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlfleet.shared.payloads.spaces import BoxPart, DiscretePart, ImagePart, MultiBinaryPart, ObsSpace, encoded_width
from rlfleet.shared.policy.manifest import ObsNorm

LAYOUT_ARRAYS = ("box_src", "box_dst", "binary_src", "binary_dst", "categorical_src", "categorical_shift",
                 "categorical_low", "categorical_high")


@dataclass(frozen=True)
class ObsLayout:
    """Where each raw column goes in the encoded observation: index arrays over [B, raw] -> [B, width].

    Integers are clamped into their part before the one-hot: no valid row holds one outside (env errors and the
    chunk check refuse those), but the rows a learner never trains on are zeroed, and 0 is outside a part that
    starts above it; clamped, they still encode without indexing another part's columns."""

    raw: int
    width: int
    box_src: np.ndarray  # raw columns of box parts, in order: obs_norm's statistics follow this order
    box_dst: np.ndarray  # their encoded columns
    binary_src: np.ndarray  # raw columns of multibinary parts
    binary_dst: np.ndarray
    categorical_src: np.ndarray  # raw columns holding a Discrete or MultiDiscrete integer
    categorical_shift: np.ndarray  # encoded column of value x is shift + x (its one-hot's first column - start)
    categorical_low: np.ndarray  # the integer's values, start .. start + n - 1: a value outside is clamped into them
    categorical_high: np.ndarray

    @classmethod
    def of(cls, obs: ObsSpace) -> ObsLayout | None:
        """The layout of an observation with parts; None for one the network reads as it is."""
        if obs.parts is None:
            return None
        columns: dict[str, list[int]] = {name: [] for name in LAYOUT_ARRAYS}
        raw = out = 0
        for part in obs.parts:
            if isinstance(part, ImagePart):
                raw += part.size  # read by the image's own encoder (shared/policy/nets.py), not encoded here
                continue
            if isinstance(part, BoxPart | MultiBinaryPart):
                kind = "box" if isinstance(part, BoxPart) else "binary"
                columns[f"{kind}_src"] += range(raw, raw + part.size)
                columns[f"{kind}_dst"] += range(out, out + part.size)
                raw += part.size
            else:
                nvec, starts = ((part.n,), (part.start,)) if isinstance(part, DiscretePart) else (part.nvec, part.start)
                offset = out
                for n, start in zip(nvec, starts, strict=True):
                    columns["categorical_src"].append(raw)
                    columns["categorical_shift"].append(offset - start)
                    columns["categorical_low"].append(start)
                    columns["categorical_high"].append(start + n - 1)
                    raw, offset = raw + 1, offset + n
            out += encoded_width(part)
        arrays = {name: np.asarray(values, np.int64) for name, values in columns.items()}
        return cls(raw=raw, width=out, **arrays)


def normalize(obs: np.ndarray, norm: ObsNorm | None) -> np.ndarray:
    """A Box observation as float32, normalised by frozen statistics when there are any."""
    x = np.asarray(obs, np.float32)
    if norm is None:
        return x
    mean = np.asarray(norm.mean, np.float32).reshape(x.shape[1:])
    std = np.sqrt(np.asarray(norm.var, np.float32).reshape(x.shape[1:]) + 1e-8)
    return np.clip((x - mean) / std, -norm.clip, norm.clip)


class ObsEncoder:
    """[N, *obs] raw observations -> [N, encoded_size] float32, what the policy's first layer reads."""

    def __init__(self, obs: ObsSpace, norm: ObsNorm | None) -> None:
        self.layout, self.norm = ObsLayout.of(obs), norm

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        layout = self.layout
        if layout is None:
            return normalize(obs, self.norm).reshape(len(obs), -1)
        x = np.asarray(obs).reshape(len(obs), layout.raw)
        out = np.zeros((len(x), layout.width), np.float32)
        out[:, layout.box_dst] = normalize(x[:, layout.box_src], self.norm)
        out[:, layout.binary_dst] = x[:, layout.binary_src]
        categories = np.clip(x[:, layout.categorical_src].astype(np.int64),  # float32 where a part is a box
                             layout.categorical_low, layout.categorical_high)
        out[np.arange(len(x))[:, None], layout.categorical_shift + categories] = 1.0
        return out
