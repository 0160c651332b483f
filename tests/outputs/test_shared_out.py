"""An output folder another user can write in, or folders and files another
user planted in it, are never used: a second user could otherwise swap the
run's staging folder for a link of theirs (root then writes through their
links and reads their staged rows), or have their files adopted as an
earlier set and published as the run's (attacks/a1, a2 in review)."""

from __future__ import annotations

import os
import pwd

import pytest

from tasksieve.pipeline.outputs.output_set import OutputSet
from tasksieve.pipeline.outputs.safe_fs import NotAFolder, real_subdir
from tasksieve.pipeline.run.errors import UsageError
from tasksieve.pipeline.run.folders import hold_output

NOBODY = 65534
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to plant another user's files")


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o757])
def test_out_writable_by_others_is_refused(tmp_path, mode):
    out = tmp_path / "out"
    out.mkdir()
    os.chmod(out, mode)
    with pytest.raises(UsageError, match="writable by other users"):
        with hold_output(out, "dedup"):
            pass
    assert not (out / ".tasksieve.lock").exists()


@root_only
def test_out_writable_by_a_group_holding_another_user_is_refused(tmp_path):
    gid = pwd.getpwnam("nobody").pw_gid  # nobody's own group holds nobody
    out = tmp_path / "out"
    out.mkdir()
    os.chown(out, 0, gid)
    os.chmod(out, 0o775)
    with pytest.raises(UsageError, match="writable by other users"):
        with hold_output(out, "dedup"):
            pass


def test_a_private_group_may_write(tmp_path, monkeypatch):
    """umask 002 leaves folders group-writable by the user's private group,
    which holds only them: not shared. The same mode with a group that
    holds another user is."""
    from tasksieve.pipeline.outputs import safe_fs

    out = tmp_path / "out"
    out.mkdir()
    os.chmod(out, 0o775)
    os.chmod(tmp_path, 0o755)
    monkeypatch.setattr(safe_fs, "_group_has_others", lambda gid: False)
    with hold_output(out, "dedup"):
        pass
    monkeypatch.setattr(safe_fs, "_group_has_others", lambda gid: True)
    with pytest.raises(UsageError, match="writable by other users"):
        with hold_output(out, "dedup"):
            pass


def test_group_members_are_read_from_the_group_database():
    from tasksieve.pipeline.outputs.safe_fs import _group_has_others

    me = pwd.getpwuid(os.geteuid())
    others = [p for p in pwd.getpwall() if p.pw_uid != me.pw_uid]
    if not others:
        pytest.skip("no other user on this machine")
    assert _group_has_others(others[0].pw_gid) or others[0].pw_gid == me.pw_gid
    assert _group_has_others(2**31 - 7)  # no such group: taken as shared


@root_only
def test_a_folder_above_out_owned_by_another_user_is_refused(tmp_path):
    above = tmp_path / "above"
    above.mkdir()
    os.chown(above, NOBODY, NOBODY)
    os.chmod(above, 0o755)
    with pytest.raises(UsageError, match="owned by another user"):
        with hold_output(above / "out", "dedup"):
            pass


def test_private_out_is_used(tmp_path):
    out = tmp_path / "out"
    out.mkdir(mode=0o755)
    os.chmod(tmp_path, 0o755)
    with hold_output(out, "dedup"):
        pass


@root_only
def test_planted_foreign_folder_is_not_used(tmp_path):
    (tmp_path / "_staging").mkdir()
    os.chown(tmp_path / "_staging", NOBODY, NOBODY)
    with pytest.raises(NotAFolder, match="another user"):
        real_subdir(tmp_path, "_staging")
    (tmp_path / "runs").mkdir()
    os.chmod(tmp_path / "runs", 0o777)
    with pytest.raises(NotAFolder, match="another user"):
        real_subdir(tmp_path, "runs")


@root_only
def test_planted_loose_file_is_not_adopted(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    planted = out / "learnable.parquet"
    planted.write_bytes(b"PAR1 forged")
    os.chown(planted, NOBODY, NOBODY)
    os.chmod(planted, 0o666)
    with OutputSet(out, "s1") as outset:
        assert outset.previous is None
        assert not (outset.dir / "learnable.parquet").exists()


def test_validate_refuses_an_output_folder_others_can_write(tmp_path):
    from tasksieve.pipeline.validate.command import UsageError as ValidateUsageError, _output_folder

    out = tmp_path / "validation"
    out.mkdir()
    os.chmod(out, 0o777)
    with pytest.raises(ValidateUsageError, match="writable by other users"):
        _output_folder(out, [])
    os.chmod(out, 0o755)
    os.chmod(tmp_path, 0o755)
    assert _output_folder(out, []) == out
