"""Run folders made beneath the results folder without following links.

Run ids are predictable (`farm run --dry-run` prints them), so anyone who can write into the
results folder could plant `results/<experiment>/<run-id>` as a link to somewhere else and have
farm write a run's files there. The results folder itself is the user's choice and may be a link;
beneath it, each folder is made (or found) one name at a time relative to its parent's
descriptor with O_NOFOLLOW, and the files of a run are created with O_NOFOLLOW too. A link in
the way is a RunFolderRefused naming it, and nothing is written through it.

    folder = make_run_dir(results, "lstm_gpu_load", run_id)   # results/lstm_gpu_load/<run-id>
    with create_file(folder / "stdout.jsonl") as out: ...
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path
from typing import BinaryIO

from farm.errors import EnvironmentProblem
from farm.store.location import check_component

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC


class RunFolderRefused(EnvironmentProblem):
    """Something other than a folder (a link, a file) stands where a run's folder or file goes."""


def make_run_dir(results: Path, experiment: str, run_id: str) -> Path:
    """results/<experiment>/<run-id>, made where missing; RunFolderRefused when a part of it
    beneath `results` is a link or not a folder."""
    names = [check_component(experiment, "experiment"), check_component(run_id, "run id")]
    results.mkdir(parents=True, exist_ok=True)
    fd = os.open(results, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        path = results
        for name in names:
            path = path / name
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o777, dir_fd=fd)
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as error:
                raise _refused(path, error) from None
            os.close(fd)
            fd = child
    finally:
        os.close(fd)
    return path


def create_file(path: Path) -> BinaryIO:
    """`path` opened for writing (created or emptied), never through a link."""
    try:
        fd = os.open(path, _FILE_FLAGS, 0o666)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.EISDIR):
            raise _refused(path, error) from None
        raise
    return os.fdopen(fd, "wb")


def _refused(path: Path, error: OSError) -> RunFolderRefused:
    what = "a link" if path.is_symlink() else (error.strerror or str(error)).lower()
    return RunFolderRefused(
        f"{path}: {what}; farm writes a run's files only into folders it made beneath the results folder",
        hint="remove it and run again",
    )
