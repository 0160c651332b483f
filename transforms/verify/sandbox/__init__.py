"""The code sandbox: codec.py, seccomp.py, guard.py, attempt.py,
harness.py and worker.py run *inside* the sandbox (programs.py hands them
over as sources) and import nothing from tasksieve; runner.py, pool.py,
mounts.py, verdict.py, isolation.py and processes.py start and bound them.
"""
