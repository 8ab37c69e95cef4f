"""tasks.py -- a Celery task that runs an agent's code in an agentbox sandbox.

agentbox is stateless per run: many machines means many workers of an existing job system.
Each worker runs `agentbox run --spec - --report-fd N` (docs/spec.md, the CLI's JSON door):
the spec goes in on stdin, the report comes back on a descriptor of the worker's own, and the
task returns it, with the name of the worker that took the job.

Configuration (environment of the worker):
  AGENTBOX_CELERY_BROKER  redis URL of the broker and result backend
                          (default redis://127.0.0.1:6379/0)
  AGENTBOX                the agentbox binary (default: agentbox on PATH)
"""
import json
import os
import subprocess
import tempfile

from celery import Celery

BROKER = os.environ.get("AGENTBOX_CELERY_BROKER", "redis://127.0.0.1:6379/0")
AGENTBOX = os.environ.get("AGENTBOX", "agentbox")

app = Celery("agentbox_tasks", broker=BROKER, backend=BROKER)
app.conf.update(
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    # one job at a time per worker process, acknowledged when it is done: a worker that dies
    # mid-run gives the job back instead of losing it
    worker_prefetch_multiplier=1,
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    result_expires=3600,
)


@app.task(bind=True, name="agentbox.run", time_limit=600)
def run(self, spec):
    """Runs one spec; returns {"worker", "exit", "report"}. The spec's own limits (timeout,
    memory, ...) bound the run; Celery's time_limit is only a backstop."""
    spec = dict(spec, quiet=True)  # the output is in the report, not on the worker's stdout
    spec.setdefault("rm", True)    # nothing of the run is kept on the worker
    with tempfile.TemporaryFile() as rep:
        proc = subprocess.run(
            [AGENTBOX, "run", "--spec", "-", "--report-fd", str(rep.fileno())],
            input=json.dumps(spec).encode(), stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, pass_fds=(rep.fileno(),), check=False)
        rep.seek(0)
        text = rep.read().decode()
    report = json.loads(text) if text.strip() else None
    return {"worker": self.request.hostname, "exit": proc.returncode, "report": report,
            "stderr": proc.stderr.decode(errors="replace")[-2000:]}
