"""The sample's fourth vendor: exact, code (run in the sandbox) and rubric
tasks, so the demo shows every verifier. The rubric tasks carry
`graded_attempts` (hand-graded responses, one bool per criterion) so the
judge's agreement with people is measured before anything is sampled;
with the bundled 135M model as judge it is low, and the gate says so.
Hand-written; the same bytes on every call."""

from __future__ import annotations

EXACT = [
    ("What is the capital of France? Answer with one word.", "Paris"),
    ("Which planet is known as the Red Planet? Answer with one word.", "Mars"),
    ("What is the chemical symbol for gold?", "Au"),
    ("How many days are there in a leap year? Answer with a number written in digits.", "366"),
]

CODE = [
    (
        "Write a Python function reverse_string(s) that returns the string s reversed.",
        "reverse_string",
        "def reverse_string(s):\n    return s[::-1]\n",
        "def check(candidate):\n    assert candidate('abc') == 'cba'\n    assert candidate('') == ''\n"
        "    assert candidate('racecar') == 'racecar'\n",
    ),
    (
        "Write a Python function is_even(n) that returns True when the integer n is even and False otherwise.",
        "is_even",
        "def is_even(n):\n    return n % 2 == 0\n",
        "def check(candidate):\n    assert candidate(4) is True\n    assert candidate(7) is False\n"
        "    assert candidate(0) is True\n",
    ),
    (
        "Write a Python function largest(xs) that returns the largest number in a non-empty list xs.",
        "largest",
        "def largest(xs):\n    return max(xs)\n",
        "def check(candidate):\n    assert candidate([3, 9, 2]) == 9\n    assert candidate([-5]) == -5\n"
        "    assert candidate([1, 1, 0]) == 1\n",
    ),
]

# (prompt, criteria, graded attempts as (response, criteria_met, grader)).
RUBRIC = [
    (
        "Explain in two or three sentences why the sky is blue.",
        [
            "Names Rayleigh scattering as the cause.",
            "States that shorter (blue) wavelengths are scattered more than longer (red) ones.",
            "Is at most three sentences long.",
        ],
        [
            (
                "Sunlight is scattered by the molecules of the air, which is called Rayleigh scattering. Short blue "
                "wavelengths scatter far more than long red ones, so blue light reaches us from every direction.",
                [True, True, True],
                "grader_1",
            ),
            ("The sky is blue because it reflects the colour of the oceans.", [False, False, True], "grader_1"),
            (
                "It is Rayleigh scattering. Light hits the air. The air glows. That is why. The end. Really.",
                [True, False, False],
                "grader_2",
            ),
            (
                "Blue light has a shorter wavelength, and shorter wavelengths scatter more in the atmosphere.",
                [False, True, True],
                "grader_2",
            ),
        ],
    ),
    (
        "Write a polite two-sentence email declining a meeting invitation for Friday.",
        ["Declines the meeting.", "Mentions Friday.", "Is polite."],
        [
            (
                "Thank you for the invitation. Unfortunately I cannot attend the meeting on Friday.",
                [True, True, True],
                "grader_1",
            ),
            ("I will be there on Friday, see you then.", [False, True, False], "grader_1"),
            ("No.", [True, False, False], "grader_2"),
            ("Thanks so much for thinking of me! Sadly I have to decline this one.", [True, False, True], "grader_2"),
        ],
    ),
    (
        "Give one benefit of regular exercise and explain it in one sentence.",
        [
            "Names a real health benefit of exercise.",
            "Gives an explanation of how exercise causes it.",
            "Is a single sentence.",
        ],
        [
            (
                "Regular exercise strengthens the heart, because training makes the heart muscle pump more blood per beat.",
                [True, True, True],
                "grader_1",
            ),
            ("Exercise is good.", [False, False, True], "grader_2"),
            ("Exercise improves sleep. It tires the body, so you fall asleep faster.", [True, True, False], "grader_1"),
            ("Exercise makes you taller, since stretching pulls the bones longer.", [False, True, True], "grader_2"),
        ],
    ),
    (
        "Summarise the water cycle for a ten-year-old in at most three sentences.",
        ["Mentions evaporation.", "Mentions that water falls back to the ground.", "Uses words a ten-year-old knows."],
        [
            (
                "The sun warms water so it evaporates into the sky. It cools into clouds, and then falls back as rain "
                "or snow.",
                [True, True, True],
                "grader_1",
            ),
            (
                "Hydrological fluxes involve latent heat transport and advective moisture convergence.",
                [False, False, False],
                "grader_2",
            ),
            ("Water goes up into the sky and comes back down as rain.", [False, True, True], "grader_1"),
            (
                "Evapotranspiration and precipitation are components of the hydrological cycle.",
                [True, True, False],
                "grader_2",
            ),
        ],
    ),
]


def mixed_tasks() -> list[dict]:
    rows, n = [], 0
    base = {"source": "vendor_d", "batch_id": "d-2026-11", "license": "CC-BY-4.0", "expert_minutes": 6.0}
    for prompt, answer in EXACT:
        n += 1
        rows.append(
            dict(
                base,
                task_id=f"D-{n:03d}",
                domain="exact",
                prompt=prompt,
                answer=answer,
                created_at=f"2026-11-{n:02d}T09:00:00Z",
            )
        )
    for prompt, entry, solution, tests in CODE:
        n += 1
        rows.append(
            dict(
                base,
                task_id=f"D-{n:03d}",
                domain="code",
                prompt=prompt,
                entry_point=entry,
                reference_solution=solution,
                tests=tests,
                created_at=f"2026-11-{n:02d}T09:00:00Z",
                expert_minutes=15.0,
            )
        )
    for prompt, criteria, graded in RUBRIC:
        n += 1
        rows.append(
            dict(
                base,
                task_id=f"D-{n:03d}",
                domain="rubric",
                prompt=prompt,
                rubric=criteria,
                graded_attempts=[{"response": r, "criteria_met": m, "grader": g} for r, m, g in graded],
                meta={"rubric_author": "author_a" if n % 2 else "author_b"},
                created_at=f"2026-11-{n:02d}T09:00:00Z",
                expert_minutes=20.0,
            )
        )
    return rows
