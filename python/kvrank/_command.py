"""The `kvrank` command of a pip-installed package: runs the command line built beside the module
(kvrank/bin/kvrank), with the same arguments, output and exit status."""
import os
import sys


def main():
    command = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "kvrank")
    if not os.access(command, os.X_OK):
        sys.exit(f"kvrank: {command} is missing: this kvrank package was not installed by pip "
                 f"(a CMake build has its command at BUILD/kvrank)")
    os.execv(command, ["kvrank", *sys.argv[1:]])


if __name__ == "__main__":
    main()
