"""client.py -- submit N jobs to the agentbox.run task and print one JSON line per result.

  /usr/bin/python3 client.py N TOKEN

Job i runs a small Python program through the sandbox: most print "job i" and exit 0; every
tenth (i % 10 == 7) exits 3; every tenth (i % 10 == 9) sleeps past its 1 s timeout. TOKEN is
put in each run's environment, so the test can look for leftover processes by it.
"""
import json
import sys

from tasks import app, run


def spec(i, token):
    if i % 10 == 7:
        code = "import sys\nprint('job %d fails')\nsys.exit(3)\n" % i
    elif i % 10 == 9:
        code = "import time\nprint('job %d sleeps', flush=True)\ntime.sleep(30)\n" % i
    else:
        code = "print('job %d')\n" % i
    return {"language": "python", "code": code, "env": {"AB_CELERY_TOKEN": token},
            "limits": {"timeout": "1s" if i % 10 == 9 else "20s"}}


def main():
    n, token = int(sys.argv[1]), sys.argv[2]
    pending = [(i, run.delay(spec(i, token))) for i in range(n)]
    for i, res in pending:
        try:
            out = res.get(timeout=90)
        except Exception as e:  # reported, and the test fails on it
            out = {"error": repr(e)}
        out["job"] = i
        out["task_id"] = res.id
        print(json.dumps(out), flush=True)
        res.forget()
    app.close()


if __name__ == "__main__":
    main()
