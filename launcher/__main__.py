from rlfleet.launcher.cli import app

app()
