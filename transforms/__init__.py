"""The funnel's stages: each a Beam-free function over plain dicts under a
thin PTransform (stage.py). One package per stage (dedup/, decontam/,
sample/, verify/, ...) holds its rules; batch/ is the batch engine that
runs read..decontaminate on chunks. Imports schemas/, never pipeline/
(tests/test_structure.py); no private name crosses a package.
"""
