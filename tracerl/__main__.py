from tracerl.cli import app

app()
