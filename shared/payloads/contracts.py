"""The file contracts a third-party worker needs, as versioned JSON Schemas generated from the code's own
definitions: the chunk payload (shared/payloads/codec.py's envelope, shared/payloads/schema.py's columns) and the policy
manifest (shared/policy/manifest.py's model). The coordinator serves them at /v1/schemas; because they are derived
from the definitions the services use, they cannot drift from what a learner accepts.

A chunk is msgpack, not JSON: the schema describes the decoded msgpack document, where a msgpack `bin` (an
array's raw bytes) is shown as a base64 string (`contentEncoding: base64`), JSON Schema's way to say bytes.
"""

from __future__ import annotations

import itertools
from typing import Any

from rlfleet.shared.payloads.codec import DTYPES, FORMAT, MAX_PAYLOAD_BYTES, VERSION
from rlfleet.shared.payloads.schema import COLUMN_DOCS, MAX_MAGNITUDE, SCHEMA_VERSION, ChunkSchema
from rlfleet.shared.payloads.spaces import (
    INTEGER_DTYPES,
    BoxActions,
    DiscreteActions,
    DiscretePart,
    MultiDiscreteActions,
    ObsSpace,
    Spaces,
)
from rlfleet.shared.policy.manifest import MANIFEST_FORMAT, MANIFEST_KEY, MANIFEST_VERSION, PolicyManifest

DRAFT = "https://json-schema.org/draft/2020-12/schema"
# Every kind of space a run can have: the union of their chunk schemas is every column a chunk may hold.
# Observations of integer parts are stored in any of INTEGER_DTYPES, the smallest that holds their values.
_OBS = (ObsSpace(shape=(4,), dtype="float32"), ObsSpace(shape=(8, 8, 3), dtype="uint8"),
        *(ObsSpace(shape=(1,), dtype=dtype, parts=(DiscretePart(n=2),)) for dtype in INTEGER_DTYPES))
_ACTIONS = (DiscreteActions(n=2), MultiDiscreteActions(nvec=(2, 3)), BoxActions(low=(-1.0,), high=(1.0,)))
# A frame-stacked image run (the compact layout): stacks of 4 frames of 8x8x3.
_STACKED = ObsSpace(shape=(4, 8, 8, 3), dtype="uint8")
# Without a recurrent core, a gru's and an lstm's state of 8 units: the dtypes of `core_state` do not depend on them.
_CORE_STATES = (None, (8,), (2, 8))
_LEADS = {"step": "[T steps, N envs, *per-step shape]", "env": "[N envs, *shape]",
          "end": "[E rows that end an episode, *shape]"}


def _columns() -> tuple[dict[str, set[str]], dict[str, str], list[set[str]]]:
    """Each column's possible dtypes and leading axes over every space, behaviour and layout, and per layout the
    columns every chunk of it has."""
    dtypes: dict[str, set[str]] = {}
    leads: dict[str, str] = {}
    required: list[set[str]] = []
    for stack, observations in ((None, _OBS), (_STACKED.shape[0], (_STACKED,))):
        common: set[str] | None = None
        for obs, action, logp, core in itertools.product(observations, _ACTIONS, (False, True), _CORE_STATES):
            columns = ChunkSchema.of(Spaces(obs=obs, action=action), behaviour_logp=logp, stack=stack,
                                     core_state=core).columns
            for name, col in columns.items():
                dtypes.setdefault(name, set()).add(col.dtype)
                leads[name] = _LEADS[col.per]
            common = set(columns) if common is None else common & set(columns)
        required.append(common or set())
    return dtypes, leads, required


def chunk_schema() -> dict[str, Any]:
    dtypes, leads, (flat, compact) = _columns()
    if set(dtypes) != set(COLUMN_DOCS):
        raise RuntimeError(f"shared/payloads/schema.py COLUMN_DOCS must describe exactly the columns {sorted(dtypes)}")
    array = {
        "type": "object", "required": ["dtype", "shape", "data"], "additionalProperties": False,
        "description": "one column: a numpy array as dtype, shape and raw bytes",
        "properties": {
            "dtype": {"enum": sorted(DTYPES), "description": "numpy dtype name"},
            "shape": {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1, "maxItems": 32,
                      "description": "the column's leading axes (see each column), then its own shape; row-major"},
            "data": {"type": "string", "contentEncoding": "base64", "description": (
                "msgpack bin: the array's bytes, little-endian, C order; exactly prod(shape) x itemsize bytes "
                "(bool: one byte, 0 or 1), or, with `compression: zstd`, one zstd frame of them that declares "
                "its content size (exactly prod(shape) x itemsize)")},
            "compression": {"enum": ["none", "zstd"], "description": (
                "how `data` is stored; absent: none. A reader refuses a frame whose declared size is not the "
                f"array's, and arrays that decompress beyond {MAX_PAYLOAD_BYTES} bytes together")},
        },
    }
    columns = {name: {"allOf": [{"$ref": "#/$defs/array"}], "description": f"{leads[name]}: {COLUMN_DOCS[name]}",
                      "properties": {"dtype": {"enum": sorted(dtypes[name])}}} for name in sorted(dtypes)}
    return {
        "$schema": DRAFT, "$id": f"urn:rlfleet:schema:chunk:v{VERSION}", "title": f"{FORMAT} payload v{VERSION}",
        "version": VERSION,
        "description": (
            "A chunk payload file: one msgpack map (bin as base64 when shown as JSON), written to the store at "
            "chunks/<task_id>/<chunk_id>.msgpack before the chunk is reported. A per-step column is [T, N, ...]: "
            "step t of env column i is flat row t*N+i, and every column has the same T and N. The per-step "
            "shapes and dtypes follow the task's `spaces` and `behaviour` (see each column). Two layouts: the "
            "flat one (obs and next_obs on every row) for every run but one whose env wrappers end with "
            "`frame_stack` over uint8 image observations (the last wrapper that changes observations; spaces.obs "
            "is then [k, *frame]); such a run's chunks use the compact layout, each frame stored once (frame, "
            "history, tail_frame, final_frame instead of obs and next_obs), from which a learner rebuilds obs and "
            "next_obs (see each column; docs/protocol.md). A run whose policy has a recurrent core "
            "(behaviour.core) adds `core_state`, each env's core state at its first row. "
            "A learner refuses, as corrupt, a payload whose rows differ from the report's env_steps, or one "
            "with, on any row whose `valid` is true, a discrete action outside the space, a float that is not "
            f"finite or beyond ±{MAX_MAGNITUDE:g}, or an observation value of a Discrete, MultiDiscrete, "
            "MultiBinary or image part (spaces.obs.parts) that is not an integer the part holds. Column layout version "
            f"{SCHEMA_VERSION}."),
        "type": "object", "required": ["format", "version", "meta", "arrays"], "additionalProperties": False,
        "properties": {
            "format": {"const": FORMAT, "description": "identifies the file as an rlfleet chunk"},
            "version": {"const": VERSION, "description": "envelope version; a learner refuses any other"},
            "meta": {"type": "object", "description": (
                "free-form map of plain msgpack values, ignored by the learner; rlfleet's collectors write "
                "task_id, chunk_id and policy_version")},
            "arrays": {"type": "object", "additionalProperties": False, "properties": columns,
                       "oneOf": [{"required": sorted(flat)}, {"required": sorted(compact)}], "description": (
                           "the columns of one layout, flat or compact; `logp` is required when the task's "
                           "behaviour.sample is true and must be absent otherwise; `core_state` is required when "
                           "the task's behaviour.core is set and must be absent otherwise")},
        },
        "$defs": {"array": array},
    }


def policy_schema() -> dict[str, Any]:
    schema = PolicyManifest.model_json_schema()
    schema.update({
        "$schema": DRAFT, "$id": f"urn:rlfleet:schema:policy:v{MANIFEST_VERSION}",
        "title": f"{MANIFEST_FORMAT} manifest v{MANIFEST_VERSION}", "version": MANIFEST_VERSION,
        "description": (
            f"A policy file is safetensors (an 8-byte little-endian header length, a JSON header, the tensor "
            f"bytes). Its header's __metadata__[\"{MANIFEST_KEY}\"] is this manifest as a JSON string. With an "
            "mlp encoder the tensors are an MLP from the flattened observation (normalised by obs_norm when "
            "present: clip((obs - mean) / sqrt(var + 1e-8), -clip, clip)) through net.hidden to the head; an "
            "observation with spaces.obs.parts is encoded instead, part by part in order: a box's values "
            "normalised by obs_norm (which covers the box parts' values alone, in order), each discrete or "
            "multidiscrete integer x one-hot (n values, 1 at x - start), multibinary values as 0.0 / 1.0. Layer "
            "k has `body.<2k>.weight` [fan_out, fan_in] and `body.<2k>.bias` [fan_out], float32, y = x W^T + b, "
            "net.activation between layers and none after the last. The last layer's width is the head's: "
            "q_values and categorical: n; multi_categorical: sum(nvec) logits, per sub-action in order; "
            "gaussian: dim means plus a `log_std` [dim] tensor; gaussian_sde: dim means plus a `log_std` "
            "[width, dim] tensor, width being the last layer's fan_in; tanh_gaussian: dim means then dim log-stds. "
            "Acting: q_values takes the argmax (epsilon-greedy while exploring, per the task's behaviour); "
            "categorical and multi_categorical draw from softmax(logits) (per sub-action) and record the "
            "log-probability of the drawn action as `logp`; gaussian draws mean + exp(log_std) * noise; "
            "gaussian_sde draws mean + z @ (exp(log_std) * W), z being the last layer's input (the latent, "
            "float64 [width]) and W [width, dim] unit normal weights each env keeps for behaviour.sde_sample_freq "
            "steps, and records the log-probability under N(mean, sqrt(z^2 @ exp(log_std)^2 + 1e-6)); "
            "tanh_gaussian draws tanh(mean + exp(clip(log_std, -20, 2)) * noise), rescaled from [-1, 1] into the "
            "bounds. "
            "With a `core` ({kind: gru|lstm, hidden: H}) the flattened (normalised) observation first passes one "
            "layer of torch.nn.GRU / torch.nn.LSTM, whose tensors are `core.rnn.weight_ih_l0` [G*H, in], "
            "`core.rnn.weight_hh_l0` [G*H, H], `core.rnn.bias_ih_l0` and `core.rnn.bias_hh_l0` [G*H] (G = 3, gates "
            "r, z, n, for a gru; 4, gates i, f, g, o, for an lstm; blocks of H rows in that order), and its output "
            "h' feeds net.hidden's first layer (fan_in H). torch's equations, with gi = W_ih x + b_ih, "
            "gh = W_hh h + b_hh, [k] the k-th block, s the logistic function: gru r = s(gi[0] + gh[0]), "
            "z = s(gi[1] + gh[1]), n = tanh(gi[2] + r * gh[2]), h' = (1 - z) * n + z * h; lstm with a = gi + gh, "
            "i = s(a[0]), f = s(a[1]), g = tanh(a[2]), o = s(a[3]), c' = f * c + i * g, h' = o * tanh(c'). The "
            "state (h, and c for an lstm) starts at zero for each episode and is carried from step to step of an "
            "env (docs/protocol.md, Recurrent core). "
            "An image part of spaces.obs.parts is read by an image encoder of its own and needs one. "
            "The tensors of image encoders (every kind but mlp) follow rlfleet's torch network "
            "(shared/policy/nets.py) and are outside this contract. The file is immutable, at "
            "policies/v<version, 8 digits>.safetensors in the store."),
    })
    return schema


SCHEMAS = {"chunk": chunk_schema, "policy": policy_schema}
