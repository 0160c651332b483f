"""Verifying attempts: answer extraction and forms (answer_*.py), math
(math_answers.py), the verifiers (verifiers.py), hack probes and the
sanity check of verifiers (hack_probes.py, sanity.py), the rubric judge
(judge/) and the code sandbox (sandbox/). Model output is hostile input
here: keep every bound.
"""
