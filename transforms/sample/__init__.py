"""Sampling attempts: the stage (stage.py), the adaptive policies
(policy.py), classification into learnable / too easy / too hard
(classify.py) and the attempt cache with its key (attempt_cache.py,
cache_auth.py). A setting that changes an attempt must be in the cache key
(tests/test_structure.py checks every [sampling] field is decided).
"""
