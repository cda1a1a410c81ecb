from tracker.cli import app

app()
