"""The code sandbox: guard.py, attempt.py and harness.py run *inside* the
sandbox as scripts and import nothing from tasksieve; runner.py,
isolation.py and processes.py start and bound them.
"""
