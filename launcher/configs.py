"""Run configs by name or by path: `--config NAME` names a config that ships with rlfleet (configs/, package data in
a wheel), `--config ./my.yaml` a file. So `rlfleet up` works from any directory after `pip install`, and
the configs the docs name are the ones the installed version was tested with."""

from __future__ import annotations

from pathlib import Path

from rlfleet.shared.config.hints import did_you_mean

# The repository's configs/, or rlfleet/configs/ in a wheel: both sit beside this package's folder.
PACKAGED = Path(__file__).resolve().parent.parent / "configs"
DEFAULT = "cartpole_dqn"  # the README's default run (dashes or underscores: either names it)


class UnknownConfig(ValueError):
    """`--config` is neither a file nor the name of a packaged config."""


def packaged() -> dict[str, Path]:
    """Each packaged config by its name: the file's stem with dashes (`my_run.yaml` would be `my-run`)."""
    return {p.stem.replace("_", "-"): p for p in sorted(PACKAGED.glob("*.yaml"))}


def resolve_config(value: str | Path) -> Path:
    """The file `value` names: a path to a file, else the packaged config of that name (underscores or dashes).
    A value that looks like a path (a directory part or a YAML suffix) is a path even when missing, so the loader
    names the file; UnknownConfig for a bare name that matches nothing, suggesting close names."""
    text = str(value)
    path = Path(text)
    if path.is_file() or len(path.parts) > 1 or path.suffix in (".yaml", ".yml"):
        return path
    configs = packaged()
    name = text.replace("_", "-")
    if name in configs:
        return configs[name]
    raise UnknownConfig(f"--config {text}: no such file, and no packaged config of that name"
                        f"{did_you_mean(name, configs) or ''}; packaged configs: {', '.join(configs)}")
