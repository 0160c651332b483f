"""README's example commands run as printed (issue 47): every command of
every ```bash block is parsed from README.md, so the test cannot drift from
it, and run in order in a fresh folder: `.venv/bin/tasksieve ARGS` as
main(ARGS) in this process (the sampling model replaced by the scripted one
of tests/fakes.py: the real engine is tests/test_e2e_vllm.py's), `.venv/bin/
python ARGS` with this interpreter. The set-up scripts are not run here:
scripts/demo.sh's layout is tests/test_demo_script.py's, scripts/test.sh is
this suite."""

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
# Whole scripts, run elsewhere (see the module doc); named, so a new one fails here until it is placed.
NOT_RUN_HERE = {"./scripts/demo.sh", "./scripts/test.sh", "./scripts/setup.sh"}


def readme_commands() -> list[list[str]]:
    """Each shell command of README's bash blocks, as argv (comments
    dropped, a quoted string continued over lines joined)."""
    text = README.read_text(encoding="utf-8")
    commands = []
    for block in text.split("```bash\n")[1:]:
        pending = ""
        for line in block.split("\n```", 1)[0].splitlines():
            pending = f"{pending}\n{line}" if pending else line
            try:
                argv = shlex.split(pending, comments=True)
            except ValueError:  # an open quote: the command goes on on the next line
                continue
            pending = ""
            if argv:
                commands.append(argv)
        assert not pending, f"README: unterminated command {pending!r}"
    return commands


def test_readme_commands_are_all_of_a_kind_this_test_runs():
    commands = readme_commands()
    assert len(commands) >= 12
    for argv in commands:
        assert argv[0] in (".venv/bin/tasksieve", ".venv/bin/python", "echo", "less") or argv[0] in NOT_RUN_HERE, argv
        assert not any(a.startswith("[") for a in argv), f"README shows a placeholder, not a command: {argv}"


@pytest.mark.slow
def test_readme_examples_run_as_printed(tmp_path, monkeypatch, capsys):
    from fakes import better_scripted_backend
    from tasksieve.pipeline.run import preflight
    from tasksieve.pipeline.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(preflight, "get_backend", lambda *a, **k: better_scripted_backend())
    last = None
    ran = []
    for argv in readme_commands():
        if argv[0] in NOT_RUN_HERE:
            continue
        if argv[0] == "echo":
            assert argv[1:] == ["$?"] and last is not None, argv
            continue
        if argv[0] == "less":
            assert Path(argv[1]).is_file(), argv
            continue
        if argv[0] == ".venv/bin/python":
            proc = subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, (argv, proc.stderr[-2000:])
            assert proc.stdout.strip(), argv
            last = 0
        else:
            last = main(argv[1:])
            out = capsys.readouterr()
            allowed = (0, 1) if argv[1] == "validate" else (0,)  # validate's 1 is a verdict
            assert last in allowed, (argv, last, out.err[-3000:])
        ran.append(argv[1] if argv[0] == ".venv/bin/tasksieve" else "python")
    assert {"sample-data", "run", "select", "export", "validate", "python"} <= set(ran), ran
    # What the examples say they make is there.
    import pyarrow.parquet as pq

    selected = pq.read_table(tmp_path / "out" / "selected.parquet").to_pylist()
    learnable = pq.read_table(tmp_path / "out" / "learnable.parquet").num_rows
    assert 0 < len(selected) < learnable and sum(r["price_usd"] for r in selected) <= 50  # --budget-usd 50
    for d in ("train_verl", "train_trl", "train_orl", "train_hf"):
        assert any((tmp_path / d).iterdir()), d
    assert (tmp_path / "validation" / "report.html").is_file()
    assert (tmp_path / "validation" / "data_docs" / "index.html").is_file()
