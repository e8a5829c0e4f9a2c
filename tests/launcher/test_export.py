"""`rlfleet export`: a run directory's best policy written as ONNX or TorchScript, acting as load_policy does; what
cannot be exported is one line and exit 2."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from typer.testing import CliRunner

from rlfleet.launcher.cli import app
from rlfleet.shared.policy.files import policy_bytes
from rlfleet.shared.policy.predictor import load_policy
from rlfleet.shared.storage.layout import BEST_POLICY, RunLayout
from tests.support.policies import PENDULUM, manifest, policy_state


def run_with_best_policy(data_dir: Path) -> Path:
    m = manifest(PENDULUM, "tanh_gaussian", (16,))
    layout = RunLayout(data_dir, "pendulum__s0__20260101-000000")
    layout.best.mkdir(parents=True)
    state = {k: torch.from_numpy(v) for k, v in policy_state(m, seed=5).items()}
    (layout.best / BEST_POLICY).write_bytes(policy_bytes(state, m))
    return layout.run_dir


def test_a_run_s_best_policy_exports_to_onnx_and_torchscript(tmp_path: Path) -> None:
    import onnxruntime

    run_dir = run_with_best_policy(tmp_path)
    obs = np.random.default_rng(0).normal(size=(100, 3)).astype(np.float32)
    expected = load_policy(run_dir).predict(obs)
    result = CliRunner().invoke(app, ["export", str(run_dir), str(tmp_path / "policy.onnx")])
    assert result.exit_code == 0, result.output
    assert result.output == (f"wrote {tmp_path / 'policy.onnx'} (onnx) from {run_dir / 'best' / BEST_POLICY}: input "
                             "'obs' float32[N, 3], output 'actions' float32[N, 1] (raw observations in, env actions "
                             "out)\n")
    session = onnxruntime.InferenceSession(str(tmp_path / "policy.onnx"), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(["actions"], {"obs": obs})[0], expected, rtol=1e-5, atol=1e-5)
    result = CliRunner().invoke(app, ["export", str(run_dir), str(tmp_path / "policy.pt"), "--format", "torchscript"])
    assert result.exit_code == 0, result.output
    scripted = torch.jit.load(str(tmp_path / "policy.pt"))
    np.testing.assert_allclose(scripted(torch.from_numpy(obs)).detach().numpy(), expected, rtol=1e-5, atol=1e-5)


def test_what_is_not_a_policy_is_one_line_naming_it(tmp_path: Path) -> None:
    (tmp_path / "model.zip").write_bytes(b"PK\x03\x04" + bytes(64))
    result = CliRunner().invoke(app, ["export", str(tmp_path / "model.zip"), str(tmp_path / "out.onnx")])
    assert result.exit_code == 2
    assert result.stderr == (f"rlfleet export: {tmp_path / 'model.zip'} is a zip archive (a PyTorch .pt or "
                             "Stable-Baselines3 .zip save?), not an rlfleet policy: rlfleet's policies are "
                             ".safetensors files, in a run's best/ or store/policies/\n")
    assert not (tmp_path / "out.onnx").exists()


def test_a_run_without_a_policy_is_one_line(tmp_path: Path) -> None:
    run_dir = RunLayout(tmp_path, "empty").run_dir
    run_dir.mkdir(parents=True)
    result = CliRunner().invoke(app, ["export", str(run_dir), str(tmp_path / "out.onnx")])
    assert result.exit_code == 2 and result.stderr.startswith(f"rlfleet export: {run_dir} holds no policy: ")
    assert result.stderr.count("\n") == 1
