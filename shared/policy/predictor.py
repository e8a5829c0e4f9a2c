"""Use a trained policy outside rlfleet: `load_policy(path_or_run_dir).predict(obs)`, as Stable-Baselines3's
`load(path).predict(obs)`.

A `Policy` acts with the very actors collectors and the evaluator use (shared/policy/actors.py), built from the
policy file's manifest, so what a user's program does with it is what the run validated and tested. It takes
observations as the env gives them: one observation or a batch of them, a Dict (or Tuple) observation as a mapping
(tuple) of arrays, and returns what the env's `step` takes (an integer, an integer vector, or a float vector
rescaled and clipped into the Box's bounds).

Dict observations are flattened as rlfleet's env builder flattens them (shared/envs/build.py): each leaf raveled,
keys in sorted order (the order gymnasium's Dict space keeps), Tuple entries by position, nested ones depth-first.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from rlfleet.shared.policy.actors import Actor, PolicyError, build_actor
from rlfleet.shared.policy.files import MAX_POLICY_BYTES, decode_policy
from rlfleet.shared.policy.manifest import ManifestError, PolicyManifest
from rlfleet.shared.storage.layout import BEST_POLICY, RunLayout

POLICY_SUFFIX = ".safetensors"
# What a file that is not an rlfleet policy most likely is, by its first bytes: said in the error so a user who
# passed the wrong file knows which one they passed.
_MAGIC = ((b"PK\x03\x04", "a zip archive (a PyTorch .pt or Stable-Baselines3 .zip save?)"),
          (b"\x80", "a Python pickle"), (b"\x89HDF", "an HDF5 file (a Keras save?)"),
          (b"\x08", "a protobuf file (an ONNX model?)"))


class PolicyFileError(ValueError):
    """A file that is not a policy this rlfleet can act with: its message names the file and what it is."""


def resolve_policy_file(path: Path) -> Path:
    """The policy file `path` names: the file itself; in a run directory (data/runs/<name>) the evaluator's best
    policy (best/policy.safetensors), else its latest published one (store/policies/), for a run that has not
    been evaluated yet; in a directory holding policy.safetensors (a run's best/), that file."""
    path = Path(path)
    if path.is_file():
        return path
    if not path.is_dir():
        raise FileNotFoundError(f"no policy file or run directory {path}")
    if (path / BEST_POLICY).is_file():
        return path / BEST_POLICY
    layout = RunLayout(path.parent.parent, path.name)
    best = layout.best / BEST_POLICY
    if best.is_file():
        return best
    published = sorted((layout.store_root / "policies").glob(f"v*{POLICY_SUFFIX}"))
    if published:
        return published[-1]  # zero-padded version numbers sort in order
    raise FileNotFoundError(f"{path} holds no policy: neither {best} (the evaluator writes it after its first "
                            f"evaluation) nor a published policy in {layout.store_root / 'policies'}; give a run "
                            f"directory (data/runs/<name>) or a {POLICY_SUFFIX} policy file")


def read_policy_file(path: Path) -> tuple[PolicyManifest, dict[str, np.ndarray]]:
    """The manifest and weights of a policy file; PolicyFileError naming the file and what it is otherwise."""
    size = path.stat().st_size
    if size > MAX_POLICY_BYTES:
        raise PolicyFileError(f"{path} is {size:,} bytes, more than any rlfleet policy ({MAX_POLICY_BYTES:,})")
    data = path.read_bytes()
    try:
        return decode_policy(data)
    except ManifestError as exc:
        if data[8:9] == b"{":  # a safetensors header: of another program, another rlfleet version, or damaged
            raise PolicyFileError(f"{path} is a safetensors file, not a policy this rlfleet can load: {exc}") from exc
        raise PolicyFileError(f"{path} is {_what_it_is(data)}, not an rlfleet policy: rlfleet's policies are "
                              f"{POLICY_SUFFIX} files, in a run's best/ or store/policies/") from exc


def _what_it_is(data: bytes) -> str:
    for magic, what in _MAGIC:
        if data.startswith(magic):
            return what
    return f"a file of {len(data)} bytes" if len(data) < 8 else "an unrecognised or corrupt file"


class Policy:
    """A trained policy, acting greedily (`deterministic=True`) or by sampling its distribution."""

    def __init__(self, manifest: PolicyManifest, actor: Actor, source: Path, seed: int | None = None) -> None:
        self.manifest = manifest
        self.source = source
        self._actor = actor
        self._rng = np.random.default_rng(seed)
        self._envs = 1  # the batch size of the last `predict`: a recurrent policy keeps one state per env of it

    def __repr__(self) -> str:
        obs, action = self.manifest.spaces.obs, self.manifest.spaces.action
        return (f"Policy({str(self.source)!r}: {self.manifest.head} head, {self.manifest.encoder.kind} encoder, "
                f"{obs.dtype}{list(obs.shape)} observations, {action.kind} actions)")

    def predict(self, obs: Any, deterministic: bool = True) -> Any:
        """The env action for `obs`, or an array of them for a batch (a leading dimension). Deterministic: the
        greedy action (argmax, or the distribution's mean); otherwise one drawn from the policy's distribution
        (a q_values head has none: it acts greedily either way). Raises ValueError naming the shape and dtype the
        policy expects when `obs` is not an observation of its env."""
        batch, single = self._batch(obs)
        self._envs = len(batch)
        if deterministic or self.manifest.head == "q_values":
            actions = self._actor.greedy(batch)
        else:
            actions = self._actor.act(batch, True, self._rng).env_actions
        return actions[0] if single else actions

    def reset(self, env_index: int | None = None) -> None:
        """Forget what a recurrent policy (a manifest with a `core`) remembers of the episode so far, for every env
        (None) or the one at `env_index` of the batch `predict` was last given: call it when an episode starts. A
        memoryless policy has nothing to forget. Its state follows the batch: a call with another batch size than
        the last starts every env from a fresh state."""
        if env_index is None:
            self._actor.reset()
            return
        if not 0 <= env_index < self._envs:
            raise IndexError(f"env_index {env_index}: the last batch had {self._envs} observation(s)")
        done = np.zeros(self._envs, bool)
        done[env_index] = True
        self._actor.reset(done)

    def _batch(self, obs: Any) -> tuple[np.ndarray, bool]:
        """(a [N, *shape] batch in the manifest's dtype, whether `obs` was a single observation)."""
        space = self.manifest.spaces.obs
        shape = tuple(space.shape)
        if isinstance(obs, Mapping | tuple):
            flat, single = _flatten(obs, space.flat_size)
            if flat is None:
                raise ValueError(f"observation {_describe(obs)} does not fit this policy's {space.flat_size} values "
                                 f"(shape {list(shape)}, {space.dtype}) once flattened, one observation or a batch")
            array = flat.reshape(-1, *shape)
        else:
            array = np.asarray(obs)
            single = array.shape == shape
            if not single and array.shape[1:] != shape:
                raise ValueError(f"observation of shape {list(array.shape)}: this policy expects {space.dtype} of "
                                 f"shape {list(shape)}, or a batch of them of shape [N, {', '.join(map(str, shape))}]")
            if single:
                array = array[None]
        return _cast(array, space.dtype, shape), single


def _leaves(obs: Any) -> list[np.ndarray]:
    """A Dict / Tuple observation's arrays in flattening order: sorted keys, positions, depth-first."""
    if isinstance(obs, Mapping):
        return [leaf for key in sorted(obs) for leaf in _leaves(obs[key])]
    if isinstance(obs, tuple):
        return [leaf for item in obs for leaf in _leaves(item)]
    return [np.asarray(obs)]


def _flatten(obs: Mapping[str, Any] | tuple[Any, ...], size: int) -> tuple[np.ndarray | None, bool]:
    """The flat observation(s): one of `size` values, or a batch whose leaves all have the same leading
    dimension; (None, False) when neither fits."""
    leaves = _leaves(obs)
    if sum(leaf.size for leaf in leaves) == size:
        return np.concatenate([leaf.ravel() for leaf in leaves]), True
    lengths = {leaf.shape[0] for leaf in leaves if leaf.ndim}
    if len(lengths) != 1 or any(leaf.ndim == 0 for leaf in leaves):
        return None, False
    (n,) = lengths
    rows = [leaf.reshape(n, -1) for leaf in leaves]
    if sum(row.shape[1] for row in rows) != size:
        return None, False
    return np.concatenate(rows, axis=1), False


def _describe(obs: Any) -> str:
    if isinstance(obs, Mapping):
        return "{" + ", ".join(f"{key!r}: {_describe(obs[key])}" for key in sorted(obs)) + "}"
    if isinstance(obs, tuple):
        return "(" + ", ".join(_describe(item) for item in obs) + ")"
    array = np.asarray(obs)
    return f"{array.dtype}{list(array.shape)}"


def _cast(array: np.ndarray, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """`array` in the policy's dtype. Images must come as the env gives them, integers in 0..255: a frame already
    scaled to [0, 1] floats would pass a cast and act on noise."""
    if array.dtype == dtype:
        return array
    if dtype == "float32":
        if array.dtype.kind not in "fiub":
            raise ValueError(f"observation of dtype {array.dtype}: this policy expects numbers (float32) of shape "
                             f"{list(shape)}")
        return array.astype(np.float32)
    if array.dtype.kind not in "iub" or (array.size and (array.min() < np.iinfo(dtype).min
                                                         or array.max() > np.iinfo(dtype).max)):
        raise ValueError(f"observation of dtype {array.dtype}: this policy expects {dtype} of shape {list(shape)} "
                         f"(an image as the env gives it, not scaled)")
    return array.astype(dtype)


def load_policy(path_or_run_dir: str | Path, seed: int | None = None) -> Policy:
    """The policy of a policy file, or a run directory's best policy (its latest one before the first
    evaluation). `seed` seeds the draws of `predict(obs, deterministic=False)`.

    Raises FileNotFoundError when there is no such file or the run has no policy yet, and PolicyFileError (a
    ValueError) for a file that is not an rlfleet policy, is corrupt, or comes from an rlfleet whose policy files
    this one does not read."""
    source = resolve_policy_file(Path(path_or_run_dir))
    manifest, state = read_policy_file(source)
    try:
        actor = build_actor(manifest, state)
    except PolicyError as exc:
        raise PolicyFileError(f"{source} is a corrupt rlfleet policy: {exc}") from exc
    return Policy(manifest, actor, source, seed)
