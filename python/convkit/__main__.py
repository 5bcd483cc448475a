"""python -m convkit --info: print convkit's build configuration."""
import argparse

from ._config import show_config

parser = argparse.ArgumentParser(prog="python -m convkit")
parser.add_argument("--info", action="store_true", help="print version, build configuration and kernels")
args = parser.parse_args()
if args.info:
    show_config()
else:
    parser.print_help()
