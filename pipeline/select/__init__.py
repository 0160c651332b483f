"""`tasksieve select`: choosing a training set under a budget from a run's
learnable pool (command.py) and writing the selection (write.py). The
choice itself is Beam-free and lives in transforms/select/.
"""
