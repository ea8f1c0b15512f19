"""Prints where this python3 imports pure modules from for an install prefix,
relative to the prefix (packaging/install_python_modules.cmake).

    python3 python_site_dir.py PREFIX     # ~/.local -> lib/python3.11/site-packages

The user base (site.getuserbase(): PYTHONUSERBASE, else ~/.local) gets the
user site; /usr gets Debian's deb_system scheme (lib/python3/dist-packages)
and /usr/local its posix_local scheme (local/lib/python3.X/dist-packages
under /usr) where this python3 has them (sysconfig.get_scheme_names());
any other prefix the posix_prefix scheme (lib/pythonX.Y/site-packages),
which that prefix's python, or PYTHONPATH, reads. Exit 2 when the answer is
not under the prefix.
"""
import os
import site
import sys
import sysconfig


def site_dir(prefix: str) -> str:
    schemes = sysconfig.get_scheme_names()
    if prefix == os.path.normpath(site.getuserbase()):
        return sysconfig.get_path("purelib", f"{os.name}_user")
    if prefix == "/usr" and "deb_system" in schemes:
        return sysconfig.get_path("purelib", "deb_system")
    if prefix == "/usr/local" and "posix_local" in schemes:
        return sysconfig.get_path("purelib", "posix_local")
    return sysconfig.get_path("purelib", "posix_prefix", vars={"base": prefix, "platbase": prefix})


def main() -> int:
    prefix = os.path.normpath(os.path.abspath(sys.argv[1]))
    path = os.path.normpath(site_dir(prefix))
    rel = os.path.relpath(path, prefix)
    if rel.startswith(".."):
        print(f"python_site_dir.py: {path} is not under the prefix {prefix}", file=sys.stderr)
        return 2
    print(rel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
