"""Files a finished run leaves and a user hands to the launcher's commands (`rlfleet test`, `rlfleet record`),
written as the real code writes them so the commands read them as they would a user's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from rlfleet.shared.config.run_config import RunConfig, dump_run_config
from rlfleet.shared.policy.files import policy_bytes
from tests.support.policies import CARTPOLE, cartpole_expert, manifest, policy_state


def write_run(data_dir: Path, config: RunConfig, spaces: Any = CARTPOLE) -> Path:
    """A run directory as a finished run leaves it: config.yaml and best/policy.safetensors."""
    run_dir = data_dir / "runs" / config.name
    (run_dir / "best").mkdir(parents=True)
    (run_dir / "config.yaml").write_text(dump_run_config(config))
    m = manifest(spaces)
    state = {k: torch.from_numpy(v) for k, v in policy_state(m).items()}
    (run_dir / "best" / "policy.safetensors").write_bytes(policy_bytes(state, m))
    return run_dir


def write_expert_inputs(tmp_path: Path) -> tuple[Path, Path]:
    """The balancing CartPole expert's policy file and a CartPole run config, as `rlfleet record` takes them."""
    manifest, state = cartpole_expert()
    policy = tmp_path / "expert.safetensors"
    policy.write_bytes(policy_bytes(state, manifest))
    config = tmp_path / "run.yaml"
    config.write_text(dump_run_config(RunConfig.model_validate({"name": "rec", "env": {"id": "CartPole-v1"}})))
    return policy, config
