from launcher.cli import app

app()
