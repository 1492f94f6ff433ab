"""Unpack one folder of a wheel into a target folder, atomically (a half-written target never exists).

    python scripts/unpack_wheel_folder.py WHEEL PREFIX TARGET [--drop RELATIVE_PATH ...]
"""

import argparse
import pathlib
import shutil
import zipfile


def unpack(wheel: str, prefix: str, target: pathlib.Path, drop: list[str]) -> None:
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if name.startswith(prefix) and not name.endswith("/"):
                destination = staging / name[len(prefix):]
                destination.parent.mkdir(parents=True, exist_ok=True)
                destination.write_bytes(archive.read(name))
    for relative in drop:
        (staging / relative).unlink(missing_ok=True)
    staging.rename(target)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel")
    parser.add_argument("prefix", help="folder inside the wheel, with a trailing slash")
    parser.add_argument("target", type=pathlib.Path)
    parser.add_argument("--drop", action="append", default=[], help="a file to leave out, relative to the target")
    arguments = parser.parse_args()
    unpack(arguments.wheel, arguments.prefix, arguments.target, arguments.drop)
